"""Asking for the same evaluation again returns the stored one; only infrastructure errors are re-run."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from benchmark import services
from benchmark.models import Evaluation, EvaluationStatus
from benchmark.services import evaluations
from engine.evaluator.result import ErrorKind


@pytest.fixture
def baseline(silu_mini):
    return silu_mini.baseline_kernel


def test_a_second_request_returns_the_cached_evaluation_without_running_again(fake_pipeline, baseline):
    first = services.request_evaluation(baseline, "trn1")
    second = services.request_evaluation(baseline, "trn1")
    assert second.pk == first.pk
    assert len(fake_pipeline.calls) == 1
    assert second.status == EvaluationStatus.DONE and second.correct


def test_the_same_source_uploaded_twice_is_one_kernel_with_one_evaluation(fake_pipeline, silu_mini, engineer):
    source = silu_mini.baseline_kernel.source + "\n# my copy\n"
    kernel, created, evaluation = services.upload_kernel(engineer, kernel_source=source, problem=silu_mini)
    again, created_again, evaluation_again = services.upload_kernel(engineer, kernel_source=source, problem=silu_mini)
    assert (created, created_again) == (True, False)
    assert again.pk == kernel.pk and evaluation_again.pk == evaluation.pk
    assert len(fake_pipeline.calls) == 1


def test_each_platform_is_its_own_cache_entry(fake_pipeline, baseline):
    trn1 = services.request_evaluation(baseline, "trn1")
    trn2 = services.request_evaluation(baseline, "trn2")
    assert trn1.pk != trn2.pk
    assert [call["platform"] for call in fake_pipeline.calls] == ["trn1", "trn2"]


def test_a_new_backend_version_is_a_new_cache_entry(fake_pipeline, baseline, monkeypatch):
    old = services.request_evaluation(baseline, "trn1")
    monkeypatch.setattr(evaluations, "backend_version", lambda backend: "nki-sim 0 + perf perf-999")
    new = services.request_evaluation(baseline, "trn1")
    assert new.pk != old.pk and new.backend_version.endswith("perf-999")
    assert len(fake_pipeline.calls) == 2


def test_a_kernel_failure_is_cached_like_a_success(fake_pipeline, baseline):
    fake_pipeline.fail_next(ErrorKind.RUNTIME_ERROR, "nl.load: partition dimension 256 exceeds 128")
    failed = services.request_evaluation(baseline, "trn1")
    again = services.request_evaluation(baseline, "trn1")
    assert again.pk == failed.pk and again.error_kind == "runtime_error"
    assert len(fake_pipeline.calls) == 1


def test_an_infrastructure_error_is_run_again_on_the_next_request(fake_pipeline, baseline):
    fake_pipeline.fail_next(ErrorKind.INFRASTRUCTURE_ERROR, "the evaluation worker died")
    failed = services.request_evaluation(baseline, "trn1")
    assert failed.error_kind == "infrastructure_error" and failed.correct is False
    retried = services.request_evaluation(baseline, "trn1")
    assert retried.pk == failed.pk
    assert retried.error_kind == "" and retried.correct is True
    assert retried.attempts == 2
    assert len(fake_pipeline.calls) == 2


def test_a_pipeline_crash_is_recorded_as_our_fault_not_the_kernels(monkeypatch, inline_evaluations, baseline):
    def broken(**kwargs):
        raise RuntimeError("sandbox helper missing")

    monkeypatch.setattr("engine.evaluator.evaluate", broken, raising=False)
    evaluation = services.request_evaluation(baseline, "trn1")
    assert evaluation.status == EvaluationStatus.DONE
    assert evaluation.error_kind == "infrastructure_error"
    assert "not the kernel's fault" in evaluation.error_message
    assert services.best_evaluation(baseline.problem) is None


def test_an_evaluation_left_pending_by_a_dead_process_is_started_again_once_stale(fake_pipeline, baseline, settings):
    settings.ACCELOPT_EVALUATION_STALE_AFTER_S = 600
    orphan = Evaluation.objects.create(
        kernel=baseline, platform="trn1", backend="simulator",
        backend_version=services.backend_version("simulator"), status=EvaluationStatus.RUNNING,
        started=timezone.now() - timedelta(hours=1),
    )
    assert services.evaluation_is_stale(orphan)
    evaluation = services.request_evaluation(baseline, "trn1")
    assert evaluation.pk == orphan.pk and evaluation.status == EvaluationStatus.DONE
    assert len(fake_pipeline.calls) == 1


def test_a_recent_pending_evaluation_is_not_started_twice(fake_pipeline, baseline, settings):
    settings.ACCELOPT_EVALUATION_STALE_AFTER_S = 600
    pending = Evaluation.objects.create(
        kernel=baseline, platform="trn1", backend="simulator",
        backend_version=services.backend_version("simulator"), status=EvaluationStatus.RUNNING,
        started=timezone.now(),
    )
    evaluation = services.request_evaluation(baseline, "trn1")
    assert evaluation.pk == pending.pk and evaluation.status == EvaluationStatus.RUNNING
    assert fake_pipeline.calls == []


def test_best_evaluation_is_the_fastest_correct_one(fake_pipeline, silu_mini, engineer):
    slow = services.request_evaluation(silu_mini.baseline_kernel, "trn1")  # latency 0.01
    services.upload_kernel(
        engineer, kernel_source=silu_mini.baseline_kernel.source + "\n# variant\n", problem=silu_mini
    )  # evaluated second: latency 0.02, slower
    fake_pipeline.fail_next(ErrorKind.INCORRECT, "output 0: relative L2 error 0.3 > 2e-05")
    services.upload_kernel(engineer, kernel_source=silu_mini.baseline_kernel.source + "\n# wrong\n", problem=silu_mini)
    best = services.best_evaluation(silu_mini)
    assert best.pk == slow.pk
    assert services.best_evaluation(silu_mini, "trn2") is None
