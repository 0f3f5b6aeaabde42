"""A worker that dies in the middle of an iteration loses nothing: another one finishes the run from
the last checkpoint, evaluating no kernel twice and writing each memory entry exactly once."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from benchmark.models import Kernel, Problem
from memory.models import MemoryEntry, MemoryEvidence
from optimizer import services
from optimizer.adapters import RunRecorder
from optimizer.models import Candidate, Run, RunStatus
from optimizer.worker import RunWorker, claim_run
from tests.optimizer.fakes import SimulatedCrash

from .conftest import SMALL_SEARCH

pytestmark = pytest.mark.django_db(transaction=True)


def twin_problem(problem: Problem) -> Problem:
    """Same baseline, separate kernels and evaluations: a reference run that shares no cache."""
    twin = Problem.objects.create(slug=problem.slug + "-twin", case="mini", family=problem.family,
                                  reference_source=problem.reference_source + "\n# twin")
    base = problem.baseline_kernel
    twin.baseline_kernel = Kernel.objects.create(problem=twin, source=base.source, sha256=base.sha256,
                                                 origin=base.origin)
    twin.save(update_fields=["baseline_kernel"])
    return twin


def crash_when_saving(monkeypatch, event_kind: str, occurrence: int = 1) -> None:
    """Kill the worker as it is about to commit a step that emitted `event_kind` (the step's work is
    done: evaluations finished, memory entries added, but the checkpoint not yet written)."""
    original = RunRecorder.save
    seen = {"count": 0}

    async def save(self, state):
        if any(kind == event_kind for kind, _ in self._buffer):
            seen["count"] += 1
            if seen["count"] == occurrence:
                raise SimulatedCrash(f"killed before committing a step with {event_kind}")
        return await original(self, state)

    monkeypatch.setattr(RunRecorder, "save", save)


def memory_of(run: Run) -> list[tuple[str, str, float]]:
    return sorted(
        # The lessons the run filed (a lesson another run learned first counts there: memory.learning).
        (e.title, e.polarity, round(e.speedup, 6)) for e in MemoryEntry.objects.filter(evidence__source_run_id=run.pk)
    )


@pytest.mark.parametrize(
    ("event_kind", "occurrence"),
    [("candidate.evaluated", 2), ("memory.added", 1), ("plan.proposed", 2), ("candidate.written", 3), ("iteration.finished", 1)],
)
def test_a_run_killed_mid_iteration_finishes_with_nothing_redone_or_lost(
    fake_pipeline, problem, owner, fake_agents_factory, monkeypatch, settings, event_kind, occurrence
):
    reference = services.create_run(owner, twin_problem(problem), search=SMALL_SEARCH)
    async_to_sync(RunWorker(agents_factory=fake_agents_factory).step)()
    reference.refresh_from_db()

    run = services.create_run(owner, problem, search=SMALL_SEARCH)
    calls_before = sum(fake_pipeline.calls.values())
    with monkeypatch.context() as patch:
        crash_when_saving(patch, event_kind, occurrence)
        with pytest.raises(SimulatedCrash):
            async_to_sync(RunWorker("worker-that-dies", agents_factory=fake_agents_factory).step)()
    run.refresh_from_db()
    assert (run.status, run.claimed_by) == (RunStatus.RUNNING, "worker-that-dies")

    settings.ACCELOPT_WORKER_STALE_S = 0  # the dead worker's heartbeat is old at once
    assert async_to_sync(RunWorker("second-worker", agents_factory=fake_agents_factory).step)()
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert run.best_latency_ms == pytest.approx(reference.best_latency_ms)
    assert fake_pipeline.evaluated_twice == []
    assert sum(fake_pipeline.calls.values()) - calls_before == reference_evaluations(reference)
    assert memory_of(run) == memory_of(reference)
    keys = list(MemoryEvidence.objects.filter(source_run_id=run.pk).values_list("source_key", flat=True))
    assert len(keys) == len(set(keys))
    assert run.events.filter(kind="run.resumed_after_crash").count() == 1
    assert Candidate.objects.filter(iteration__run=run).count() == Candidate.objects.filter(
        iteration__run=reference
    ).count()


def reference_evaluations(run: Run) -> int:
    return Kernel.objects.filter(problem=run.problem, evaluations__isnull=False).count()


def test_the_event_log_of_a_resumed_run_has_no_gap_and_no_repeated_step(
    fake_pipeline, problem, owner, fake_agents_factory, monkeypatch, settings
):
    run = services.create_run(owner, problem, search=SMALL_SEARCH)
    with monkeypatch.context() as patch:
        crash_when_saving(patch, "candidate.evaluated", 2)
        with pytest.raises(SimulatedCrash):
            async_to_sync(RunWorker(agents_factory=fake_agents_factory).step)()
    settings.ACCELOPT_WORKER_STALE_S = 0
    async_to_sync(RunWorker(agents_factory=fake_agents_factory).step)()
    seqs = list(run.events.values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    evaluated = [p["sha"] for p in run.events.filter(kind="candidate.evaluated").values_list("payload", flat=True)]
    assert len(evaluated) == len(set(evaluated))
    assert run.events.filter(kind="run.finished").count() == 1


def test_a_live_worker_is_not_robbed_of_its_run(fake_pipeline, problem, owner, settings):
    settings.ACCELOPT_WORKER_STALE_S = 60
    run = services.create_run(owner, problem, search=SMALL_SEARCH)
    assert claim_run("alive") == run.pk
    assert claim_run("thief") is None
