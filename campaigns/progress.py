"""What a campaign's pages, exports and comparisons show, read from the database.

Fraction of peak is the problem's theoretical peak time over a kernel's latency (engine.evaluator's
EvaluationResult.peak_fraction), so a problem's peak time, known from any one evaluation, turns every latency
of its run into a fraction of peak. The suite's headline is the geometric mean of the problems' fractions
(as AccelOpt reports it); a problem whose run has not started or not improved counts with its baseline, so
the number only moves when a run finds something. Problems whose baseline has not been evaluated yet are
left out, and the page says how many count.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from django.db.models import Count, Q, Sum

from benchmark.models import Evaluation
from campaigns.models import Campaign, CampaignEntry, EntryStatus
from campaigns.usage import campaign_budget, campaign_usage
from engine.search.budget import progress
from optimizer.models import AgentCall, Iteration, Run


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v is not None and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _entries(campaign: Campaign, problem_ids: set[int] | None = None) -> list[CampaignEntry]:
    entries = campaign.entries.select_related("problem", "run", "problem__baseline_kernel").order_by("position")
    if problem_ids is not None:
        entries = entries.filter(problem_id__in=problem_ids)
    return list(entries)


def _peak_ms(campaign: Campaign, entries: list[CampaignEntry]) -> dict[int, float]:
    """Each problem's theoretical peak time (ms), from its run's best kernel or its starting kernel's evaluation."""
    peaks: dict[int, float] = {}
    for entry in entries:
        run = entry.run
        if run is not None and run.best_peak_fraction and run.best_latency_ms:
            peaks[entry.problem_id] = run.best_peak_fraction * run.best_latency_ms
    starts = {(entry.run.start_kernel_id if entry.run else entry.problem.baseline_kernel_id): entry.problem_id
              for entry in entries if entry.problem_id not in peaks}
    starts.pop(None, None)
    if starts:
        rows = (Evaluation.objects.filter(kernel_id__in=starts, platform=campaign.platform, backend=campaign.backend,
                                          latency_ms__isnull=False, peak_fraction__isnull=False)
                .order_by("finished").values_list("kernel_id", "latency_ms", "peak_fraction"))
        for kernel_id, latency, fraction in rows:  # the newest evaluation wins
            peaks[starts[kernel_id]] = latency * fraction
    return peaks


def campaign_rows(campaign: Campaign, problem_ids: set[int] | None = None) -> list[dict[str, Any]]:
    """One row per problem: baseline and best fraction of peak, speedup, evaluations, tokens, cost, state."""
    entries = _entries(campaign, problem_ids)
    peaks = _peak_ms(campaign, entries)
    run_ids = [e.run_id for e in entries if e.run_id]
    # As the run's budget counts them (the search's totals: the starting kernel's evaluation included).
    evaluations = {pk: int(n or 0) for pk, n in Run.objects.filter(pk__in=run_ids).values_list(
        "pk", "checkpoint__totals__evaluations")}
    baseline_latency = _baseline_latencies(campaign, entries)
    rows = []
    for entry in entries:
        run = entry.run
        peak = peaks.get(entry.problem_id)
        start = run.start_latency_ms if run is not None and run.start_latency_ms else baseline_latency.get(entry.pk)
        best = min(filter(None, [start, run.best_latency_ms if run is not None else None]), default=None)
        unpriced = getattr(run, "unpriced_calls", 0) if run is not None else 0
        rows.append({
            "entry": entry,
            "problem": entry.problem,
            "address": entry.problem.address,
            "run": run,
            "state": run.status if run is not None else entry.status,
            "state_label": run.get_status_display() if run is not None else entry.get_status_display(),
            "note": entry.note,
            "iteration": run.current_iteration if run is not None else 0,
            "iterations": (campaign.config.get("search") or {}).get("iterations"),
            "baseline_latency_ms": start,
            "best_latency_ms": best,
            "baseline_fraction": peak / start if peak and start else None,
            "best_fraction": peak / best if peak and best else None,
            "speedup": start / best if start and best else None,
            "evaluations": evaluations.get(entry.run_id, 0),
            "tokens": run.total_tokens if run is not None else 0,
            "cost_usd": (run.cost_usd if not unpriced else None) if run is not None else 0.0,
            "cost_known": not unpriced,
        })
    return rows


def _baseline_latencies(campaign: Campaign, entries: list[CampaignEntry]) -> dict[int, float]:
    """Baseline latency of entries whose run has not measured its start yet (an earlier evaluation of it)."""
    wanted = {e.problem.baseline_kernel_id: e.pk for e in entries
              if (e.run is None or not e.run.start_latency_ms) and e.problem.baseline_kernel_id}
    if not wanted:
        return {}
    found: dict[int, float] = {}
    for kernel_id, latency in (Evaluation.objects.filter(kernel_id__in=wanted, platform=campaign.platform,
                                                         backend=campaign.backend, latency_ms__isnull=False,
                                                         correct=True)
                               .order_by("finished").values_list("kernel_id", "latency_ms")):
        found[wanted[kernel_id]] = latency
    return found


def headline(campaign: Campaign, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The suite's geomean fraction of peak, baseline and best, over the problems with a known baseline."""
    counted = [r for r in rows if r["baseline_fraction"]]
    usage = campaign_usage(campaign)
    return {
        "baseline_geomean": geomean([r["baseline_fraction"] for r in counted]),
        "best_geomean": geomean([r["best_fraction"] for r in counted]),
        "geomean_speedup": geomean([r["speedup"] for r in counted if r["speedup"]]),
        "counted": len(counted),
        "problems": len(rows),
        "finished_runs": sum(1 for r in rows if r["run"] is not None and r["run"].is_finished),
        "skipped": sum(1 for r in rows if r["entry"].status == EntryStatus.SKIPPED),
        "usage": usage,
        "cost_usd": None if usage.cost_unknown else usage.cost_usd,
        "budgets": progress(campaign_budget(campaign), usage),
    }


# --- curves -------------------------------------------------------------------------------------------


def _iteration_bests(rows: list[dict[str, Any]]) -> dict[int, list[tuple[int, Any, float | None]]]:
    """Per run: its finished iterations in order as (index, finished time, best latency)."""
    run_ids = [r["run"].pk for r in rows if r["run"] is not None]
    found: dict[int, list[tuple[int, Any, float | None]]] = defaultdict(list)
    for run_id, index, finished, latency in (
        Iteration.objects.filter(run_id__in=run_ids, finished__isnull=False).order_by("run_id", "index")
        .values_list("run_id", "index", "finished", "best_latency_ms")
    ):
        found[run_id].append((index, finished, latency))
    return found


def _countable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["baseline_fraction"] and r["baseline_latency_ms"]]


def iteration_curve(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Geomean fraction of peak after each iteration: point i counts every problem at its best after
    iteration i (or after its last finished iteration, if it has not reached i; baseline before its first)."""
    countable = _countable(rows)
    bests = _iteration_bests(countable)
    last = max((bests[r["run"].pk][-1][0] for r in countable if r["run"] is not None and bests.get(r["run"].pk)),
               default=0)
    points = []
    for i in range(last + 1):
        fractions = []
        for row in countable:
            latency = row["baseline_latency_ms"]
            for index, _, best in bests.get(row["run"].pk, []) if row["run"] is not None else []:
                if index <= i and best:
                    latency = min(latency, best)
            fractions.append(row["baseline_fraction"] * row["baseline_latency_ms"] / latency)
        points.append({"iteration": i, "geomean": geomean(fractions), "problems": len(fractions)})
    return points if countable else []


def dollar_curve(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Geomean fraction of peak against dollars spent, one point per finished iteration in time order.

    The cost of an iteration is the sum of its agent calls' costs. Once a call of unknown cost has been made the
    campaign's spending is unknown: the curve stops there and `unknown_after` says so (never plotted as $0).
    """
    countable = _countable(rows)
    bests = _iteration_bests(countable)
    run_of = {r["run"].pk: r for r in countable if r["run"] is not None}
    costs = {
        row["iteration_id"]: row
        for row in AgentCall.objects.filter(run_id__in=run_of).values("iteration_id").annotate(
            dollars=Sum("cost_usd"), unknown=Count("id", filter=Q(cost_usd__isnull=True)))
    }
    iteration_ids = dict(
        ((run_id, index), pk) for pk, run_id, index in
        Iteration.objects.filter(run_id__in=run_of).values_list("pk", "run_id", "index")
    )
    events = sorted(
        ((finished, run_id, index, best) for run_id, items in bests.items() for index, finished, best in items),
        key=lambda item: (item[0], item[1], item[2]),
    )
    current = {id(r): r["baseline_latency_ms"] for r in countable}
    points = [{"dollars": 0.0, "geomean": geomean([r["baseline_fraction"] for r in countable]), "label": "baselines"}]
    spent, unknown_calls = 0.0, 0
    for _, run_id, index, best in events:
        cost = costs.get(iteration_ids.get((run_id, index)), {})
        unknown_calls += cost.get("unknown") or 0
        if unknown_calls:
            break
        spent += cost.get("dollars") or 0.0
        row = run_of[run_id]
        if best:
            current[id(row)] = min(current[id(row)], best)
        points.append({
            "dollars": spent,
            "geomean": geomean([r["baseline_fraction"] * r["baseline_latency_ms"] / current[id(r)] for r in countable]),
            "label": f"{row['address']} iteration {index}",
        })
    return {"points": points if countable else [], "unknown_after": unknown_calls > 0, "spent": spent}
