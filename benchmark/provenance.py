"""Where an evaluation's number comes from: the stored record (versions, platform, seeds) plus, for a
generated kernel, the run, the agent call and the model that wrote it.

The generated part is derived when read, not copied onto the evaluation: Kernel.run_id names the run,
optimizer.AgentCall.kernel the Executor or Fixer call whose reply was this source (with its role and
model), and optimizer.Candidate the plan and iteration. One kernel row can have several evaluations
(platforms, backend versions), and they all share one author, so one copy is enough. The optimizer models
are looked up by name, so benchmark does not import the optimizer app (dependencies point the other way).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.apps import apps

from benchmark.models import Evaluation, Kernel


def generated_by(kernels: Iterable[Kernel]) -> dict[int, dict[str, Any]]:
    """For each kernel an optimization run wrote: its run, candidate, agent call, role and model (by kernel id).

    Three queries whatever the number of kernels. A kernel written by the offline agent (no language
    model, so no agent call) gets `agent_call` and `model` None; so does one whose run is gone.
    """
    written = {kernel.pk: kernel for kernel in kernels if kernel.run_id}
    if not written or not apps.is_installed("optimizer"):
        return {}
    Run = apps.get_model("optimizer", "Run")
    AgentCall = apps.get_model("optimizer", "AgentCall")
    Candidate = apps.get_model("optimizer", "Candidate")
    runs = Run.objects.in_bulk({kernel.run_id for kernel in written.values()})
    calls: dict[int, Any] = {}
    for call in AgentCall.objects.filter(kernel_id__in=list(written)).select_related("candidate", "iteration").order_by("id"):
        # The same source may be written again later (another sample, another run): the first writer in
        # the kernel's own run is its author.
        if call.run_id == written[call.kernel_id].run_id:
            calls.setdefault(call.kernel_id, call)
    candidates: dict[int, Any] = {}
    for candidate in Candidate.objects.filter(kernel_id__in=list(written)).select_related("iteration").order_by("id"):
        if candidate.iteration.run_id == written[candidate.kernel_id].run_id:
            candidates.setdefault(candidate.kernel_id, candidate)
    records: dict[int, dict[str, Any]] = {}
    for pk, kernel in written.items():
        run = runs.get(kernel.run_id)
        call = calls.get(pk)
        candidate = candidates.get(pk) or (call.candidate if call is not None else None)
        records[pk] = {
            "run": kernel.run_id,
            "run_url": run.get_absolute_url() if run is not None else None,
            "agent": run.agent if run is not None else None,
            "agent_label": run.get_agent_display() if run is not None else None,
            "agent_call": call.pk if call is not None else None,
            "role": call.role if call is not None else None,
            "model": (call.model or None) if call is not None else None,
            "candidate": candidate.key if candidate is not None else None,
            "iteration": candidate.iteration.index if candidate is not None else None,
            "parent_kernel": kernel.parent_id,
        }
    return records


def evaluation_provenance(evaluation: Evaluation, generated: dict[int, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The evaluation's full provenance: the stored record, the row's backend and version (also while it is
    pending), the kernel's origin, and `generated_by` (None unless a run wrote the kernel).

    `generated` is `generated_by(...)` over the kernels on the page; without it, this kernel is looked up.
    """
    if generated is None:
        generated = generated_by([evaluation.kernel])
    provenance = dict(evaluation.provenance or {})
    provenance.setdefault("platform", evaluation.platform)
    provenance.setdefault("backend", evaluation.backend)
    provenance.setdefault("backend_version", evaluation.backend_version)
    provenance["kernel_origin"] = evaluation.kernel.origin
    provenance["generated_by"] = generated.get(evaluation.kernel_id)
    return provenance
