"""A stuck server says so: a watchdog thread that logs every thread's stack when the event loop or an
evaluation worker stops making progress for longer than ACCELOPT_STALL_SECONDS.

* The event loop: a heartbeat coroutine on daphne's loop beats once a second. No beat for the stall time
  means something blocks the loop (a synchronous call in a coroutine, a lock, a deadlock): every page,
  websocket and /healthz is then frozen.
* Django's sync thread: a coroutine beats from it once a second (through sync_to_async), so a request whose
  synchronous code never returns, which holds up every other page, is found too.
* Evaluation workers (the local executor's threads, engine.evaluator.executors): a worker marks
  itself busy when it picks an evaluation up and idle when it is done. An idle worker never stalls; a busy
  one stalls once it has held one evaluation longer than that evaluation can last under its own sandbox
  limits (its allowance) plus the stall time: the sandbox should have ended it by then.
* When no Python thread can run at all (one holds the GIL and is blocked: the fork-with-threaded-BLAS
  deadlock of issue 32), this thread cannot log either; so it keeps re-arming faulthandler's C timer,
  which dumps every stack to stderr without the GIL if the watchdog itself misses its checks for the stall
  time. SIGUSR1 dumps them on demand the same way (`kill -USR1 <pid>`).

Each stall is logged once when it is found (at ERROR, with the stacks) and once when it clears.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import logging
import signal
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings

from engine.evaluator import executors

logger = logging.getLogger(__name__)

LOOP = "event loop"
SYNC_THREAD = "Django's sync thread"  # where every request's middleware runs (asgiref, thread_sensitive)
LOOP_BEAT_S = 1.0


@dataclass
class _Work:
    what: str
    since: float
    allowance_s: float


def format_all_stacks() -> str:
    """Every Python thread's stack, named, innermost call last (as faulthandler prints them)."""
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    parts = []
    for ident, frame in sys._current_frames().items():
        parts.append(f'Thread {names.get(ident, "?")} (id {ident}):\n' + "".join(traceback.format_stack(frame)))
    return "\n".join(parts)


class Watchdog:
    """Checks the heartbeats every `check_interval_s`; see the module docstring. `native_dump` also arms the
    C-level fallback and SIGUSR1 (process-wide: only the server's watchdog does)."""

    def __init__(self, stall_seconds: float, *, check_interval_s: float | None = None,
                 native_dump: bool = False) -> None:
        if stall_seconds <= 0:
            raise ValueError(f"stall_seconds must be positive, got {stall_seconds}")
        self.stall_seconds = float(stall_seconds)
        self.check_interval_s = check_interval_s or min(1.0, self.stall_seconds / 4)
        self.native_dump = native_dump
        self._lock = threading.Lock()
        self._beats: dict[str, float] = {}
        self._work: dict[str, _Work] = {}
        self._reported: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- what the watched code calls ------------------------------------------------------------------

    def beat(self, name: str = LOOP) -> None:
        with self._lock:
            self._beats[name] = time.monotonic()

    @contextlib.contextmanager
    def busy(self, what: str, allowance_s: float = 0.0) -> Iterator[None]:
        """Mark the calling thread busy with `what` for the block; it may take `allowance_s` before the
        stall time starts counting."""
        name = threading.current_thread().name
        with self._lock:
            self._work[name] = _Work(what, time.monotonic(), allowance_s)
        try:
            yield
        finally:
            with self._lock:
                self._work.pop(name, None)

    # --- the checks -----------------------------------------------------------------------------------

    def stalls(self, now: float | None = None) -> dict[str, str]:
        """What has stalled now: name -> what it is doing and for how long."""
        now = time.monotonic() if now is None else now
        found = {}
        with self._lock:
            for name, last in self._beats.items():
                if now - last > self.stall_seconds:
                    found[name] = f"{name}: no progress for {now - last:.1f} s"
            for name, work in self._work.items():
                if now - work.since > work.allowance_s + self.stall_seconds:
                    found[name] = (f"worker {name}: {work.what} for {now - work.since:.1f} s "
                                   f"(allowed {work.allowance_s:.0f} s)")
        return found

    def check(self) -> dict[str, str]:
        """Log stalls found since the last check (with every stack) and those that cleared; returns them."""
        found = self.stalls()
        new = {name: text for name, text in found.items() if name not in self._reported}
        if new:
            logger.error("stalled (limit ACCELOPT_STALL_SECONDS=%g s): %s\nStacks of all threads:\n%s",
                         self.stall_seconds, "; ".join(new.values()), format_all_stacks())
        for name in self._reported - found.keys():
            logger.warning("watchdog: %s is making progress again", name)
        self._reported = set(found)
        return found

    def _run(self) -> None:
        while not self._stop.wait(self.check_interval_s):
            if self.native_dump:
                # Re-armed at every check: it fires only if this thread misses the stall time (no GIL).
                faulthandler.dump_traceback_later(self.stall_seconds + self.check_interval_s, exit=False,
                                                  file=sys.stderr)
            try:
                self.check()
            except Exception:  # the watchdog must outlive anything odd in what it formats
                logger.exception("watchdog check failed")

    def start(self) -> Watchdog:
        if self.native_dump:
            with contextlib.suppress(ValueError, AttributeError, RuntimeError):  # no SIGUSR1 / stderr fd
                faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
        self._thread = threading.Thread(target=self._run, name="accelopt-watchdog", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.native_dump:
            faulthandler.cancel_dump_traceback_later()


async def loop_heartbeat(watchdog: Watchdog, interval_s: float = LOOP_BEAT_S) -> None:
    """Beat for the loop this runs on, forever."""
    while True:
        watchdog.beat(LOOP)
        await asyncio.sleep(interval_s)


async def sync_thread_heartbeat(watchdog: Watchdog, interval_s: float = LOOP_BEAT_S) -> None:
    """Beat from Django's one sync thread, forever: it stalls when a request's synchronous code never
    returns, and then every page waits behind it while the loop itself still beats."""
    while True:
        await sync_to_async(watchdog.beat)(SYNC_THREAD)
        await asyncio.sleep(interval_s)


# --- the process's one watchdog -----------------------------------------------------------------------

_current: dict[str, Any] = {}


def current() -> Watchdog | None:
    return _current.get("watchdog")


@contextlib.contextmanager
def busy(what: str, allowance_s: float = 0.0) -> Iterator[None]:
    """Watchdog.busy on this process's watchdog; nothing when none runs (tests, management commands)."""
    watchdog = current()
    if watchdog is None:
        yield
        return
    with watchdog.busy(what, allowance_s):
        yield


def start_server_watchdog() -> Watchdog | None:
    """Start the server's watchdog once, with its heartbeat on the running loop; None when turned off
    (ACCELOPT_STALL_SECONDS=0). Called on daphne's loop (accelopt_site/asgi.py)."""
    stall_seconds = settings.ACCELOPT_STALL_SECONDS
    if not stall_seconds or current() is not None:
        return current()
    watchdog = Watchdog(stall_seconds, native_dump=True).start()
    _current["watchdog"] = watchdog
    executors.report_busy_with(busy)
    loop = asyncio.get_running_loop()
    _current["heartbeats"] = [loop.create_task(loop_heartbeat(watchdog)),
                              loop.create_task(sync_thread_heartbeat(watchdog))]
    logger.info("watchdog: logs every thread's stack after %g s without progress", stall_seconds)
    return watchdog
