"""The campaign's numbers: rows, the geomean headline, the curves by iteration and by dollars (an unknown cost
is unknown, never $0), the CSV and JSON exports of a finished campaign, and comparisons."""

from __future__ import annotations

import csv
import io

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command

from campaigns.models import Campaign
from campaigns.progress import campaign_rows, dollar_curve, headline, iteration_curve
from campaigns.reports import CSV_COLUMNS, campaign_csv, campaign_report, compare, require_finished
from campaigns.services import create_campaign
from optimizer.models import AgentCall, Run

from .test_campaign_command import TINY_ARGS

pytestmark = pytest.mark.django_db(transaction=True)


def finished_campaign(problems: str, *extra: str) -> Campaign:
    call_command("campaign", "--problems", problems, *TINY_ARGS, *extra, "--wait", stdout=io.StringIO())
    return Campaign.objects.order_by("-pk").first()


def test_rows_headline_and_curves(fake_pipeline, problems, fake_agents):
    campaign = finished_campaign("double,triple")
    rows = campaign_rows(campaign)
    assert [(r["address"], r["baseline_fraction"], r["best_fraction"]) for r in rows] == [
        ("double:mini", pytest.approx(0.1), pytest.approx(1 / 6.4)),
        ("triple:mini", pytest.approx(0.05), pytest.approx(1 / 12.8)),
    ]
    assert all(r["evaluations"] > 0 and r["tokens"] > 0 and r["cost_known"] for r in rows)
    head = headline(campaign, rows)
    assert sum(r["evaluations"] for r in rows) == head["usage"].evaluations  # the rows add up to the total
    assert head["baseline_geomean"] == pytest.approx((0.1 * 0.05) ** 0.5)
    assert head["geomean_speedup"] == pytest.approx(1 / 0.64)
    curve = iteration_curve(rows)
    assert [p["iteration"] for p in curve] == [0, 1, 2]
    assert [p["geomean"] / curve[0]["geomean"] for p in curve] == [1, pytest.approx(1.25), pytest.approx(1.5625)]
    dollars = dollar_curve(rows)
    assert not dollars["unknown_after"] and len(dollars["points"]) == 5  # baselines + 2 iterations x 2 runs
    spent = [p["dollars"] for p in dollars["points"]]
    assert spent == sorted(spent) and spent[-1] == pytest.approx(head["usage"].cost_usd)


def test_an_unknown_cost_is_unknown_not_zero(fake_pipeline, problems, fake_agents):
    campaign = finished_campaign("double")
    AgentCall.objects.filter(pk=AgentCall.objects.order_by("pk").values("pk")[:1]).update(cost_usd=None)
    Run.objects.update(unpriced_calls=1)
    rows = campaign_rows(campaign)
    assert rows[0]["cost_usd"] is None and not rows[0]["cost_known"]
    assert headline(campaign, rows)["cost_usd"] is None
    assert dollar_curve(rows)["unknown_after"]
    assert campaign_report(campaign)["usage"]["cost_usd"] is None
    assert next(csv.DictReader(io.StringIO(campaign_csv(campaign))))["cost_usd"] == ""


def test_exports_of_a_finished_campaign(fake_pipeline, problems, fake_agents):
    campaign = finished_campaign("double,triple,quad")
    lines = list(csv.DictReader(io.StringIO(campaign_csv(campaign))))
    assert list(lines[0]) == list(CSV_COLUMNS)
    assert [(line["problem"], line["state"]) for line in lines] == [
        ("double:mini", "succeeded"), ("triple:mini", "succeeded"), ("quad:mini", "succeeded")]
    assert float(lines[0]["speedup"]) == pytest.approx(1.5625)
    report = campaign_report(campaign)
    assert report["config"]["search"]["iterations"] == 2 and len(report["rows"]) == 3
    assert report["headline"]["problems_counted"] == 3


def test_an_unfinished_campaign_has_no_export(problems, owner):
    campaign = create_campaign(owner, problems=["double"])
    with pytest.raises(ValidationError, match="still running"):
        require_finished(campaign)


def test_compare_uses_the_problems_all_campaigns_share(fake_pipeline, problems, fake_agents):
    with_memory = finished_campaign("double,triple")
    without = finished_campaign("double,triple,quad", "--no-memory")
    result = compare([with_memory, without])
    assert [item["problem"].slug for item in result["problems"]] == ["double", "triple"]
    assert result["left_out"] == ["quad:mini"]
    assert [len(c["by_iteration"]) for c in result["columns"]] == [3, 3]
    assert all(c["headline"]["counted"] == 2 for c in result["columns"])
    with pytest.raises(ValidationError, match="at least two"):
        compare([with_memory])
