"""Answering a kernel from the stored result of an identical source: the normalized-source cache beside the
exact-source one (`Kernel` per (problem, sha256), `Evaluation` per kernel, platform, backend and version),
which it leaves as it is.

Two sources are identical when `engine.evaluator.identity.normalized_source_key` says so (comments and
spacing inside lines aside) and the twin's stored result quotes no line that differs (`same_answer`).
`IdenticalSources` keeps the key of every stored kernel of one problem (read once, then only kernels added
since), so no column is added for it; `copy_evaluation` stores the twin's result on the kernel's own
Evaluation row, marked `answered_from`, so the kernel's page, a run's candidate and later requests find it
like any other result.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from benchmark.models import Evaluation, EvaluationStatus, Kernel, Problem
from benchmark.services.access import shareable_kernels
from benchmark.services.evaluations import finished_result, save_result
from engine.evaluator.identity import normalized_source_key, same_answer


class IdenticalSources:
    """The normalized keys of one problem's kernels, and the stored result a kernel's twin can answer with."""

    def __init__(self, problem: Problem) -> None:
        self.problem_id = problem.pk
        self._kernels_by_key: dict[str, list[int]] = {}
        self._read_up_to = 0  # kernels are read by increasing id: only new ones are parsed again

    def _read_new_kernels(self) -> None:
        rows = (Kernel.objects.filter(problem_id=self.problem_id, pk__gt=self._read_up_to)
                .order_by("pk").values_list("pk", "source"))
        for pk, source in rows.iterator():
            key = normalized_source_key(source)
            if key is not None:
                self._kernels_by_key.setdefault(key, []).append(pk)
            self._read_up_to = pk

    def answer_for(self, kernel: Kernel, platform: str, backend: str, version: str) -> Evaluation | None:
        """A finished result of another kernel of the problem, on this platform, backend and version, whose
        source is identical to `kernel`'s and whose text would be the same, among the kernels everyone who sees
        `kernel` may see (shareable_kernels); None if there is none."""
        key = normalized_source_key(kernel.source)
        if key is None:
            return None
        self._read_new_kernels()
        twins = [pk for pk in self._kernels_by_key.get(key, []) if pk != kernel.pk]
        if not twins:
            return None
        # Only a twin everyone who sees `kernel` may see: answered from another person's private run, it would
        # name that run's evaluation (answered_from) and, by answering at once, say that the run wrote this source.
        # The cost is one evaluation where private work meets someone else's identical source.
        shareable = shareable_kernels(kernel.problem, kernel.run_id).filter(pk__in=twins)
        stored = (Evaluation.objects.filter(kernel__in=shareable, platform=platform, backend=backend,
                                            backend_version=version, status=EvaluationStatus.DONE)
                  .select_related("kernel", "kernel__problem").order_by("pk"))
        for evaluation in stored:
            twin = evaluation.kernel
            if not finished_result(evaluation):
                continue
            # A Triton solution is its entry point and other files too, not only this source.
            if (twin.entry_point, twin.solution_meta) != (kernel.entry_point, kernel.solution_meta):
                continue
            texts = [evaluation.error_message, *_strings(evaluation.result), *_strings(evaluation.timeline)]
            if same_answer(kernel.source, twin.source, texts):
                return evaluation
        return None


def copy_evaluation(twin: Evaluation, kernel: Kernel) -> Evaluation:
    """`twin`'s result stored as `kernel`'s own evaluation (same platform, backend and version), with
    `answered_from` naming the evaluation it came from and no wall time (none was spent)."""
    row, _ = Evaluation.objects.get_or_create(kernel=kernel, platform=twin.platform, backend=twin.backend,
                                              backend_version=twin.backend_version)
    row.reference_digest = twin.reference_digest
    row.save(update_fields=["reference_digest"])
    data: dict[str, Any] = {**(twin.result or {}), "timeline": twin.timeline, "answered_from": twin.pk,
                            "wall_time_s": None}
    return save_result(row.pk, data) or row


def _strings(value: Any) -> Iterator[str]:
    """Every string inside a stored JSON value: where a result could quote a source line."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)
