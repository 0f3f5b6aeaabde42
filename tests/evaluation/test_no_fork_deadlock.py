"""Starting sandbox children while other threads run multithreaded BLAS must never hang the process.

The server deadlocked this way: a thread starting a child forked while holding the GIL, fork() ran
OpenBLAS's pthread_atfork handler, which waits for its worker threads to exit, and a worker that was
finishing a job for another thread missed the handshake; that other thread then waited for the GIL
forever. Children are now started with vfork() (isolation.run_as), which runs no atfork handler.

The reproduction runs in its own interpreter so a deadlock costs a timeout, not the test run. Before
the fix it hung within the first 50 starts in most tries (measurements/fork_deadlock.py compares both
ways of starting a child side by side).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from engine.evaluator.sandbox.isolation import PROJECT_ROOT

STARTS = 150
DEADLINE_S = 240  # 150 starts take about 20 s here; a hang is a timeout

SCRIPT = textwrap.dedent(f'''
    import threading
    import numpy as np
    from engine.evaluator.sandbox.process import ChildProcess, Limits

    stop = threading.Event()

    def blas_work():  # what checks.py does beside a starting child, in a tight loop
        a = np.ones((200, 200), dtype=np.float32)
        while not stop.is_set():
            a @ a

    workers = [threading.Thread(target=blas_work, daemon=True) for _ in range(2)]
    for worker in workers:
        worker.start()
    for _ in range({STARTS}):
        ChildProcess("reference", {{}}, Limits(wall_seconds=30)).close()
    stop.set()
    for worker in workers:
        worker.join()
    print("started", {STARTS})
''')


def test_children_start_while_other_threads_run_threaded_blas() -> None:
    # Two BLAS threads whatever the machine: the hazard needs OpenBLAS workers to exist.
    env = dict(os.environ, OPENBLAS_NUM_THREADS="2", OMP_NUM_THREADS="2")
    try:
        done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=PROJECT_ROOT, env=env, capture_output=True,
                              text=True, timeout=DEADLINE_S)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{STARTS} children did not start within {DEADLINE_S} s beside threaded BLAS: "
                             "the process deadlocked") from None
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["started", str(STARTS)]
