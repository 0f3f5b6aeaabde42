"""What the run pages read: the event log by page, lineages, the beam, the chart, memory, plans, candidates,
kernels and the evaluation versions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.http import Http404

from benchmark.models import Evaluation, EvaluationStatus, Kernel
from benchmark.services import QueuePlace, backend_version, queue_places, shareable_kernels
from memory.models import MemoryEntry, MemoryEvidence
from memory.services import visible_entries
from optimizer.events import events_after
from optimizer.models import (
    Candidate,
    Iteration,
    Run,
    RunEvent,
)
from optimizer.services.access import get_run_for_user

MAX_QUEUE_SHAS = 200  # a page asks for the kernels it shows waiting: one iteration's, a few dozen


def event_page(run: Run, after: int = 0, limit: int = 100) -> tuple[list[RunEvent], int | None]:
    """One page of events after seq `after`, and the seq to ask for next (None when there is no more)."""
    events = events_after(run, after, limit=limit + 1)
    more = len(events) > limit
    events = events[:limit]
    return events, (events[-1].seq if more else None)



def lineage(kernel: Kernel | None, stop_at: Kernel | None = None, limit: int = 200) -> list[Kernel]:
    """`kernel`, its parent, its parent's parent, ... up to `stop_at` (included) or a kernel with none."""
    chain: list[Kernel] = []
    seen: set[int] = set()
    while kernel is not None and kernel.pk not in seen and len(chain) < limit:
        chain.append(kernel)
        seen.add(kernel.pk)
        if stop_at is not None and kernel.pk == stop_at.pk:
            break
        kernel = kernel.parent
    return chain


def run_lineage(run: Run) -> list[Kernel]:
    """The best kernel back to the starting one, newest first (empty before the first evaluation)."""
    return lineage(run.best_kernel, stop_at=run.start_kernel)


def get_run_with_kernels(user: Any, pk: int) -> Run:
    """get_run_for_user, with the starting and best kernels the run page shows read in the same query."""
    run = get_run_for_user(user, pk)
    return Run.objects.select_related("problem", "owner", "start_kernel", "best_kernel").get(pk=run.pk)


def current_beam(run: Run) -> tuple[Iteration | None, list[dict[str, Any]]]:
    """The latest iteration and its beam (the kernels the next iteration starts from, else the ones this
    one started from), each with its latency and speedup over the starting kernel where known."""
    iteration = run.iterations.order_by("-index").first()
    beam_ids: list[int] = []
    if iteration is not None:
        beam_ids = list(iteration.next_beam_kernel_ids or iteration.beam_kernel_ids or [])
    latencies = dict(
        Candidate.objects.filter(iteration__run=run, kernel_id__in=beam_ids, latency_ms__isnull=False)
        .values_list("kernel_id", "latency_ms")
    )
    if run.start_latency_ms is not None:
        latencies.setdefault(run.start_kernel_id, run.start_latency_ms)
    kernels = Kernel.objects.in_bulk(beam_ids)
    beam = [
        {"kernel": kernels[pk], "latency_ms": latencies.get(pk),
         "speedup": (run.start_latency_ms / latencies[pk]) if run.start_latency_ms and latencies.get(pk) else None}
        for pk in beam_ids if pk in kernels
    ]
    return iteration, beam


def chart_points(run: Run) -> list[dict[str, Any]]:
    """Best latency and peak fraction after each finished iteration (iteration 0: the starting kernel)."""
    points = []
    if run.start_latency_ms is not None:
        points.append({"iteration": 0, "latency_ms": run.start_latency_ms, "peak_fraction": None})
    for index, latency, peak in (
        Iteration.objects.filter(run=run, finished__isnull=False).order_by("index")
        .values_list("index", "best_latency_ms", "best_peak_fraction")
    ):
        points.append({"iteration": index, "latency_ms": latency, "peak_fraction": peak})
    return points


@dataclass(frozen=True)
class EvaluationSavings:
    """What the run's evaluations cost and what the cascade saved (engine.search.cascade), from the totals of
    its last checkpoint, so a restarted run shows the same counts."""

    mini_first: bool  # the run checks candidates on the mini shapes first (its recorded config)
    evaluations: int  # results the search received (the evaluations budget counts these)
    repeated: int  # candidates repeating a source this run had already evaluated or was evaluating
    cached: int  # answered by a stored result of the same source
    normalized: int  # answered by a stored result of an identical source (comments and spacing aside)
    mini_stopped: int  # failed on the mini shapes: no full-size evaluation
    mini_passed: int  # correct on the mini shapes, then evaluated at full size

    @property
    def from_cache(self) -> int:
        """Identical candidates that cost no evaluation."""
        return self.repeated + self.cached + self.normalized

    @property
    def full_size(self) -> int:
        """Full-size evaluations the run ran (or found running)."""
        return max(0, self.evaluations - self.cached - self.normalized - self.mini_stopped)

    @property
    def mini(self) -> int:
        """Evaluations on the mini shapes."""
        return self.mini_stopped + self.mini_passed


def evaluation_savings(run: Run) -> EvaluationSavings | None:
    """None before the run's first step, and for a run whose checkpoint predates these counts (issue 38)."""
    totals = (run.checkpoint or {}).get("totals") or {}
    if "repeated" not in totals:
        return None

    def count(name: str) -> int:
        return int(totals.get(name) or 0)

    return EvaluationSavings(
        mini_first=bool((run.config or {}).get("search", {}).get("mini_first", False)),
        evaluations=count("evaluations"), repeated=count("repeated"), cached=count("cached"),
        normalized=count("normalized"), mini_stopped=count("mini_stopped"), mini_passed=count("mini_passed"),
    )


@dataclass(frozen=True)
class RunLesson:
    """A memory entry holding lessons a run learned, and how they got there: "new" (the run wrote the entry),
    "learned again" (an entry held before got the run's evidence) or "merged" (the run's entry was merged into
    this one, which holds its evidence now); `lessons`: how many of the run's lessons it holds."""

    entry: MemoryEntry
    how: str
    lessons: int


def run_memory(user: Any, run: Run, limit: int = 50) -> tuple[list[RunLesson], int]:
    """The entries holding the lessons a run learned that `user` may read (largest speedup first, at most
    `limit`), and how many entries hold them in all: the count is shown to everyone, the entries only to memory
    readers. Read from the evidence, where a lesson counts now, so a lesson that strengthened or was merged
    into an entry held before lists that entry, and each entry once."""
    held: dict[int, dict[str, Any]] = {}
    for entry_id, original_id in MemoryEvidence.objects.filter(source_run_id=run.pk).values_list(
            "entry_id", "original_entry_id"):
        row = held.setdefault(entry_id, {"lessons": 0, "merged": False})
        row["lessons"] += 1
        row["merged"] |= original_id != entry_id
    # Entries a run wrote before evidence was kept have no evidence row: their own row says so.
    filed = MemoryEvidence.objects.filter(original_entry__source_run_id=run.pk).values("original_entry_id")
    for entry_id in MemoryEntry.objects.filter(source_run_id=run.pk).exclude(pk__in=filed).values_list("pk", flat=True):
        held.setdefault(entry_id, {"lessons": 1, "merged": False})
    entries = visible_entries(user).filter(pk__in=held).order_by("-speedup", "id")[:limit]
    lessons = []
    for entry in entries:
        row = held[entry.pk]
        how = "merged" if row["merged"] else "new" if entry.source_run_id == run.pk else "learned again"
        lessons.append(RunLesson(entry, how, row["lessons"]))
    return lessons, len(held)


def run_queue(run: Run, shas: Sequence[str]) -> dict[str, QueuePlace]:
    """Where the run's kernels with these shas stand while their evaluation (on the run's platform and backend)
    is pending: by sha; kernels already evaluated are left out. At most MAX_QUEUE_SHAS are looked up."""
    pending = Evaluation.objects.filter(
        kernel__in=shareable_kernels(run.problem, run.pk), kernel__sha256__in=list(shas)[:MAX_QUEUE_SHAS],
        platform=run.platform,
        backend=run.backend, backend_version=backend_version(run.backend),
        status__in=[EvaluationStatus.QUEUED, EvaluationStatus.RUNNING],
    ).select_related("kernel")
    pending = list(pending)
    places = queue_places(pending)
    return {e.kernel.sha256: places[e.pk] for e in pending if e.pk in places}


def iteration_plans(run: Run, index: int) -> tuple[Iteration, list[dict[str, Any]]]:
    """One iteration of a run and its plans in order, each with its text, parent kernel and candidates."""
    iteration = Iteration.objects.filter(run=run, index=index).first()
    if iteration is None:
        raise Http404(f"run {run.pk} has no iteration {index}")
    plans: dict[str, dict[str, Any]] = {}
    for candidate in iteration.candidates.select_related("parent_kernel").order_by("plan_index", "sample_index", "id"):
        plan_key = candidate.key.rsplit(".", 1)[0]
        plan = plans.setdefault(plan_key, {"key": plan_key, "text": candidate.plan, "parent": candidate.parent_kernel,
                                           "candidates": []})
        plan["candidates"].append(candidate)
    return iteration, list(plans.values())


def get_candidate(run: Run, key: str) -> Candidate:
    """A run's candidate by its key ("2.0.1.0"), with its kernel, parent and evaluation."""
    candidate = (
        Candidate.objects.filter(iteration__run=run, key=key)
        .select_related("iteration", "kernel", "parent_kernel", "evaluation", "evaluation__kernel").first()
    )
    if candidate is None:
        raise Http404(f"run {run.pk} has no candidate {key!r} (yet)")
    return candidate


def get_run_kernel(run: Run, kernel_pk: int) -> tuple[Kernel, Candidate | None]:
    """A kernel the run wrote, or its starting kernel, with the candidate that produced it (if any)."""
    kernel = Kernel.objects.filter(pk=kernel_pk).select_related("parent").first()
    if kernel is None or (kernel.run_id != run.pk and kernel.pk != run.start_kernel_id):
        raise Http404(f"kernel {kernel_pk} was not written by run {run.pk}")
    candidate = (
        Candidate.objects.filter(iteration__run=run, kernel=kernel)
        .select_related("iteration", "evaluation", "evaluation__kernel").first()
    )
    return kernel, candidate


def evaluation_versions(run: Run, iteration: int | None = None) -> list[dict[str, str]]:
    """The backends and versions the run's kernels were evaluated with (the start kernel's, then the
    candidates'; one iteration's candidates only if `iteration` is given), distinct, so the run page says
    which simulator and performance model produced its numbers. Before any evaluation: the current version."""
    candidates = Candidate.objects.filter(iteration__run=run, evaluation__isnull=False)
    if iteration is not None:
        candidates = candidates.filter(iteration__index=iteration)
    evaluations = Evaluation.objects.filter(pk__in=candidates.values("evaluation_id"))
    if iteration is None:
        try:
            current = backend_version(run.backend)
        except ValidationError:  # a backend this host no longer knows
            current = ""
        evaluations = evaluations | Evaluation.objects.filter(
            kernel_id=run.start_kernel_id, platform=run.platform, backend=run.backend, backend_version=current
        )
    seen: list[dict[str, str]] = []
    for backend, version, perf in evaluations.order_by("backend", "backend_version").values_list(
        "backend", "backend_version", "provenance__perf_model_version"
    ).distinct():
        entry = {"backend": backend, "backend_version": version, "perf_model_version": perf or ""}
        if entry not in seen:
            seen.append(entry)
    if not seen and iteration is None and current:
        seen.append({"backend": run.backend, "backend_version": current, "perf_model_version": ""})
    return seen
