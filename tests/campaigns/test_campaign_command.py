"""manage.py campaign: launches with the same service as the form, and with --wait drives every run to the end
and prints a row per problem and the suite's geomean fraction of peak."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from campaigns.models import Campaign, CampaignStatus
from optimizer.models import Run, RunStatus

pytestmark = pytest.mark.django_db(transaction=True)

TINY_ARGS = ["--iterations", "2", "--beam", "1", "--plans", "2", "--samples", "1", "--fix-attempts", "0",
             "--memory-size", "2", "--rewrites", "2"]


def test_wait_drives_every_problem_to_the_end_and_prints_the_table(fake_pipeline, problems, fake_agents):
    out = StringIO()
    call_command("campaign", "--problems", "double,triple,quad", *TINY_ARGS, "--wait", stdout=out)
    lines = out.getvalue().splitlines()
    campaign = Campaign.objects.get()
    assert campaign.status == CampaignStatus.FINISHED and campaign.finished is not None
    assert lines[0].startswith(f"campaign {campaign.pk}: 3 problems on trn1, offline agent, T=2 B=1 N=2 K=1 memory on")
    runs = list(Run.objects.order_by("pk"))
    assert [r.problem.slug for r in runs] == ["double", "triple", "quad"]
    assert [(r.status, r.error_message) for r in runs] == [(RunStatus.SUCCEEDED, "")] * 3, out.getvalue()
    # One run at a time (the worker's default concurrency): each queued only after the one before it ended.
    assert all(later.created >= earlier.finished for earlier, later in zip(runs, runs[1:], strict=False))
    table = lines[lines.index(next(line for line in lines if line.startswith("problem"))):]
    # "faster" twice: 0.8 x 0.8 of each baseline; the fake pipeline's peak fraction is 1 ms / latency.
    assert table[1].split()[:5] == ["double:mini", "succeeded", "10.00%", "15.62%", "x1.562"]
    assert table[3].split()[:5] == ["quad:mini", "succeeded", "2.50%", "3.91%", "x1.562"]
    assert "geomean fraction of peak 5.00% -> 7.81% over 3 of 3 problems, geomean speedup x1.56" in table[-1]
    assert "cost $0.0" in table[-1]  # the fake agents' calls cost $0.001 each


def test_json_prints_the_campaign_report(fake_pipeline, problems, fake_agents):
    out = StringIO()
    call_command("campaign", "--problems", "double", *TINY_ARGS, "--wait", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert report["status"] == "finished"
    assert [row["problem"] for row in report["rows"]] == ["double:mini"]
    assert [p["iteration"] for p in report["by_iteration"]] == [0, 1, 2]
    assert report["headline"]["best_geomean_fraction_of_peak"] == pytest.approx(1 / 6.4)


def test_without_wait_it_only_launches(problems):
    out = StringIO()
    call_command("campaign", "--suite", "nkibench", "--concurrency", "2", "--strategy", "repeated_sampling",
                 "--memory-mode", "accelopt", stdout=out)
    campaign = Campaign.objects.get()
    assert "3 problems" in out.getvalue() and f"/campaigns/{campaign.pk}/" in out.getvalue()
    assert Run.objects.filter(status=RunStatus.QUEUED).count() == 2
    assert campaign.config["search"]["iterations"] == 15
    assert (campaign.config["search"]["strategy"], campaign.config["search"]["memory_mode"]) == (
        "repeated_sampling", "accelopt")


def test_bad_options_are_errors_naming_them(problems):
    with pytest.raises(CommandError, match="no problem nkibench/nothing:mini"):
        call_command("campaign", "--problems", "nothing", stdout=StringIO())
    with pytest.raises(CommandError, match="--model takes ROLE=MODEL"):
        call_command("campaign", "--problems", "double", "--model", "gpt", stdout=StringIO())
    with pytest.raises(CommandError, match="strategy"):
        call_command("campaign", "--problems", "double", "--strategy", "dowsing", stdout=StringIO())
    assert not Campaign.objects.exists()
