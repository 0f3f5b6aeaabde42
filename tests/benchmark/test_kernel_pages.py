"""Kernel list, kernel page (source, evaluations, profile, timeline) and the htmx evaluation fragment."""

from __future__ import annotations

from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from benchmark import services
from benchmark.models import Evaluation, EvaluationStatus


def test_the_kernel_list_costs_the_same_queries_for_one_kernel_or_many(client, fake_pipeline, silu_mini, engineer):
    services.request_evaluation(silu_mini.baseline_kernel, "trn1")
    client.force_login(engineer)
    url = reverse("benchmark:kernels")
    client.get(url)  # the session and role lookups happen once per request either way
    with CaptureQueriesContext(connection) as before:
        client.get(url, {"problem": silu_mini.pk})
    for index in range(4):
        services.upload_kernel(engineer, kernel_source=f"{silu_mini.baseline_kernel.source}\n# v{index}\n", problem=silu_mini)
    with CaptureQueriesContext(connection) as after:
        response = client.get(url, {"problem": silu_mini.pk})
    assert len(response.context["rows"]) == 5
    assert len(before) == len(after)


def test_the_kernel_page_shows_highlighted_numbered_source_and_the_result(client, fake_pipeline, silu_mini):
    evaluation = services.request_evaluation(silu_mini.baseline_kernel, "trn1")
    response = client.get(silu_mini.baseline_kernel.get_absolute_url())
    content = response.content.decode()
    assert response.status_code == 200
    assert '<span class="tok-keyword">def</span> <span class="tok-definition">kernel</span>' in content
    assert 'id="L1"' in content
    assert response.context["evaluation"] == evaluation
    assert "hbm_read_bytes" in content  # profile counters
    assert "data-plotly-figure=" in content  # the per-engine timeline, drawn by the page's plotly.js
    assert "vendor/plotly.min.js" in content


def test_a_failing_evaluation_shows_its_kind_message_and_marks_the_line(client, fake_pipeline, silu_mini, engineer):
    from engine.evaluator.result import ErrorKind, EvaluationResult

    fake_pipeline.next_results.append(
        EvaluationResult.failure(ErrorKind.RUNTIME_ERROR, "nl.load: partition dimension 256 exceeds 128", line=3)
    )
    kernel, _, _ = services.upload_kernel(engineer, kernel_source="x = 1\ny = 2\nz = 3\n", problem=silu_mini)
    content = client.get(kernel.get_absolute_url()).content.decode()
    assert "Runtime error" in content
    assert "partition dimension 256 exceeds 128" in content
    assert '<tr id="L3" class="error-line">' in content


def test_a_running_evaluation_fragment_polls_until_it_is_done(client, fake_pipeline, silu_mini):
    evaluation = Evaluation.objects.create(
        kernel=silu_mini.baseline_kernel, platform="trn1", backend="simulator",
        backend_version=services.backend_version("simulator"), status=EvaluationStatus.RUNNING,
        started=timezone.now(),
    )
    url = reverse("benchmark:evaluation_fragment", args=[evaluation.pk])
    pending = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert 'hx-trigger="every 1s"' in pending and "spinner" in pending
    services.save_result(evaluation.pk, fake_pipeline(platform="trn1", backend="simulator"))
    done = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert "hx-trigger" not in done
    assert "Latency (predicted)" in done


def test_an_interrupted_evaluation_stops_polling_and_offers_a_rerun_to_engineers(client, engineer, silu_mini, settings):
    settings.ACCELOPT_EVALUATION_STALE_AFTER_S = 600
    evaluation = Evaluation.objects.create(
        kernel=silu_mini.baseline_kernel, platform="trn1", backend="simulator",
        backend_version=services.backend_version("simulator"), status=EvaluationStatus.RUNNING,
        started=timezone.now() - timedelta(hours=2),
    )
    client.force_login(engineer)
    content = client.get(reverse("benchmark:evaluation_fragment", args=[evaluation.pk])).content.decode()
    assert "interrupted" in content and "hx-trigger" not in content
    assert "Run it again" in content


def test_anonymous_visitors_can_read_kernels_but_not_request_evaluations(client, fake_pipeline, silu_mini):
    kernel = silu_mini.baseline_kernel
    assert client.get(kernel.get_absolute_url()).status_code == 200
    response = client.post(reverse("benchmark:kernel_evaluate", args=[kernel.pk]), {"platform": "trn2"})
    assert response.status_code == 302 and "/accounts/login" in response["Location"]
    assert fake_pipeline.calls == []


def test_an_engineer_evaluates_a_kernel_on_another_platform_from_its_page(client, engineer, fake_pipeline, silu_mini):
    kernel = silu_mini.baseline_kernel
    client.force_login(engineer)
    response = client.post(reverse("benchmark:kernel_evaluate", args=[kernel.pk]), {"platform": "trn2"}, follow=True)
    assert response.context["evaluation"].platform == "trn2"
    assert response.context["evaluation"].requested_by == engineer
    assert [call["platform"] for call in fake_pipeline.calls] == ["trn2"]


def test_an_unknown_platform_from_the_page_is_a_message_not_an_error_page(client, engineer, fake_pipeline, silu_mini):
    client.force_login(engineer)
    response = client.post(
        reverse("benchmark:kernel_evaluate", args=[silu_mini.baseline_kernel_id]), {"platform": "trn9"}, follow=True
    )
    assert response.status_code == 200
    assert "unknown platform" in response.content.decode()
    assert fake_pipeline.calls == []
