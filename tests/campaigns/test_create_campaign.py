"""create_campaign: AccelOpt's published defaults, one entry per problem, validation that names what is wrong."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404

from campaigns.models import CampaignEntry, EntryStatus
from campaigns.services import ACCELOPT_DEFAULTS, create_campaign, resolve_problems
from engine.search import SearchConfig
from optimizer.models import Run, RunStatus

from .conftest import TINY, make_problem

pytestmark = pytest.mark.django_db(transaction=True)


def test_defaults_are_accelopts_published_configuration(problems, owner):
    campaign = create_campaign(owner, problems=["double", "triple", "quad"])
    search = campaign.config["search"]
    assert {k: search[k] for k in ACCELOPT_DEFAULTS} == ACCELOPT_DEFAULTS
    assert (search["iterations"], search["beam_width"], search["plans_per_candidate"], search["samples_per_plan"],
            search["rewrites_per_iteration"], search["memory_size"]) == (15, 6, 12, 2, 8, 16)
    assert (search["positive_speedup"], search["negative_slowdown"]) == (1.04, 1.15)
    # The pure search's own defaults agree: a run launched alone gets the same configuration.
    assert {k: getattr(SearchConfig(), k) for k in ACCELOPT_DEFAULTS} == ACCELOPT_DEFAULTS


def test_one_entry_per_problem_and_only_as_many_runs_as_the_campaign_may_run_at_once(problems, owner):
    campaign = create_campaign(owner, problems=["double", "triple", "quad"], search=TINY, max_concurrent_runs=2)
    entries = list(campaign.entries.order_by("position"))
    assert [e.problem.slug for e in entries] == ["double", "triple", "quad"]
    assert [e.status for e in entries] == [EntryStatus.RELEASED, EntryStatus.RELEASED, EntryStatus.PENDING]
    runs = Run.objects.order_by("pk")
    assert [r.problem.slug for r in runs] == ["double", "triple"]
    assert all(r.status == RunStatus.QUEUED and r.owner == owner for r in runs)
    assert runs[0].config["search"]["iterations"] == 2


def test_a_whole_suite_in_one_case(problems, owner):
    make_problem("double", 99.0, case="full")
    campaign = create_campaign(owner, suite="nkibench", case="mini")
    assert sorted(campaign.entries.values_list("problem__slug", flat=True)) == ["double", "quad", "triple"]
    assert set(CampaignEntry.objects.values_list("problem__case", flat=True)) == {"mini"}
    full = resolve_problems(owner, problems=["double"], case="full")
    assert [p.address for p in full] == ["double:full"]


def test_memory_off_shows_and_writes_no_entries(problems, owner):
    campaign = create_campaign(owner, problems=["double"], memory=False)
    assert (campaign.config["search"]["memory_size"], campaign.config["search"]["rewrites_per_iteration"]) == (0, 0)
    assert campaign.config["memory"] is False


def test_budgets_are_stored_for_the_whole_campaign(problems, owner):
    campaign = create_campaign(owner, problems=["double", "triple", "quad"],
                               budgets={"max_cost_usd": 0.5, "max_evaluations": 40})
    assert campaign.budgets == {"max_tokens": None, "max_cost_usd": 0.5, "max_wall_time_s": None, "max_evaluations": 40}
    # Checked at launch against the estimate: three problems could take far more evaluations than 40.
    assert any("Stops after 40 evaluations" in note for note in campaign.config["budget_notes"])
    assert any("offline agent makes no LLM calls" in note for note in campaign.config["budget_notes"])


@pytest.mark.parametrize(("kwargs", "message"), [
    ({}, "choose a suite or at least one problem"),
    ({"suite": "nkibench", "problems": ["double"]}, "not both"),
    ({"problems": ["double"], "budgets": {"max_cost_usd": -1}}, "max_cost_usd must be above 0"),
    ({"problems": ["double"], "budgets": {"max_coffee": 1}}, "unknown budget fields"),
    ({"problems": ["double"], "search": {"beam_width": 0}}, "beam_width must be >= 1"),
    ({"problems": ["double"], "agent": "psychic"}, "unknown agent 'psychic'"),
    ({"suite": "nosuch"}, "suite 'nosuch' has no mini problems"),
])
def test_bad_input_is_refused_naming_what_is_wrong(problems, owner, kwargs, message):
    with pytest.raises(ValidationError, match=message):
        create_campaign(owner, **kwargs)
    assert not Run.objects.exists()


def test_every_problem_must_run_on_the_campaigns_platform(problems, owner):
    with pytest.raises(ValidationError, match="double:mini is a nki problem and h100 runs triton kernels"):
        create_campaign(owner, problems=["double"], platform="h100")
    assert not Run.objects.exists()


def test_an_unknown_problem_is_named(problems, owner):
    with pytest.raises(Http404, match="no problem nkibench/nothing:mini"):
        create_campaign(owner, problems=["double", "nothing"])


def test_a_problem_without_a_baseline_is_refused_up_front(problems, owner):
    problems[1].baseline_kernel = None
    problems[1].save(update_fields=["baseline_kernel"])
    with pytest.raises(ValidationError, match="no baseline kernel to start from for triple:mini"):
        create_campaign(owner, problems=["double", "triple"])


def test_only_engineers_launch_campaigns(problems, viewer):
    with pytest.raises(PermissionDenied):
        create_campaign(viewer, problems=["double"])
