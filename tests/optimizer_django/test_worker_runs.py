"""A queued run is claimed by a worker and driven to the end, leaving its audit trail in the database."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from benchmark.models import Evaluation
from memory.models import MemoryEntry, Polarity
from optimizer import services
from optimizer.models import AgentCall, Candidate, Iteration, Run, RunStatus
from optimizer.worker import RunWorker, claim_run

from .conftest import SMALL_SEARCH

pytestmark = pytest.mark.django_db(transaction=True)


def run_worker_once(agents_factory) -> bool:
    return async_to_sync(RunWorker(agents_factory=agents_factory).step)()


def test_a_queued_run_finishes_with_its_best_kernel_and_speedup(fake_pipeline, problem, owner, fake_agents_factory):
    run = services.create_run(owner, problem, search=SMALL_SEARCH)
    assert run_worker_once(fake_agents_factory)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    # "faster" multiplies latency by 0.8 each iteration: 10 -> 8 -> 6.4.
    assert run.best_latency_ms == pytest.approx(6.4)
    assert run.best_speedup == pytest.approx(10 / 6.4)
    assert run.best_kernel.run_id == run.pk and run.best_kernel.parent is not None
    assert run.claimed_by == "" and run.finished is not None


def test_every_iteration_candidate_and_agent_call_is_recorded(fake_pipeline, problem, owner, fake_agents_factory):
    run = services.create_run(owner, problem, search=SMALL_SEARCH)
    run_worker_once(fake_agents_factory)
    run.refresh_from_db()
    iterations = list(Iteration.objects.filter(run=run))
    assert [i.index for i in iterations] == [1, 2] and all(i.finished for i in iterations)
    candidates = Candidate.objects.filter(iteration__run=run)
    assert candidates.filter(chosen=True, iteration__index=1).count() >= 1
    # The "broken" plan's kernel failed, went to the Fixer once, and its repaired version is what counts.
    fixed = candidates.filter(plan="broken").first()
    assert fixed is not None and (fixed.fix_attempts, fixed.correct) == (1, True)
    assert all(c.evaluation_id for c in candidates.exclude(status="unusable"))
    calls = AgentCall.objects.filter(run=run)
    assert set(calls.values_list("role", flat=True)) >= {"planner", "executor", "summarizer"}
    # Each Executor and Fixer call is tied to the candidate it wrote.
    assert not calls.filter(role__in=["executor", "fixer"], candidate=None).exists()
    assert calls.filter(role="fixer", candidate=fixed).count() == 1
    assert run.prompt_tokens == sum(calls.values_list("prompt_tokens", flat=True)) == 100 * calls.count()


def test_selected_rewrites_become_memory_entries_with_provenance(fake_pipeline, problem, owner, fake_agents_factory):
    run = services.create_run(owner, problem, search=SMALL_SEARCH)
    run_worker_once(fake_agents_factory)
    entries = MemoryEntry.objects.filter(source_run_id=run.pk)
    assert entries.filter(polarity=Polarity.POSITIVE).exists()
    assert entries.filter(polarity=Polarity.NEGATIVE).exists()
    entry = entries.first()
    assert entry.problem == problem and entry.source_candidate_id is not None
    assert Candidate.objects.get(pk=entry.source_candidate_id).iteration.run_id == run.pk


def test_the_planner_of_the_second_iteration_sees_the_first_iterations_memory(
    fake_pipeline, problem, owner, fake_agents_factory
):
    run = services.create_run(owner, problem, search=SMALL_SEARCH)
    run_worker_once(fake_agents_factory)
    second_plans = [r for r in fake_agents_factory.agents.requests
                    if type(r).__name__ == "PlanRequest" and r.key.startswith("2.")]
    assert second_plans and second_plans[0].memory
    assert {m.key for m in second_plans[0].memory} <= set(
        MemoryEntry.objects.filter(source_run_id=run.pk).values_list("source_key", flat=True)
    )


def test_no_kernel_is_evaluated_twice_in_one_run(fake_pipeline, problem, owner, fake_agents_factory):
    services.create_run(owner, problem, search=SMALL_SEARCH)
    run_worker_once(fake_agents_factory)
    assert fake_pipeline.evaluated_twice == []
    assert set(Evaluation.objects.values_list("attempts", flat=True)) == {1}


def test_an_idle_worker_reports_that_it_did_nothing(db, fake_agents_factory):
    assert run_worker_once(fake_agents_factory) is False


def test_two_workers_cannot_claim_the_same_run(fake_pipeline, problem, owner):
    run = services.create_run(owner, problem, search=SMALL_SEARCH)
    assert claim_run("worker-a") == run.pk
    assert claim_run("worker-b") is None
    assert Run.objects.get(pk=run.pk).claimed_by == "worker-a"


def test_a_starting_kernel_that_is_not_correct_fails_the_run_with_the_reason(
    fake_pipeline, problem, owner, fake_agents_factory
):
    from benchmark.services import create_kernel
    from tests.optimizer.fakes import fake_kernel

    broken, _ = create_kernel(problem, fake_kernel(5.0, broken=1))
    run = services.create_run(owner, problem, start_kernel=broken, search=SMALL_SEARCH)
    run_worker_once(fake_agents_factory)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert "starting kernel cannot be optimized" in run.error_message
    assert run.events.filter(kind="run.failed").count() == 1


def test_agents_that_cannot_be_built_fail_the_run_with_the_reason(fake_pipeline, problem, owner):
    def broken_factory(run):
        raise RuntimeError("no offline rewrites for this kernel")

    run = services.create_run(owner, problem, search=SMALL_SEARCH)
    run_worker_once(broken_factory)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert run.error_message == "RuntimeError: no offline rewrites for this kernel"
    assert run.claimed_by == ""


def test_an_infrastructure_failure_is_retried_and_not_blamed_on_the_kernel(
    fake_pipeline, problem, owner, fake_agents_factory, monkeypatch
):
    import engine.evaluator as pipeline

    failed_once: set[str] = set()

    def flaky(kernel_source, reference_source, **kwargs):
        if kernel_source.startswith("latency=8.000000") and "broken" not in kernel_source \
                and kernel_source not in failed_once:
            failed_once.add(kernel_source)
            return {"status": "failed", "error_kind": "infrastructure_error",
                    "error_message": "the sandbox worker died"}
        return fake_pipeline(kernel_source, reference_source, **kwargs)

    monkeypatch.setattr(pipeline, "evaluate", flaky)
    run = services.create_run(owner, problem, search=SMALL_SEARCH)
    run_worker_once(fake_agents_factory)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert run.best_latency_ms == pytest.approx(6.4)  # the 8 ms kernel still became the parent of 6.4
    retried = Evaluation.objects.filter(kernel__source__in=failed_once)
    assert retried.exists() and {e.attempts for e in retried} == {2}
    assert all(e.correct for e in retried)
