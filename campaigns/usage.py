"""The campaign's budget and usage read model: what its budgets are, what its runs have used of them, and the
channel group its pages listen on. The scheduler (campaigns.scheduler) decides with these; the pages, exports
and the websocket consumer only read them, so they import this module and not the scheduler.
"""

from __future__ import annotations

from dataclasses import replace

from django.utils import timezone

from campaigns.models import Campaign
from engine.search.budget import BUDGET_FIELDS, Budget, Usage
from optimizer.models import Run

CAMPAIGN_MESSAGE_TYPE = "campaign.changed"  # handled by CampaignConsumer.campaign_changed


def group_name(campaign_id: int) -> str:
    """The channel-layer group of a campaign's page (campaigns.consumers.CampaignConsumer)."""
    return f"campaign-{campaign_id}"


def campaign_budget(campaign: Campaign) -> Budget:
    return Budget(**{name: getattr(campaign, name) for name in BUDGET_FIELDS})


def run_usages(campaign: Campaign) -> dict[int, Usage]:
    """Each of its runs' usage, as optimizer's Run.usage counts it (tokens, known dollars, unpriced calls, the
    search's evaluations), reading only the totals out of the checkpoints."""
    return {
        row["pk"]: Usage(tokens=row["prompt_tokens"] + row["completion_tokens"], cost_usd=row["cost_usd"] or 0.0,
                         unpriced_calls=row["unpriced_calls"],
                         evaluations=int(row["checkpoint__totals__evaluations"] or 0))
        for row in Run.objects.filter(campaign_entry__campaign=campaign).values(
            "pk", "prompt_tokens", "completion_tokens", "cost_usd", "unpriced_calls", "checkpoint__totals__evaluations")
    }


def campaign_usage(campaign: Campaign) -> Usage:
    """The sum of its runs' usage, except wall time, which for a campaign is the time since its launch."""
    total = Usage()
    for usage in run_usages(campaign).values():
        total = total.plus(usage)
    end = campaign.finished or timezone.now()
    return replace(total, wall_time_s=max(0.0, (end - campaign.created).total_seconds()))
