"""A lesson proposed by an engineer or their agent (memory.services.propose_entry, the MCP tool propose_lesson) waits
for a curator: no Planner and no export sees it until a curator accepts it from its page; pruning rejects it."""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied

from memory import services
from memory.models import ChangeKind, EntryStatus


def _propose(user, problem):
    return services.propose_entry(user, title="Larger column tiles", summary="fewer DMAs",
                                  slow_kernel="tile_cols = 256", fast_kernel="tile_cols = 2048", speedup=1.4,
                                  problem=problem)


def test_a_proposal_reaches_no_planner_and_no_export_until_a_curator_accepts_it(client, engineer, curator, problem):
    proposed = _propose(engineer, problem)
    assert proposed.status == EntryStatus.PROPOSED and proposed.created_by == engineer
    assert [v.change for v in services.entry_history(proposed)] == [ChangeKind.CREATED, ChangeKind.PROPOSED]
    assert services.select_entries(problem=problem) == []
    assert services.export_entries() == []
    client.force_login(curator)
    page = client.get(f"/memory/{proposed.pk}/").content.decode()
    assert "Accept into the memory" in page and "Reject (prune)" in page
    client.post(f"/memory/{proposed.pk}/accept/")
    proposed.refresh_from_db()
    assert proposed.status == EntryStatus.ACTIVE
    assert services.entry_history(proposed).last().changed_by == curator
    assert services.select_entries(problem=problem) == [proposed]


def test_pruning_rejects_a_proposal_and_accept_does_nothing_to_other_entries(engineer, curator, problem, make_entry):
    proposed = _propose(engineer, problem)
    services.prune_entry(proposed, curator)
    assert services.accept_entry(proposed, curator).status == EntryStatus.PRUNED  # only a proposal is accepted
    active = make_entry(problem=problem)
    assert services.accept_entry(active, curator).status == EntryStatus.ACTIVE
    assert services.select_entries(problem=problem) == [active]


def test_only_engineers_propose_and_a_lesson_needs_both_kernels(viewer, engineer, problem):
    with pytest.raises(PermissionDenied, match="engineer role"):
        _propose(viewer, problem)
    with pytest.raises(ValueError, match="both kernels"):
        services.propose_entry(engineer, title="t", summary="", slow_kernel=" ", fast_kernel="x", speedup=1.2)
