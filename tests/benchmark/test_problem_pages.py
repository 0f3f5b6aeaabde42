"""The problem list and problem pages: every problem with its baseline result, in a fixed number of queries."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from benchmark import services
from benchmark.models import Problem


def _evaluate_all_mini_baselines():
    for problem in Problem.objects.filter(case="mini"):
        services.request_evaluation(problem.baseline_kernel, "trn1")


def test_the_problem_list_shows_all_14_problems_with_baseline_latency_and_peak_fraction(client, fake_pipeline, nkibench):
    _evaluate_all_mini_baselines()
    response = client.get(reverse("benchmark:problems"))
    assert response.status_code == 200
    rows = response.context["rows"]
    assert len(rows) == 14
    assert all([cell["problem"].case for cell in row["cases"]] == ["mini", "full"] for row in rows)
    minis = [row["cases"][0]["baseline"] for row in rows]
    assert all(e.latency_ms is not None and e.peak_fraction is not None for e in minis)
    assert all(row["cases"][1]["baseline"] is None for row in rows)  # full cases: not evaluated by default
    assert b"of peak" in response.content and b"gqa_full" in response.content


def test_the_problem_list_costs_the_same_queries_for_2_problems_or_28(client, fake_pipeline, nkibench):
    _evaluate_all_mini_baselines()
    with CaptureQueriesContext(connection) as many:
        client.get(reverse("benchmark:problems"))
    Problem.objects.exclude(slug="silu").delete()
    with CaptureQueriesContext(connection) as few:
        client.get(reverse("benchmark:problems"))
    assert len(many) == len(few) <= 4


def test_the_problem_list_says_how_to_load_the_suite_when_empty(client, db):
    response = client.get(reverse("benchmark:problems"))
    assert b"load_suite nkibench" in response.content


def test_a_problem_page_shows_shapes_reference_peak_per_platform_and_its_kernels(client, fake_pipeline, silu_mini):
    services.request_evaluation(silu_mini.baseline_kernel, "trn1")
    response = client.get(silu_mini.get_absolute_url())
    assert response.status_code == 200
    content = response.content.decode()
    assert "M=256 N=512" in content
    assert '<span class="tok-definition">forward</span>' in content  # the reference, highlighted
    peaks = response.context["peaks"]
    assert set(peaks) == {"trn1", "trn2", "trn3"} and all(value > 0 for value in peaks.values())
    assert [row["kernel"] for row in response.context["kernel_rows"]] == [silu_mini.baseline_kernel]
    assert response.context["kernel_rows"][0]["best"]["trn1"].correct


def test_a_problem_page_costs_the_same_queries_for_one_kernel_or_many(client, fake_pipeline, silu_mini, engineer):
    services.request_evaluation(silu_mini.baseline_kernel, "trn1")
    with CaptureQueriesContext(connection) as one:
        client.get(silu_mini.get_absolute_url())
    for index in range(5):
        services.upload_kernel(
            engineer, kernel_source=silu_mini.baseline_kernel.source + f"\n# variant {index}\n", problem=silu_mini
        )
    with CaptureQueriesContext(connection) as six:
        response = client.get(silu_mini.get_absolute_url())
    assert len(response.context["kernel_rows"]) == 6
    assert len(one) == len(six)


@pytest.mark.parametrize("who", ["anonymous", "teammate"])
def test_a_private_problem_page_is_a_404_for_everyone_but_its_owner(client, engineer, teammate, who, db):
    from tests.benchmark.test_api_problems import REFERENCE

    problem = services.create_custom_problem(engineer, REFERENCE, name="double.py")
    if who == "teammate":
        client.force_login(teammate)
    assert client.get(problem.get_absolute_url()).status_code == 404
    client.force_login(engineer)
    assert client.get(problem.get_absolute_url()).status_code == 200
