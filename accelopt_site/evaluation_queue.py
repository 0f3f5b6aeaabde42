"""The evaluation queue at /ops/evaluations/: every evaluation queued or running, in the order they start, each
with its place in line (queued ones: how many start before it) and how long it has waited or run, for which
run, and, on a Ray cluster, where (node, worker process, attempt); below them, those cancelled in the last ten
minutes (with their run or campaign). ?format=json gives the same rows as JSON; the page re-reads its table
every few seconds, so the places and times move as evaluations finish.

The database says what is pending (Evaluation rows not done, and the run that wrote each kernel); the Ray
queue board (engine.evaluator.ray_cluster.cluster_queue) says where, from every process connected to
the cluster; the two meet on `evaluation_key`. With the local executor there is no "where" beyond "in
the process that asked". A visitor sees a run's id and a kernel only where they may see them elsewhere.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from benchmark import conf, services
from benchmark.models import Evaluation, EvaluationStatus
from engine.evaluator.executors import evaluation_key, source_digest
from engine.evaluator.ray_cluster import cluster_queue
from engine.evaluator.result import ErrorKind
from optimizer.models import Run, RunStatus
from optimizer.services import visible_runs

MAX_ROWS = 500
RECENTLY_CANCELLED_S = 600  # how long the page lists evaluations cancelled with their run or campaign


def cluster_entries() -> tuple[list[dict[str, Any]], str]:
    """The Ray board's entries and an error ("" when fine); none without a configured cluster."""
    if not conf.ray_address():
        return [], ""
    try:
        services.get_executor()  # connects this process to the cluster on first use

        return cluster_queue(), ""
    except Exception as error:  # the page still lists the database's rows
        return [], f"{type(error).__name__}: {error}"


def queue_rows(user: Any) -> dict[str, Any]:
    pending = list(
        Evaluation.objects.filter(status__in=[EvaluationStatus.QUEUED, EvaluationStatus.RUNNING])
        .select_related("kernel__problem").order_by(*services.queue_order())[:MAX_ROWS]
    )
    places = services.queue_places(pending)
    kernels = {e.kernel_id for e in pending}
    visible_kernels = set(services.visible_kernels(user).filter(pk__in=kernels).values_list("pk", flat=True))
    # The runs an evaluation is for: the run that wrote the kernel, and any active run starting from it.
    runs_of: dict[int, set[int]] = {e.kernel_id: {e.kernel.run_id} if e.kernel.run_id else set() for e in pending}
    for run_id, start_kernel_id in Run.objects.filter(
        start_kernel_id__in=kernels, status__in=[RunStatus.QUEUED, RunStatus.RUNNING]
    ).values_list("pk", "start_kernel_id"):
        runs_of[start_kernel_id].add(run_id)
    every_run = set().union(*runs_of.values()) if runs_of else set()
    visible_run_ids = set(visible_runs(user).filter(pk__in=every_run).values_list("pk", flat=True))
    entries, cluster_error = cluster_entries()
    by_key: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        by_key.setdefault(entry["key"], []).append(entry)
    references: dict[int, str] = {}
    now = timezone.now()
    rows = []
    for evaluation in pending:
        kernel, problem = evaluation.kernel, evaluation.kernel.problem
        if problem.pk not in references:
            references[problem.pk] = source_digest(problem.reference_source)
        key = evaluation_key(kernel.sha256, references[problem.pk], evaluation.platform, evaluation.backend)
        where = (by_key.pop(key, None) or [{}])[0]
        shown = kernel.pk in visible_kernels
        since = evaluation.started or evaluation.queued or evaluation.created
        rows.append({
            "evaluation_id": evaluation.pk if shown else None,
            "status": evaluation.status,
            "state": where.get("state", evaluation.status),
            "problem": problem.address if shown else None,
            "kernel_id": kernel.pk if shown else None,
            "kernel": kernel.display_name if shown else None,
            "kernel_url": kernel.get_absolute_url() if shown else "",
            "run_ids": sorted(runs_of[kernel.pk] & visible_run_ids),
            "private_runs": len(runs_of[kernel.pk] - visible_run_ids),
            "platform": evaluation.platform, "backend": evaluation.backend,
            "attempts": evaluation.attempts,
            "age_s": round((now - since).total_seconds(), 1) if since else None,
            # Its place in line and how long it has waited or run (queued rows: since queued, not created).
            "ahead": places[evaluation.pk].ahead if evaluation.pk in places else None,
            "elapsed_s": round(places[evaluation.pk].elapsed_s, 1) if evaluation.pk in places else None,
            "elapsed": services.elapsed_text(places[evaluation.pk].elapsed_s) if evaluation.pk in places else "",
            "node_ip": where.get("node_ip", ""), "node_id": where.get("node_id", ""),
            "worker_pid": where.get("worker_pid"), "attempt": where.get("attempt"), "driver": where.get("driver", ""),
        })
    # Tasks on the cluster with no pending row: evaluations nobody stores (the evaluate command, measurements).
    unstored = [{"state": e["state"], "node_ip": e["node_ip"], "node_id": e["node_id"], "worker_pid": e["worker_pid"],
                 "driver": e["driver"], "backend": e["backend"], "platform": e["platform"]}
                for remaining in by_key.values() for e in remaining]
    return {"executor": "ray" if conf.ray_address() else "local", "ray_address": conf.ray_address(),
            "cluster_error": cluster_error, "evaluations": rows, "unstored": unstored,
            "cancelled": cancelled_rows(user),
            "queued": sum(1 for r in rows if r["status"] == EvaluationStatus.QUEUED),
            "running": sum(1 for r in rows if r["status"] == EvaluationStatus.RUNNING)}


def cancelled_rows(user: Any) -> list[dict[str, Any]]:
    """Evaluations stopped for good in the last RECENTLY_CANCELLED_S (a cancelled run's or campaign's:
    benchmark.services.cancel_pending_evaluations), newest first, with why."""
    since = timezone.now() - timedelta(seconds=RECENTLY_CANCELLED_S)
    cancelled = list(
        Evaluation.objects.filter(status=EvaluationStatus.DONE, error_kind=ErrorKind.INFRASTRUCTURE_ERROR,
                                  error_message__startswith=services.CANCELLED_PREFIX, finished__gte=since)
        .select_related("kernel__problem").order_by("-finished", "-id")[:MAX_ROWS]
    )
    kernels = {e.kernel_id for e in cancelled}
    visible_kernels = set(services.visible_kernels(user).filter(pk__in=kernels).values_list("pk", flat=True))
    run_ids = {e.kernel.run_id for e in cancelled if e.kernel.run_id}
    visible = set(visible_runs(user).filter(pk__in=run_ids).values_list("pk", flat=True))
    rows = []
    for evaluation in cancelled:
        kernel, shown = evaluation.kernel, evaluation.kernel_id in visible_kernels
        rows.append({
            "evaluation_id": evaluation.pk if shown else None, "status": "cancelled",
            "kernel": kernel.display_name if shown else None, "kernel_url": kernel.get_absolute_url() if shown else "",
            "problem": kernel.problem.address if shown else None,
            "run_ids": [kernel.run_id] if kernel.run_id in visible else [],
            "platform": evaluation.platform, "backend": evaluation.backend,
            # The reason names the run or campaign cancelled: only for whoever may see what it wrote.
            "reason": evaluation.error_message.removeprefix(services.CANCELLED_PREFIX) if shown
            else "its run or campaign, which you may not see, was cancelled",
            "finished": evaluation.finished.isoformat() if evaluation.finished else None,
        })
    return rows


@never_cache
@require_GET
def evaluation_queue(request: HttpRequest) -> HttpResponse:
    report = queue_rows(request.user)
    if request.GET.get("format") == "json":
        return JsonResponse(report)
    return render(request, "accelopt_site/evaluation_queue.html", report)
