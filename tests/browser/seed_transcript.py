"""Add to the browser tests' database (after seed.py) a finished, public LLM run on rmsnorm_matmul:mini whose
best kernel has a full agent transcript (Planner, Executor, Fixer, Summarizer), so the grid and the transcript
page have something to show without a language-model endpoint. The calls are recorded rows, as the run
recorder writes them; the kernel's evaluation is a stored simulated result. Prints the run and kernel ids."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "accelopt_site.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.utils import timezone  # noqa: E402

from benchmark.models import Evaluation, EvaluationStatus, KernelOrigin, Problem  # noqa: E402
from benchmark.services import backend_version, create_kernel  # noqa: E402
from optimizer.models import AgentCall, Candidate, Iteration, Run, RunStatus  # noqa: E402

MODEL = "qwen3-coder-480b"
problem = Problem.objects.get(suite="nkibench", slug="rmsnorm_matmul", case="mini")
owner = get_user_model().objects.get(username="erin")
# Stored directly, finished: no worker may pick it up, and no endpoint is needed to create it.
run = Run.objects.create(problem=problem, start_kernel=problem.baseline_kernel, owner=owner, is_public=True, agent="llm",
                         platform="trn1", backend="simulator", status=RunStatus.SUCCEEDED,
                         config={"models": {role: {"model": MODEL} for role in ("planner", "executor", "summarizer")}})
source = problem.baseline_kernel.source + "\n# rewritten: the RMS statistics and the matmul share one pass\n"
kernel, _ = create_kernel(problem, source, origin=KernelOrigin.GENERATED, name="fused rmsnorm+matmul",
                          parent=problem.baseline_kernel)
kernel.run_id = run.pk
kernel.save(update_fields=["run_id"])
version = backend_version("simulator")
for evaluated, latency in ((problem.baseline_kernel, 0.0412), (kernel, 0.0291)):
    Evaluation.objects.update_or_create(
        kernel=evaluated, platform="trn1", backend="simulator", backend_version=version,
        defaults={"status": EvaluationStatus.DONE, "compiled": True, "runnable": True, "correct": True,
                  "latency_ms": latency, "peak_fraction": 0.0089 / latency, "finished": timezone.now()},
    )
iteration = Iteration.objects.create(run=run, index=1, finished=timezone.now())
plan = "Fuse the RMS statistics into the matmul's K loop so x is read from HBM once."
candidate = Candidate.objects.create(iteration=iteration, key="1.0.0.0", parent_kernel=problem.baseline_kernel,
                                     kernel=kernel, plan=plan, speedup=0.0412 / 0.0291, correct=True,
                                     latency_ms=0.0291, chosen=True, status="evaluated")
calls = (
    ("planner", None, f"1. {plan}\n2. Double-buffer the weight tiles.", 1830, 210, 4100.0),
    ("executor", candidate, "Here is the fused kernel:\n```python\n" + source[:400] + "\n```", 2650, 980, 9800.0),
    ("fixer", candidate, "The accumulation tile exceeded PSUM; split it in two banks.\n```python\n# fixed\n```",
     2900, 640, 7300.0),
    ("summarizer", None, "**Fuse the statistics pass into the matmul**\nReading x once instead of twice removes a "
     "third of the HBM traffic on this memory-bound shape.", 1200, 95, 2100.0),
)
for role, owner_candidate, response, prompt_tokens, completion_tokens, latency in calls:
    AgentCall.objects.create(
        run=run, iteration=iteration, candidate=owner_candidate, role=role, model=MODEL,
        prompt=[{"role": "system", "content": f"You are the {role.title()} of AccelOpt."},
                {"role": "user", "content": f"Kernel, profile and memory for the {role} (abridged)."}],
        response=response, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, latency_ms=latency,
        cost_usd=(prompt_tokens * 0.9 + completion_tokens * 0.9) / 1e6, kernel=kernel if role == "fixer" else None,
    )
Run.objects.filter(pk=run.pk).update(status=RunStatus.SUCCEEDED, started=timezone.now(), finished=timezone.now(),
                                     start_latency_ms=0.0412, best_latency_ms=0.0291, best_kernel=kernel,
                                     current_iteration=1)
print(f"run {run.pk} kernel {kernel.pk}")

# A second column for the grid: an offline-agent run on silu:mini (no language model, so no transcript calls).
silu = Problem.objects.get(suite="nkibench", slug="silu", case="mini")
faster, _ = create_kernel(silu, silu.baseline_kernel.source + "\n# offline rewrite\n", origin=KernelOrigin.GENERATED,
                          name="silu, wider tiles", parent=silu.baseline_kernel)
offline = Run.objects.create(problem=silu, start_kernel=silu.baseline_kernel, owner=owner, is_public=True,
                             agent="offline", platform="trn1", backend="simulator", status=RunStatus.SUCCEEDED,
                             start_latency_ms=0.00637, best_latency_ms=0.00590, best_kernel=faster,
                             started=timezone.now(), finished=timezone.now())
faster.run_id = offline.pk
faster.save(update_fields=["run_id"])
