"""What the Django layer of a run costs: the run worker with instant fake agents and evaluations.

    .venv/bin/python measurements/run_worker_overhead.py [--iterations 3] [--beam 4] [--plans 6] [--samples 2]

Everything real except the work itself: a fresh SQLite database in a temporary directory, the
RunRecorder's one-transaction-per-step saves (checkpoint, Iteration/Candidate/AgentCall/Kernel rows,
RunEvents), the memory, and the benchmark evaluation cache. Agents answer at once and each evaluation
reads a latency written into the kernel source, so the wall time is the bookkeeping alone. Prints one
JSON line: steps, events, rows, the largest checkpoint, and the time per step.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--plans", type=int, default=6)
    parser.add_argument("--samples", type=int, default=2)
    args = parser.parse_args()

    var_dir = Path(tempfile.mkdtemp(prefix="accelopt-overhead-"))
    os.environ["ACCELOPT_VAR_DIR"] = str(var_dir)
    os.environ["DATABASE_URL"] = f"sqlite:///{var_dir / 'db.sqlite3'}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "accelopt_site.settings"
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    import engine.evaluator as pipeline
    from optimizer import services
    from optimizer.adapters import RunRecorder
    from optimizer.models import AgentCall, Candidate, Run, RunEvent
    from optimizer.worker import RunWorker
    from tests.optimizer.fakes import FakeAgents
    from tests.optimizer_django.conftest import FakePipeline
    from tests.optimizer_django.worker_process import make_problem

    call_command("migrate", verbosity=0)
    settings.ACCELOPT_EVALUATION_INLINE = True
    pipeline.evaluate = FakePipeline()

    largest = {"bytes": 0, "saves": 0}
    original_save = RunRecorder._save

    def measured_save(self, state, events):
        stored = original_save(self, state, events)
        checkpoint = Run.objects.values_list("checkpoint", flat=True).get(pk=self.run_id)
        largest["bytes"] = max(largest["bytes"], len(json.dumps(checkpoint)))
        largest["saves"] += 1
        return stored

    RunRecorder._save = measured_save
    search = {"iterations": args.iterations, "beam_width": args.beam, "plans_per_candidate": args.plans,
              "samples_per_plan": args.samples, "fix_attempts": 1}
    run = services.create_run(None, make_problem("overhead"), search=search)
    started = time.perf_counter()
    asyncio.run(RunWorker(agents_factory=lambda run: FakeAgents()).step())
    wall = time.perf_counter() - started
    run.refresh_from_db()
    result = {
        "status": run.status,
        "search": search,
        "wall_s": round(wall, 3),
        "events": RunEvent.objects.filter(run=run).count(),
        "candidates": Candidate.objects.filter(iteration__run=run).count(),
        "agent_calls": AgentCall.objects.filter(run=run).count(),
        "steps": largest["saves"],
        "ms_per_step": round(1000 * wall / max(1, largest["saves"]), 1),
        "largest_checkpoint_bytes": largest["bytes"],
        "cpu_s": round(time.process_time(), 3),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
