"""An evaluation's "where the time goes" (engine/platforms/nki/perf/explain.py) on the kernel page and in the API: the
verdict, the table of engines and waits, the critical-path bars; nothing at all when no breakdown exists."""

from __future__ import annotations

from dataclasses import replace

from benchmark import services
from engine.evaluator.result import EvaluationResult
from engine.platforms.nki.perf import estimate
from tests.perf.builders import streaming_kernel


def _result_with_breakdown(fake_pipeline, trace) -> EvaluationResult:
    report = estimate(trace)
    base = fake_pipeline(backend="simulator", platform="trn1")
    fake_pipeline.calls.clear()
    return replace(base, latency_ms=report.latency_ms, profile=report.profile, timeline=report.to_dict()["timeline"],
                   breakdown=report.breakdown.to_dict())


def test_the_kernel_page_says_what_bounds_the_kernel(client, fake_pipeline, silu_mini):
    fake_pipeline.next_results.append(_result_with_breakdown(fake_pipeline, streaming_kernel(32, 1024)))
    evaluation = services.request_evaluation(silu_mini.baseline_kernel, "trn1")
    assert evaluation.breakdown["bound"] == "dma"
    content = client.get(silu_mini.baseline_kernel.get_absolute_url()).content.decode()
    assert "Where the time goes" in content
    assert "bound by: DMA (" in content and "of the critical path)" in content
    assert "Waiting on other engines" in content and "Scalar Engine" in content
    assert "DMA queues used" in content
    assert content.count("data-plotly-figure=") == 2  # the engine timeline and the critical-path bars
    # The htmx fragment a running evaluation swaps in carries the same section.
    fragment = client.get(f"/evaluations/{evaluation.pk}/fragment/").content.decode()
    assert "bound by: DMA (" in fragment


def test_a_compute_bound_kernel_reads_as_bound_by_its_engine_and_spills_are_shown(client, fake_pipeline, silu_mini,
                                                                                 engineer):
    fake_pipeline.next_results.append(_result_with_breakdown(fake_pipeline, streaming_kernel(32, 1024, ops_per_tile=16)))
    services.request_evaluation(silu_mini.baseline_kernel, "trn1")
    content = client.get(silu_mini.baseline_kernel.get_absolute_url()).content.decode()
    assert "bound by: Scalar Engine (" in content
    assert "Spills:" not in content  # nothing spilled: no line about it
    fake_pipeline.next_results.append(_result_with_breakdown(fake_pipeline, streaming_kernel(64, 8192, resident=True)))
    kernel, _, _ = services.upload_kernel(engineer, kernel_source=silu_mini.baseline_kernel.source + "\n# v2\n",
                                          problem=silu_mini)
    services.request_evaluation(kernel, "trn1")
    content = client.get(kernel.get_absolute_url()).content.decode()
    assert "Spills:" in content and "MiB reloaded" in content


def test_without_a_breakdown_the_section_is_absent(client, fake_pipeline, silu_mini):
    evaluation = services.request_evaluation(silu_mini.baseline_kernel, "trn1")
    assert evaluation.breakdown is None
    content = client.get(silu_mini.baseline_kernel.get_absolute_url()).content.decode()
    assert "Where the time goes" not in content and "bound by:" not in content


def test_the_api_returns_the_breakdown(client, fake_pipeline, silu_mini):
    fake_pipeline.next_results.append(_result_with_breakdown(fake_pipeline, streaming_kernel(32, 1024)))
    evaluation = services.request_evaluation(silu_mini.baseline_kernel, "trn1")
    body = client.get(f"/api/evaluations/{evaluation.pk}").json()
    assert body["breakdown"]["verdict"].startswith("bound by: DMA")
    assert abs(sum(body["breakdown"]["path_share"].values()) - 1) < 1e-9
