"""End to end, on the Triton interpreter: an offline run (no language model) starts from a Triton kernel that
fails one of its problem's workloads (no masks: a 96-wide row overruns its 128-wide block), ends with a
correct kernel in its candidate set, and records what it learned as memory entries of the Triton platform's
language only, which an NKI Planner is never shown (nor is an NKI lesson shown to this run's Planner)."""

from __future__ import annotations

import json
from pathlib import Path

from asgiref.sync import async_to_sync

from benchmark.models import Evaluation, Problem
from benchmark.services.flashinfer import import_flashinfer, items_from_texts
from engine.agents.offline import OfflineAgents
from memory.models import MemoryEntry
from memory.services import add_entry, select_entries
from optimizer import services as run_services
from optimizer.models import Candidate, RunStatus
from optimizer.worker import RunWorker
from tests.triton_agents.kernels import RMSNORM_UNMASKED_DPS

FIXTURES = Path(__file__).with_name("fixtures")
# Two plans per kernel keeps it to five evaluations: the start, then two rewrites in each iteration.
SEARCH = {"iterations": 2, "beam_width": 1, "plans_per_candidate": 2, "samples_per_plan": 1, "memory_size": 4,
          "rewrites_per_iteration": 4, "agent_batch": 8, "evaluation_batch": 4, "seed": 0}


def _import_problem(engineer) -> Problem:
    solution = {"name": "rmsnorm_unmasked", "definition": "studio_rmsnorm_var", "author": "studio",
                "spec": {"language": "triton", "target_hardware": ["H100"], "entry_point": "main.py::run"},
                "sources": [{"path": "main.py", "content": RMSNORM_UNMASKED_DPS}]}
    items = items_from_texts([
        ("studio_rmsnorm_var.json", (FIXTURES / "studio_rmsnorm_var.json").read_text()),
        ("studio_rmsnorm_var.jsonl", (FIXTURES / "studio_rmsnorm_var.jsonl").read_text()),
        ("rmsnorm_unmasked.json", json.dumps(solution)),
    ])
    import_flashinfer(items, platform="h100", user=engineer)
    return Problem.objects.get(slug="studio_rmsnorm_var")


def _lesson(name: str, language: str, problem: Problem | None = None) -> MemoryEntry:
    """A positive lesson naming an offline rewrite, which moves it to the front of the offline Planner's list."""
    return add_entry(title=f"{name} helped", summary=f"It helped elsewhere (rewrite: `{name}`, found by a person).",
                     slow_kernel="slow", fast_kernel="fast", speedup=1.3, problem=problem, family="rmsnorm",
                     language=language, source_key=f"seed:{language}:{name}")


def test_an_offline_run_repairs_a_triton_kernel_and_learns_for_triton_only(transactional_db, settings, engineer):
    settings.ACCELOPT_EVALUATION_INLINE = True
    problem = _import_problem(engineer)
    assert problem.language == "triton" and problem.baseline_kernel.source == RMSNORM_UNMASKED_DPS
    # A Triton lesson that smaller blocks helped (wrong for this kernel, whose one block covers a row), and an
    # NKI lesson that would put fewer warps first if a Triton Planner were shown it.
    triton_lesson = _lesson("smaller_blocks", "triton")
    nki_problem = Problem.objects.create(slug="silu", case="mini", family="rmsnorm", reference_source="# ref")
    nki_lesson = _lesson("fewer_warps", "nki", nki_problem)

    run = run_services.create_run(engineer, problem, agent="offline", search=SEARCH)
    assert (run.platform, run.backend) == ("h100", "triton-interpreter")
    assert async_to_sync(RunWorker(agents_factory=lambda run: OfflineAgents()).step)()
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error_message

    start = Evaluation.objects.get(kernel=problem.baseline_kernel, backend="triton-interpreter")
    assert not start.correct and "outside the buffer" in start.error_message  # the 96-wide workload
    # Iteration 1 tried smaller blocks (the memory said so) and masks; the masked kernel is correct, unmeasured.
    plans = [(c.iteration.index, c.plan.split(" [")[0]) for c in
             Candidate.objects.filter(iteration__run=run).select_related("iteration").order_by("iteration__index", "key")]
    assert plans == [(1, "Use smaller blocks"), (1, "Mask loads and stores at the edge of the data"),
                     (2, "Use smaller blocks"), (2, "Tell the compiler the offsets are aligned and contiguous")]
    correct = Candidate.objects.filter(iteration__run=run, correct=True)
    assert correct.count() == 2 and all(c.latency_ms is None and c.speedup is None for c in correct)
    assert run.best_kernel is not None and run.best_latency_ms is None
    assert run.best_kernel.source.count("mask=cols < n_cols") == 3
    assert Evaluation.objects.get(kernel=run.best_kernel, backend="triton-interpreter").correct

    # What it learned: smaller blocks broke the repaired kernel (iteration 2); filed under Triton, negative.
    [learned] = MemoryEntry.objects.filter(source_run_id=run.pk)
    assert (learned.language, learned.polarity, learned.speedup) == ("triton", "negative", 1.0)
    assert "failed its check" in learned.summary and "rewrite: `smaller_blocks`" in learned.summary
    # Shown to this problem's Planner; never to an NKI problem's, and the NKI lesson never reached this run's.
    assert learned in select_entries(problem=problem, limit=8)
    assert learned not in select_entries(problem=nki_problem, limit=8)
    shown = {m["title"] for e in run.events.filter(kind="plan.proposed") for m in e.payload.get("memory", [])}
    assert triton_lesson.title in shown and nki_lesson.title not in shown
