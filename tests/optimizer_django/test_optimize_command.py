"""python manage.py optimize: one run to completion with a progress line per iteration and a summary."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

import optimizer.worker
from optimizer.models import Run, RunStatus

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fake_agents(monkeypatch, fake_agents_factory):
    monkeypatch.setattr(optimizer.worker, "default_agents", fake_agents_factory)
    return fake_agents_factory


def test_it_runs_to_completion_and_prints_the_best_speedup_and_peak_fraction(fake_pipeline, problem, fake_agents):
    out = StringIO()
    call_command("optimize", "--problem", "double:mini", "--iterations", "2", "--beam", "2", "--plans", "3",
                 "--samples", "1", stdout=out)
    lines = out.getvalue().splitlines()
    run = Run.objects.get()
    assert run.status == RunStatus.SUCCEEDED and run.owner is None
    assert lines[0].startswith(f"run {run.pk}: double:mini on trn1, offline agent, T=2 B=2 N=3 K=1")
    assert [line.split(":")[0].strip() for line in lines[1:3]] == ["iteration 1/2", "iteration 2/2"]
    # 10 ms -> 6.4 ms ("faster" twice); the fake pipeline's peak fraction is 1/latency.
    assert lines[-1].startswith("best speedup x1.562 (10 ms -> 6.4 ms), peak fraction 15.62%")


def test_an_unknown_problem_is_an_error_naming_it(db):
    with pytest.raises(CommandError, match="no problem nkibench/nothing:mini"):
        call_command("optimize", "--problem", "nothing", stdout=StringIO())


def test_invalid_search_parameters_are_an_error(fake_pipeline, problem):
    with pytest.raises(CommandError, match="beam_width must be >= 1"):
        call_command("optimize", "--problem", "double:mini", "--beam", "0", stdout=StringIO())
    assert not Run.objects.exists()


def test_the_offline_agent_improves_a_real_mini_problem_through_the_simulator(transactional_db, settings):
    """End to end: an NKIBench mini case, our simulator and performance model, the offline rewrites. (adamw: under
    perf-5 the rope and silu mini cases wait on their DMA trigger queues, which no catalog rewrite shortens.)"""
    from benchmark.services import load_suite

    settings.ACCELOPT_EVALUATION_INLINE = True
    load_suite("nkibench", evaluate_cases=())
    out = StringIO()
    call_command("optimize", "--problem", "adamw:mini", "--iterations", "1", "--beam", "1",
                 "--plans", "4", "--samples", "1", stdout=out)
    run = Run.objects.get()
    assert run.status == RunStatus.SUCCEEDED, run.error_message
    assert run.best_speedup is not None and run.best_speedup > 1.0
    assert run.best_kernel.evaluations.get().correct
    assert 0 < run.best_peak_fraction <= 1
    assert out.getvalue().splitlines()[-1].startswith(f"best speedup x{run.best_speedup:.3f}")
