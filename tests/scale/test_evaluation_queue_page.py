"""The evaluation-queue page (/ops/evaluations/) with the local executor: no servers needed. It lists pending
evaluations oldest first with the runs they are for, and hides what a visitor may not see elsewhere.
(With Ray, the page also says where each one runs: tests/scale/test_scale_out.py.)"""

from __future__ import annotations

import pytest

from benchmark.models import Evaluation, EvaluationStatus, Kernel, KernelOrigin, Problem
from benchmark.services import source_sha256
from optimizer import services as runs

pytestmark = pytest.mark.django_db


def _kernel(problem: Problem, source: str, run_id: int | None = None) -> Kernel:
    return Kernel.objects.create(problem=problem, source=source, sha256=source_sha256(source),
                                 origin=KernelOrigin.GENERATED if run_id else KernelOrigin.UPLOADED, run_id=run_id)


def test_pending_evaluations_with_their_runs_and_nothing_private(client, engineer, teammate) -> None:
    problem = Problem.objects.create(slug="double", case="mini", family="elementwise", reference_source="# ref")
    start = _kernel(problem, "def kernel(x):\n    return x + x\n")
    problem.baseline_kernel = start
    problem.save(update_fields=["baseline_kernel"])
    public = runs.create_run(engineer, problem, is_public=True)
    private = runs.create_run(teammate, problem, start_kernel=start)
    written = _kernel(problem, "def kernel(x):\n    return 2 * x\n", run_id=private.pk)
    Evaluation.objects.create(kernel=start, backend_version="v", status=EvaluationStatus.RUNNING)
    Evaluation.objects.create(kernel=written, backend_version="v", status=EvaluationStatus.QUEUED)
    Evaluation.objects.create(kernel=_kernel(problem, "def kernel(x):\n    return x\n"), backend_version="v",
                              status=EvaluationStatus.DONE)

    report = client.get("/ops/evaluations/?format=json").json()
    assert report["executor"] == "local" and (report["queued"], report["running"]) == (1, 1)
    first, second = report["evaluations"]
    assert first["kernel_id"] == start.pk and first["run_ids"] == [public.pk] and first["private_runs"] == 1
    assert second["run_ids"] == [] and second["private_runs"] == 1  # the teammate's private run wrote it
    client.force_login(teammate)
    first, second = client.get("/ops/evaluations/?format=json").json()["evaluations"]
    assert first["run_ids"] == sorted([public.pk, private.pk]) and second["run_ids"] == [private.pk]
    page = client.get("/ops/evaluations/").content.decode()
    assert f"run {private.pk}" in page and "1 queued, 1 running" in page
