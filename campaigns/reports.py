"""A finished campaign as CSV and JSON, and several campaigns compared on the problems they share."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ValidationError

from campaigns.models import Campaign
from campaigns.progress import campaign_rows, dollar_curve, headline, iteration_curve

CSV_COLUMNS = (
    "problem", "run_id", "state", "iterations_done", "baseline_latency_ms", "best_latency_ms",
    "baseline_fraction_of_peak", "best_fraction_of_peak", "speedup", "evaluations", "tokens", "cost_usd",
)


def require_finished(campaign: Campaign) -> None:
    if campaign.finished is None:
        raise ValidationError(f"campaign {campaign.pk} is still {campaign.get_status_display().lower()}; "
                              "exports are for finished campaigns")


def _row_out(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "problem": row["address"],
        "run_id": row["run"].pk if row["run"] is not None else None,
        "state": row["state"],
        "iterations_done": row["iteration"],
        "baseline_latency_ms": row["baseline_latency_ms"],
        "best_latency_ms": row["best_latency_ms"],
        "baseline_fraction_of_peak": row["baseline_fraction"],
        "best_fraction_of_peak": row["best_fraction"],
        "speedup": row["speedup"],
        "evaluations": row["evaluations"],
        "tokens": row["tokens"],
        "cost_usd": row["cost_usd"],  # None: unknown (some call's cost is unknown), never shown as 0
    }


def campaign_report(campaign: Campaign) -> dict[str, Any]:
    """Everything the campaign page shows, JSON-ready: configuration, budgets, headline, rows and curves."""
    rows = campaign_rows(campaign)
    head = headline(campaign, rows)
    usage = head["usage"]
    return {
        "id": campaign.pk,
        "name": campaign.title,
        "status": campaign.status,
        "stop_reason": campaign.stop_reason,
        "platform": campaign.platform,
        "backend": campaign.backend,
        "agent": campaign.agent,
        "suite": campaign.suite,
        "case": campaign.case,
        "config": campaign.config,
        "budgets": campaign.budgets,
        "max_concurrent_runs": campaign.max_concurrent_runs,
        "created": campaign.created.isoformat(),
        "finished": campaign.finished.isoformat() if campaign.finished else None,
        "headline": {
            "baseline_geomean_fraction_of_peak": head["baseline_geomean"],
            "best_geomean_fraction_of_peak": head["best_geomean"],
            "geomean_speedup": head["geomean_speedup"],
            "problems_counted": head["counted"],
            "problems": head["problems"],
        },
        "usage": {"tokens": usage.tokens, "cost_usd": head["cost_usd"], "unpriced_calls": usage.unpriced_calls,
                  "evaluations": usage.evaluations, "wall_time_s": usage.wall_time_s},
        "rows": [_row_out(row) for row in rows],
        "by_iteration": iteration_curve(rows),
        "by_dollars": dollar_curve(rows),
    }


def campaign_csv(campaign: Campaign) -> str:
    """One line per problem (CSV_COLUMNS); an unknown cost is an empty cell."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in campaign_rows(campaign):
        writer.writerow({k: ("" if v is None else v) for k, v in _row_out(row).items()})
    return out.getvalue()


def compare(campaigns: Sequence[Campaign]) -> dict[str, Any]:
    """Two or more campaigns on the problems all of them cover: per campaign its summary and curves, and per
    problem each campaign's result. Problems only some cover are named in `left_out`."""
    if len(campaigns) < 2:
        raise ValidationError("choose at least two campaigns to compare")
    problem_sets = [set(c.entries.values_list("problem_id", flat=True)) for c in campaigns]
    common = set.intersection(*problem_sets)
    if not common:
        raise ValidationError("these campaigns share no problem; compare campaigns over the same problems")
    columns = []
    for campaign in campaigns:
        rows = campaign_rows(campaign, common)
        head = headline(campaign, rows)
        columns.append({"campaign": campaign, "rows": {r["problem"].pk: r for r in rows}, "headline": head,
                        "by_iteration": iteration_curve(rows), "by_dollars": dollar_curve(rows)})
    first = columns[0]["rows"]
    problems = [first[pk]["problem"] for pk in sorted(common, key=lambda pk: first[pk]["address"])]
    left_out = sorted({e.problem.address for c in campaigns for e in c.entries.select_related("problem")
                       if e.problem_id not in common})
    return {
        "columns": columns,
        "problems": [{"problem": p, "cells": [c["rows"][p.pk] for c in columns]} for p in problems],
        "left_out": left_out,
    }
