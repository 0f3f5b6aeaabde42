"""GET /api/baselines: the background baseline evaluation's progress per case, for scripts and dashboards."""

from __future__ import annotations

from benchmark.services.baselines import evaluate_baselines


def test_the_progress_counts_each_case_apart(client, fake_pipeline, nkibench):
    evaluate_baselines(["mini"])
    body = client.get("/api/baselines").json()
    by_case = {entry["case"]: entry for entry in body}
    assert by_case["mini"]["done"] == 14 and by_case["mini"]["complete"] is True
    assert by_case["full"]["done"] == 0 and by_case["full"]["not_started"] == 14
