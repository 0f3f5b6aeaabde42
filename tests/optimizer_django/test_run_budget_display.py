"""The run page's budget bars: what each cap has used, and a dollar cap that cannot be enforced while some calls'
cost is unknown (a server that reports no token usage), never shown as if those calls were free."""

from __future__ import annotations

import pytest

from optimizer import services
from optimizer.models import RunStatus

pytestmark = pytest.mark.django_db


def test_the_bars_show_usage_against_each_cap_and_say_when_the_dollar_cap_cannot_be_enforced(client, owner, problem):
    run = services.create_run(owner, problem, budget={"max_cost_usd": 1.0, "max_evaluations": 10})
    run.status, run.cost_usd, run.unpriced_calls = RunStatus.RUNNING, 0.2, 3
    run.checkpoint = {"totals": {"evaluations": 5, "wall_time_s": 12.0}}
    run.save()
    client.force_login(owner)
    html = client.get(f"/runs/{run.pk}/state/").content.decode()
    assert 'data-budget="max_cost_usd"' in html and "$0.2000 of $1.00" in html
    assert "3 calls of unknown cost: this cap cannot be enforced" in html
    assert 'data-budget="max_evaluations"' in html and "5 of 10" in html
    assert 'value="0.5000"' in html  # half the evaluations
    assert "stopped: budget" not in html
    api = client.get(f"/api/runs/{run.pk}").json()
    by_name = {row["name"]: row for row in api["budget_usage"]}
    assert by_name["max_cost_usd"]["enforceable"] is False and by_name["max_evaluations"]["enforceable"] is True


def test_a_run_without_budgets_shows_no_bars(client, owner, problem):
    run = services.create_run(owner, problem)
    client.force_login(owner)
    assert 'data-testid="run-budget"' not in client.get(f"/runs/{run.pk}/state/").content.decode()
