"""A process that exits (a SIGTERM'd server) stops its evaluations instead of first running its whole queue."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

from engine.evaluator.sandbox.isolation import PROJECT_ROOT

SCRIPT = textwrap.dedent('''
    import sys, time
    from engine.evaluator.executors import LocalExecutor
    from engine.evaluator.sandbox.process import ChildProcess, Limits

    class Forever:  # an evaluation whose child never answers (a kernel that never returns)
        platform, backend = "trn1", "nki-sim"
        def run(self):
            with ChildProcess("reference", {}, Limits(wall_seconds=600)) as child:
                child.receive()  # nothing was asked: it never answers

    executor = LocalExecutor(max_workers=1)
    futures = [executor.submit(Forever()) for _ in range(5)]
    time.sleep(0.5)
    print("submitted", flush=True)
    sys.exit(0)  # the main thread returns, as daphne's does after SIGTERM
''')


def test_an_exiting_process_cancels_its_queued_evaluations_instead_of_running_them() -> None:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=PROJECT_ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.split() == ["submitted"], done.stderr[-2000:]
    # The running one's child is killed and the four queued never start; without the exit hook the process
    # lived on for 5 x 600 s.
    assert time.monotonic() - started < 60
