"""A run worker in its own process, for the SIGKILL test (test_worker_killed.py). Not a test module.

    python -m tests.optimizer_django.worker_process VAR_DIR setup     -> prints the run id
    python -m tests.optimizer_django.worker_process VAR_DIR reference -> an uninterrupted twin run
    python -m tests.optimizer_django.worker_process VAR_DIR work      -> drives the queued run

Evaluations use a fake pipeline that takes EVALUATION_S per kernel and appends each one it has computed
to VAR_DIR/evaluations.log, so the parent can kill the worker mid-iteration and count what ran. The
result is saved to the database just after the line is written, as the real pipeline's is after it
returns: a kill in between loses that result, and the parent reads which results were saved.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

EVALUATION_S = 0.1


def setup_django(var_dir: Path) -> None:
    os.environ["ACCELOPT_VAR_DIR"] = str(var_dir)
    os.environ["DATABASE_URL"] = f"sqlite:///{var_dir / 'db.sqlite3'}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "accelopt_site.settings"
    import django

    django.setup()


def make_problem(slug: str):
    from benchmark.models import Kernel, KernelOrigin, Problem
    from benchmark.services import source_sha256
    from tests.optimizer.fakes import fake_kernel

    problem = Problem.objects.create(slug=slug, case="mini", family="elementwise", reference_source=f"# {slug}")
    source = fake_kernel(10.0)
    problem.baseline_kernel = Kernel.objects.create(problem=problem, source=source, sha256=source_sha256(source),
                                                    origin=KernelOrigin.BASELINE)
    problem.save(update_fields=["baseline_kernel"])
    return problem


def install_fakes(var_dir: Path):
    from django.conf import settings

    import engine.evaluator as pipeline
    from tests.optimizer.fakes import FakeAgents
    from tests.optimizer_django.conftest import FakePipeline

    fake = FakePipeline()
    log = var_dir / "evaluations.log"

    def slow_evaluate(kernel_source: str, reference_source: str, **kwargs):
        time.sleep(EVALUATION_S)
        result = fake(kernel_source, reference_source)
        with log.open("a") as handle:  # one line per computed evaluation: "<reference> <kernel lineage>"
            handle.write(f"{reference_source} {kernel_source.splitlines()[1]}\n")
        return result

    pipeline.evaluate = slow_evaluate
    settings.ACCELOPT_EVALUATION_INLINE = True
    # Far longer than the test: the evaluation the killed worker left running is restarted because the
    # run was taken over from a dead worker, not because it grew stale.
    settings.ACCELOPT_EVALUATION_STALE_AFTER_S = 900
    settings.ACCELOPT_WORKER_STALE_S = 0  # the killed worker's run is taken over at once
    return lambda run: FakeAgents(plans=("faster", "slower", "broken"))


SEARCH = {"iterations": 2, "beam_width": 2, "plans_per_candidate": 3, "samples_per_plan": 1, "fix_attempts": 1,
          "memory_size": 4, "rewrites_per_iteration": 4, "agent_batch": 2, "evaluation_batch": 2}


def main(var_dir: Path, mode: str) -> None:
    setup_django(var_dir)
    from optimizer import services
    from optimizer.worker import RunWorker

    if mode == "setup":
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        print(services.create_run(None, make_problem("double"), search=SEARCH).pk)
        return
    agents = install_fakes(var_dir)
    if mode == "reference":
        services.create_run(None, make_problem("double-reference"), search=SEARCH)
    asyncio.run(RunWorker(agents_factory=agents).step())


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
