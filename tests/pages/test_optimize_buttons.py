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


def test_optimizing_someone_elses_kernel_starts_the_form_from_a_copy_of_its_source(login, engineer, teammate, problem):
    from benchmark.services import create_kernel

    theirs, _ = create_kernel(problem, "def kernel(x):\n    return x * 3\n", author=teammate)
    html = login(engineer).get(f"/runs/new/?problem={problem.pk}&kernel={theirs.pk}").content.decode()
    assert 'value="upload" selected' in html and "return x * 3" in html


def test_a_launched_run_is_not_announced_as_queued_forever(login, engineer, problem):
    client = login(engineer)
    form = {"problem": str(problem.pk), "start": "baseline", "platform": "trn1", "backend": "simulator",
            "agent": "offline", "iterations": "1", "beam_width": "1", "plans_per_candidate": "1",
            "samples_per_plan": "1", "memory_size": "0", "seed": "0"}
    html = client.post("/runs/new/", form, follow=True).content.decode()
    assert "launched" in html and "is queued" not in html
