"""Two NeuronCores at once: `core_barrier` and `sendrecv` of an LNC=2 launch (issue 34).

A launch's programs normally run one after another (simulate.py). That cannot honour a barrier: program 0
would run past it before program 1 reached it. A kernel that calls `nisa.core_barrier` or `nisa.sendrecv`
therefore runs again with one thread per program, taking turns: one thread runs at a time (the simulator's
state is one), in program order, and a thread hands its turn over only when it waits at a barrier, so a kernel
runs exactly as sequentially up to its first barrier. Programs pair up as the cores of an LNC=2 logical core
(flat program index 2k and 2k+1 are cores 0 and 1: `kernel[nl.nc(2)]` is one pair).

- `core_barrier(data, cores=(0, 1))`: each core waits until every core named has reached it.
- `sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id)`: both cores post their transfer and wait for
  each other (per pipe_id); the last to arrive moves every posted `src` into its receiver's `dst`, so no
  core can change its `src` before its partner has read it.

Semantics from the SDK 2.32 API reference (nki/api/nki/isa/__init__.py in aws-neuron-sdk). Both are
NeuronCore-v3 and newer. A thread per program is refused where a process may not start threads (the
evaluation sandbox allows one process), with a message that says so.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.platforms.nki.simulator.errors import NKICompileError, NKIRuntimeError

CORES_PER_GROUP = 2  # LNC=2: the only grouping the API reference supports (cores=(0, 1))


class NeedsCores(BaseException):  # noqa: N818 - a signal to simulate(), not an error a kernel sees
    """Raised by a barrier in a sequential run: simulate() runs the kernel again with a thread per program."""


class _Abandon(BaseException):  # noqa: N818 - unwinds a waiting thread when another failed
    pass


@dataclass
class _Saved:
    """What the simulator holds for the program that is running (runtime.Simulator's per-program fields)."""

    stack: list = field(default_factory=list)
    nest: tuple = ()
    scope: tuple = ()
    ctx: int = 0
    program: tuple = ()
    shared_next: int = 0


@dataclass
class _Wait:
    members: frozenset[int]
    line: int
    arrived: set[int] = field(default_factory=set)
    transfers: list[Callable[[], None]] = field(default_factory=list)


class Cores:
    """Runs the programs of a launch as taking-turns threads (simulate.py makes one when a kernel needs it)."""

    def __init__(self, sim: Any, programs: list[tuple[int, ...]], grid: tuple[int, ...]) -> None:
        self.sim = sim
        self.programs = programs
        self.grid = grid
        self.cond = threading.Condition()
        self.turn: int | None = None
        self.blocked: set[int] = set()
        self.done: set[int] = set()
        self.saved: dict[int, _Saved] = {}
        self.waits: dict[tuple, _Wait] = {}
        self.error: BaseException | None = None
        self.results: dict[int, Any] = {}
        # sendrecv, per (first program of the group, pipe_id): each core's posted src and its dst
        self.posted: dict[tuple[int, int], dict[int, tuple]] = {}
        self.receivers: dict[tuple[int, int], dict[int, tuple]] = {}
        self.local = threading.local()

    # -- running ------------------------------------------------------------------------------------------
    def run(self, body: Callable[[], Any]) -> Any:
        """Run `body` once per program; return the last program's result, as the sequential loop does."""
        threads = [threading.Thread(target=self._main, args=(k, body), daemon=True) for k in range(len(self.programs))]
        try:
            for t in threads:
                t.start()
        except RuntimeError as err:
            self._fail(err)
            raise NKICompileError("core_barrier", "cores exchanging data run as one thread each, and this process "
                                                  f"may not start threads ({err})") from None
        with self.cond:
            self.turn = 0
            self.cond.notify_all()
        for t in threads:
            t.join()
        if self.error is not None:
            raise self.error
        return self.results.get(len(self.programs) - 1)

    def _main(self, k: int, body: Callable[[], Any]) -> None:
        self.local.index = k
        try:
            with self.cond:
                self._wait_for_turn(k)
            self.sim.start_program(self.programs[k], self.grid)
            self._restore(_Saved(program=self.programs[k], ctx=self.sim.trace.context_id(())))
            self.results[k] = body()
            if self.sim.pending is not None:
                self.sim.flush()
        except _Abandon:
            return
        except BaseException as err:  # noqa: BLE001 - handed to the main thread, which raises it
            self._fail(err)
            return
        with self.cond:
            self.done.add(k)
            self._pass_turn()

    def _fail(self, err: BaseException) -> None:
        with self.cond:
            if self.error is None:
                self.error = err
            self.cond.notify_all()

    def _wait_for_turn(self, k: int) -> None:
        while self.turn != k:
            if self.error is not None:
                raise _Abandon
            self.cond.wait()
        if self.error is not None:
            raise _Abandon

    def _pass_turn(self) -> None:
        """Give the turn to the first program that can run; none left while some wait is a deadlock."""
        runnable = [k for k in range(len(self.programs)) if k not in self.done and k not in self.blocked]
        if runnable:
            self.turn = runnable[0]
        elif len(self.done) < len(self.programs) and self.error is None:
            what = "; ".join(f"program {sorted(w.arrived)} waits at the {key[1]} of line {w.line} for program(s) "
                             f"{sorted(w.members - w.arrived)}, which ended without reaching it"
                             for key, w in self.waits.items())
            self.error = NKIRuntimeError(next(iter(self.waits))[1] if self.waits else "core_barrier",
                                         f"the cores never meet: {what} (each core must reach the same barriers in "
                                         "the same order)")
        self.cond.notify_all()

    # -- the simulator's per-program state ------------------------------------------------------------------
    def _save(self) -> _Saved:
        s = self.sim
        if s.pending is not None:
            s.flush()
        s.matmuls.run_all()
        return _Saved(s.stack, s.nest, s.scope, s.ctx, s.program, s.shared_next)

    def _restore(self, saved: _Saved) -> None:
        s = self.sim
        s.stack, s.nest, s.scope, s.ctx = saved.stack, saved.nest, saved.scope, saved.ctx
        s.program, s.shared_next = saved.program, saved.shared_next

    # -- barriers -------------------------------------------------------------------------------------------
    def core_of(self, k: int) -> int:
        return k % CORES_PER_GROUP

    def meet(self, key: tuple, ranks: frozenset[int], transfer: Callable[[], None] | None = None) -> None:
        """Wait at the barrier `key` (its n-th use by this program) until the cores `ranks` of this program's
        group have all arrived; the last one runs the transfers posted there before anyone goes on."""
        k = self.local.index
        counts = self.local.__dict__.setdefault("counts", {})
        counts[key] = counts.get(key, 0) + 1
        key = (*key, counts[key])
        group = k - self.core_of(k)
        members = frozenset(group + r for r in ranks)
        if any(m >= len(self.programs) for m in members):
            raise NKICompileError(key[0], f"cores {sorted(ranks)} need {max(ranks) + 1} programs in the launch's "
                                          f"group of {CORES_PER_GROUP}; program {k} has no core {max(ranks)} beside it")
        full = (group, *key)
        with self.cond:
            wait = self.waits.setdefault(full, _Wait(members, self.sim.line_no))
            if wait.members != members:
                raise NKIRuntimeError(key[0], f"the cores disagree on who meets here: {sorted(wait.members)} and "
                                              f"{sorted(members)}")
            wait.arrived.add(k)
            if transfer is not None:
                wait.transfers.append(transfer)
            if wait.arrived < members:
                saved = self._save()
                self.blocked.add(k)
                self._pass_turn()
                self._wait_for_turn(k)
                self._restore(saved)
                return
            del self.waits[full]
            for other in members - {k}:
                self.blocked.discard(other)
        for move in wait.transfers:
            move()


def running(sim: Any) -> Cores | None:
    """The Cores running `sim`'s programs, if any."""
    return getattr(sim, "cores", None)
