"""Start children beside threaded BLAS, the old way (Popen with user/group: fork) and the product's way
(isolation.run_as + Popen: vfork), each in its own interpreter, and count how many tries hang.

    .venv/bin/python measurements/fork_deadlock.py --tries 5 --starts 2000 --timeout 30

Run as root (a uid to change to is what made CPython fork). Prints, per way, the tries that finished and
the tries that hung (killed at --timeout). The product's way is the one tests/evaluation uses.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import textwrap
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = textwrap.dedent('''
    import subprocess, sys, threading
    import numpy as np
    from engine.evaluator import isolation
    from engine.evaluator.sandbox.user import lease_uid

    way, starts = sys.argv[1], int(sys.argv[2])
    stop = threading.Event()

    def blas_work():
        a = np.ones((200, 200), dtype=np.float32)
        while not stop.is_set():
            a @ a

    workers = [threading.Thread(target=blas_work) for _ in range(2)]
    for worker in workers:
        worker.start()
    lease = lease_uid()
    for _ in range(starts):
        if way == "fork":
            subprocess.run(["/bin/true"], user=lease.uid, group=lease.gid, extra_groups=[])
        else:
            subprocess.run(isolation.run_as(lease, ["/bin/true"]))
    stop.set()
    for worker in workers:  # BLAS still running at exit meets the same OpenBLAS handshake (gotoblas_quit)
        worker.join()
    lease.release()
''')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=5)
    parser.add_argument("--starts", type=int, default=2000)
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--backtrace", action="store_true", help="print the threads' stacks of a hung try")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: without a uid to change to, CPython never forks to start a child")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="2")
    for way in ("fork", "vfork"):
        hung, seconds = 0, []
        for _ in range(args.tries):
            started = time.monotonic()
            process = subprocess.Popen([sys.executable, "-c", SCRIPT, way, str(args.starts)], cwd=ROOT, env=env)
            try:
                process.wait(timeout=args.timeout)
                seconds.append(time.monotonic() - started)
            except subprocess.TimeoutExpired:
                hung += 1
                if args.backtrace:  # where it hangs, from gdb (Debian's gdb package)
                    subprocess.run(["gdb", "-p", str(process.pid), "-batch", "-ex", "thread apply all bt 8"],
                                   check=False)
                process.kill()
                process.wait()
        print(f"{way:6} {args.tries - hung} of {args.tries} tries started {args.starts} children; {hung} hung "
              f"(> {args.timeout:g} s); finished tries took {', '.join(f'{s:.1f}' for s in seconds)} s")


if __name__ == "__main__":
    main()
