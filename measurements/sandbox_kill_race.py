"""Kill each evaluation's kernel launcher (its bwrap) at a random early moment, and count how evaluations end.

    .venv/bin/python measurements/sandbox_kill_race.py [--count 200] [--within 0.008]

A bwrap killed while it sets its child up, before the child arms its parent-death signal, leaves that child
running in a session of its own or waiting forever for the dead bwrap, holding the pipes open
(docs/evaluation.md, "Process group"). Each evaluation here is a correct kernel whose launcher is killed a
random 0 to `--within` seconds after it appears. What a user should see: the kill retried as an
infrastructure failure and the kernel judged correct (attempts 2), or the kill landing where the child lives
on (attempts 1, correct); never a `timeout` charged to the kernel, and no evaluation process left behind.
Run as root with the sandbox set up (`make sandbox`); it kills only this script's own children.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.evaluator import Limits, evaluate  # noqa: E402
from tests.evaluation.conftest import ADD_REFERENCE, children_of_this_process  # noqa: E402
from tests.evaluation.test_infrastructure import SLOW_CORRECT_KERNEL  # noqa: E402


def evaluation_processes() -> int:
    """Processes still in one of this script's children's cgroups (accelopt/<our pid>-<n>), wherever they
    were reparented to."""
    mine, count = f"/accelopt/{os.getpid()}-", 0
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cgroup") as f:
                count += entry.isdigit() and mine in f.read()
        except OSError:
            continue
    return count


def one(within: float, limits: Limits) -> tuple[str, float]:
    delay, stop = random.uniform(0, within), threading.Event()

    def hunt() -> None:
        while not stop.is_set():
            if found := children_of_this_process("kernel"):
                time.sleep(delay)
                try:
                    os.kill(found[0], signal.SIGKILL)
                except ProcessLookupError:
                    pass
                return
            time.sleep(0.001)

    hunter = threading.Thread(target=hunt, daemon=True)
    hunter.start()
    started = time.monotonic()
    result = evaluate(SLOW_CORRECT_KERNEL, ADD_REFERENCE, backend="null", limits=limits)
    took = time.monotonic() - started
    stop.set()
    hunter.join(5)
    outcome = "correct" if result.correct else str(result.error_kind.value)
    return f"attempts {result.attempts}, {outcome}", took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--within", type=float, default=0.008, help="latest kill, in seconds after the launcher appears")
    args = parser.parse_args()
    limits = Limits(wall_seconds=20, cpu_seconds=20, memory_bytes=1024**3)
    outcomes: collections.Counter[str] = collections.Counter()
    slowest = 0.0
    for _ in range(args.count):
        outcome, took = one(args.within, limits)
        outcomes[outcome] += 1
        slowest = max(slowest, took)
    time.sleep(0.5)
    print(f"{args.count} evaluations, launcher killed 0-{args.within * 1000:g} ms after it appeared:")
    for outcome, count in outcomes.most_common():
        print(f"  {count:4d}  {outcome}")
    print(f"slowest evaluation {slowest:.1f} s; evaluation processes left: {evaluation_processes()}")


if __name__ == "__main__":
    main()
