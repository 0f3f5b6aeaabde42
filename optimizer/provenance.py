"""What the optimizer tells benchmark about the kernels its runs wrote: registered as benchmark's
`KernelGenerator` in `OptimizerConfig.ready()`, so benchmark's pages, API and leaderboard show the run,
agent call and model behind a generated kernel without benchmark importing this app.

Kernel.run_id names the run, AgentCall.kernel the Executor or Fixer call whose reply was the source (with
its role and model), and Candidate the plan and iteration.
"""

from __future__ import annotations

from typing import Any

from benchmark.models import Kernel
from optimizer.models import AgentCall, Candidate, Run
from optimizer.services.access import hidden_runs


class RunProvenance:
    """benchmark.provenance.KernelGenerator over the optimizer's rows."""

    def generated_by(self, kernels: dict[int, Kernel]) -> dict[int, dict[str, Any]]:
        """Three queries whatever the number of kernels."""
        runs = self.runs({kernel.run_id for kernel in kernels.values()})
        calls: dict[int, AgentCall] = {}
        for call in AgentCall.objects.filter(kernel_id__in=list(kernels)).select_related("candidate", "iteration").order_by("id"):
            # The same source may be written again later (another sample, another run): the first writer in
            # the kernel's own run is its author.
            if call.run_id == kernels[call.kernel_id].run_id:
                calls.setdefault(call.kernel_id, call)
        candidates: dict[int, Candidate] = {}
        for candidate in Candidate.objects.filter(kernel_id__in=list(kernels)).select_related("iteration").order_by("id"):
            if candidate.iteration.run_id == kernels[candidate.kernel_id].run_id:
                candidates.setdefault(candidate.kernel_id, candidate)
        records: dict[int, dict[str, Any]] = {}
        for pk, kernel in kernels.items():
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

    def runs(self, run_ids: set[int]) -> dict[int, Any]:
        return Run.objects.in_bulk(run_ids)

    def hidden_run_ids(self, user: Any) -> Any:
        return hidden_runs(user).values("pk")

    def private_runs(self) -> Any:
        return Run.objects.filter(is_public=False)
