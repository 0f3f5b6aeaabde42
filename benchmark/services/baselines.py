"""The built-in suite's baselines, evaluated in the background of a serving process, and their progress.

A fresh install has problems but no numbers. `make run` no longer waits for them: the serving process (the
embedded run worker's, or `manage.py run_worker`) starts one thread that evaluates each baseline of the
default suite on the default platform and backend, mini cases first (seconds each), then the full ones
(minutes each), one at a time so a user's own evaluations still get an executor slot. What is already
stored and fresh (current backend version, current reference: `Evaluation.is_stale`) is not run again, so
a restart costs nothing, and after a performance-model bump or a reference change the board refills itself.
Pages and the API read `baseline_progress`, which is computed from the evaluation rows alone, so any
process can show it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from django.db import close_old_connections

from benchmark import conf
from benchmark.models import DEFAULT_SUITE, Evaluation, EvaluationStatus, Problem
from benchmark.services.evaluations import backend_version, request_evaluation, wait_for_evaluations
from engine.platforms.registry import DEFAULT_PLATFORM, get_definition

logger = logging.getLogger(__name__)

# How long the background pass sleeps before looking again at baselines another process is evaluating.
RECHECK_SECONDS = 30.0


@dataclass
class BaselineProgress:
    """Where the baselines of one case stand, on the default platform and backend under the current version."""

    case: str
    platform: str
    total: int = 0
    correct: int = 0
    running: int = 0
    queued: int = 0
    failed: list[str] = field(default_factory=list)  # addresses of baselines that finished but are not correct
    not_started: int = 0  # no current, fresh evaluation at all (yet)
    in_background: bool = False  # a serving process evaluates this case by itself (ACCELOPT_BACKGROUND_BASELINES)

    @property
    def done(self) -> int:
        return self.correct + len(self.failed)

    @property
    def pending(self) -> int:
        return self.running + self.queued

    @property
    def complete(self) -> bool:
        return self.total > 0 and self.done == self.total

    @property
    def percent(self) -> int:
        return round(100 * self.done / self.total) if self.total else 0

    def as_dict(self) -> dict[str, object]:
        return {
            "case": self.case, "platform": self.platform, "total": self.total, "done": self.done,
            "correct": self.correct, "failed": self.failed, "running": self.running, "queued": self.queued,
            "not_started": self.not_started, "complete": self.complete, "in_background": self.in_background,
        }


def _baseline_problems(case: str, suite: str = DEFAULT_SUITE) -> list[Problem]:
    return list(
        Problem.objects.filter(suite=suite, case=case, baseline_kernel__isnull=False)
        .select_related("baseline_kernel").order_by("slug")
    )


def baseline_progress(case: str, platform: str = DEFAULT_PLATFORM, *, suite: str = DEFAULT_SUITE) -> BaselineProgress:
    """How many of the suite's `case` baselines have a current, fresh result on `platform` (two queries)."""
    problems = _baseline_problems(case, suite)
    backend = get_definition(platform).default_backend.value
    evaluations = {
        e.kernel_id: e
        for e in Evaluation.objects.fresh().filter(
            kernel_id__in=[p.baseline_kernel_id for p in problems], platform=platform, backend=backend,
            backend_version=backend_version(backend),
        ).select_related("kernel__problem")
    }
    progress = BaselineProgress(case=case, platform=platform, total=len(problems),
                                in_background=case in conf.background_baseline_cases())
    for problem in problems:
        evaluation = evaluations.get(problem.baseline_kernel_id)
        if evaluation is None:
            progress.not_started += 1
        elif evaluation.status == EvaluationStatus.RUNNING:
            progress.running += 1
        elif evaluation.status == EvaluationStatus.QUEUED:
            progress.queued += 1
        elif evaluation.is_rankable:
            progress.correct += 1
        else:
            progress.failed.append(problem.address)
    return progress


def evaluate_baselines(
    cases: Sequence[str], platform: str = DEFAULT_PLATFORM, *, suite: str = DEFAULT_SUITE,
    recheck_seconds: float = RECHECK_SECONDS,
) -> list[Evaluation]:
    """Evaluate every baseline of `cases` that has no current, fresh result, one at a time; returns the
    evaluations it requested. A baseline another process is evaluating is waited for by looking again
    every `recheck_seconds` until it is done (or left stale by a dead process, then it is run here)."""
    requested: list[Evaluation] = []
    for case in cases:
        while True:
            waiting_elsewhere = False
            for problem in _baseline_problems(case, suite):
                evaluation = request_evaluation(problem.baseline_kernel, platform)
                if evaluation.is_pending:
                    wait_for_evaluations([evaluation])  # returns at once if another process runs it
                    evaluation.refresh_from_db()
                    waiting_elsewhere |= evaluation.is_pending
                requested.append(evaluation)
            if not waiting_elsewhere:
                break
            time.sleep(recheck_seconds)
    return requested


_started = threading.Lock()
_thread: dict[str, threading.Thread] = {}


def start_background_baselines() -> threading.Thread | None:
    """Start this process's background baseline pass once (ACCELOPT_BACKGROUND_BASELINES picks the cases);
    None when there is nothing to do. Called by the serving entry points, never at import or in a request."""
    cases = conf.background_baseline_cases()
    if not cases:
        return None
    with _started:
        thread = _thread.get("thread")
        if thread is None or not thread.is_alive():
            thread = threading.Thread(target=_run, args=(cases,), name="baseline-evaluations", daemon=True)
            _thread["thread"] = thread
            thread.start()
        return thread


def _run(cases: Sequence[str]) -> None:
    started = time.monotonic()
    try:
        evaluations = evaluate_baselines(cases)
        logger.info("baselines (%s): %d evaluated or found in %.0f s", ",".join(cases), len(evaluations),
                    time.monotonic() - started)
    except Exception:  # a background pass must never take the server down; the pages show what is missing
        logger.exception("background baseline evaluation stopped")
    finally:
        close_old_connections()
