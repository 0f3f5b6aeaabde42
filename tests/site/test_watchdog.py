"""The server's watchdog (accelopt_site/watchdog.py): a stalled event loop or evaluation worker leaves every
thread's stack in the log, naming where it is stuck; work that ends in time leaves nothing."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from accelopt_site import watchdog as watchdog_module
from accelopt_site.watchdog import Watchdog, loop_heartbeat
from engine.evaluator import executors
from engine.evaluator.executors import LocalExecutor
from engine.evaluator.sandbox.process import Limits

REPO = Path(__file__).resolve().parents[2]
STALL_S = 0.5


def _stall_records(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records
            if record.name == "accelopt_site.watchdog" and record.levelno == logging.ERROR]


def _wait_for(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def watchdog():
    dog = Watchdog(STALL_S, check_interval_s=0.05).start()
    watchdog_module._current["watchdog"] = dog
    executors.report_busy_with(watchdog_module.busy)  # as start_server_watchdog does
    yield dog
    executors.report_busy_with(None)
    watchdog_module._current.pop("watchdog", None)
    dog.stop()


def hold_the_event_loop(seconds: float) -> None:
    time.sleep(seconds)  # a synchronous call inside the loop: everything the loop serves waits


def test_a_blocked_event_loop_logs_every_stack_naming_the_blocking_call(watchdog, caplog) -> None:
    caplog.set_level(logging.INFO, logger="accelopt_site.watchdog")
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="server-loop", daemon=True)
    thread.start()
    try:
        heartbeat = asyncio.run_coroutine_threadsafe(_start_heartbeat(watchdog), loop).result(timeout=5)
        time.sleep(3 * STALL_S)
        assert _stall_records(caplog) == []  # a loop that beats is never reported
        loop.call_soon_threadsafe(hold_the_event_loop, 6 * STALL_S)
        assert _wait_for(lambda: _stall_records(caplog))
        message = _stall_records(caplog)[0]
        assert "event loop: no progress for" in message
        assert "Thread server-loop" in message and "in hold_the_event_loop" in message
        # once the loop is free again the watchdog says so, and reports nothing more
        assert _wait_for(lambda: any("making progress again" in r.getMessage() for r in caplog.records))
        assert len(_stall_records(caplog)) == 1
    finally:
        loop.call_soon_threadsafe(heartbeat.cancel)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


async def _start_heartbeat(watchdog: Watchdog) -> asyncio.Task:
    return asyncio.get_running_loop().create_task(loop_heartbeat(watchdog, interval_s=0.05))


@dataclass(frozen=True)
class _Request:
    """Stands in for an EvaluationRequest: what the executor reads, and a run() that takes `seconds`."""

    seconds: float
    limits: Limits
    kernel_name: str = "slow_kernel"
    platform: str = "trn1"
    backend: str = "simulator"

    def run(self) -> str:
        return stuck_in_an_evaluation(self.seconds)


def stuck_in_an_evaluation(seconds: float) -> str:
    time.sleep(seconds)
    return "done"


def test_a_worker_held_past_its_evaluations_limits_logs_its_stack(watchdog, caplog) -> None:
    caplog.set_level(logging.INFO, logger="accelopt_site.watchdog")
    executor = LocalExecutor(max_workers=2)
    try:
        # Within its allowance (wall_seconds x attempts) plus the stall time: not a stall.
        quick = executor.submit(_Request(3 * STALL_S, Limits(wall_seconds=1.0, infrastructure_retries=1)))
        assert quick.result(timeout=10) == "done"
        time.sleep(3 * STALL_S)  # idle workers are never reported either
        assert _stall_records(caplog) == []
        stuck = executor.submit(_Request(8 * STALL_S, Limits(wall_seconds=0.2, infrastructure_retries=0)))
        assert _wait_for(lambda: _stall_records(caplog))
        message = _stall_records(caplog)[0]
        assert "worker accelopt-eval" in message and "evaluating slow_kernel on trn1/simulator" in message
        assert "(allowed 0 s)" in message and "in stuck_in_an_evaluation" in message
        assert stuck.result(timeout=10) == "done"
    finally:
        executor.shutdown()


def test_the_stall_time_is_checked_at_start() -> None:
    env = {**os.environ, "ACCELOPT_STALL_SECONDS": "a minute", "DJANGO_SETTINGS_MODULE": "accelopt_site.settings"}
    done = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert "ACCELOPT_STALL_SECONDS must be an integer; got 'a minute'" in done.stderr
