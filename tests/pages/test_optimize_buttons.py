"""Every kernel page offers "Optimize this kernel" and every problem page "Optimize", both into the run form."""

from __future__ import annotations

from django.urls import reverse


def test_the_problem_page_links_to_the_run_form_for_that_problem(client, problem):
    html = client.get(problem.get_absolute_url()).content.decode()
    assert f'{reverse("optimizer:run_create")}?problem={problem.pk}"' in html
    assert ">Optimize</a>" in html


def test_the_kernel_page_links_to_the_run_form_starting_from_that_kernel(client, problem):
    kernel = problem.baseline_kernel
    html = client.get(kernel.get_absolute_url()).content.decode()
    assert f'{reverse("optimizer:run_create")}?problem={problem.pk}&kernel={kernel.pk}"' in html
    assert "Optimize this kernel" in html
