"""Running a kernel: `simulate(kernel, inputs)` and the `nki.jit` family of decorators."""

from __future__ import annotations

import functools
import gc
import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.platforms.nki.hardware import CORE_SPECS, get_core_spec
from engine.platforms.nki.simulator.errors import BlockRecyclingMiss, NKICompileError, NKIError
from engine.platforms.nki.simulator.semantics import dtypes as dt
from engine.platforms.nki.simulator.semantics import runtime
from engine.platforms.nki.simulator.semantics.cores import Cores, NeedsCores
from engine.platforms.nki.simulator.semantics.runtime import Simulator
from engine.platforms.nki.simulator.semantics.tensors import SHARED_HBM, Tensor
from engine.platforms.nki.simulator.speed.blas import single_threaded_blas
from engine.platforms.nki.simulator.speed.liveness import kernel_liveness
from engine.platforms.nki.simulator.speed.parallel import LoopSplitter, ParallelFallback, child_exit
from engine.platforms.nki.simulator.speed.recycling import BlockRecycler
from engine.platforms.nki.simulator.speed.splittable import SplitLoop, parallel_loops
from engine.platforms.nki.simulator.trace import Trace
from engine.platforms.nki.simulator.verification.program import Program, ProgramRecorder


@dataclass(frozen=True)
class Simulation:
    outputs: tuple[np.ndarray, ...]  # the kernel's returned HBM tensors
    trace: Trace  # frozen instruction trace (empty when record_trace=False)
    instructions: int  # instructions executed (counted even without a trace)
    inputs_after: tuple[Any, ...] = ()  # the inputs as the kernel left them (arrays; other inputs as given)
    rerun_without_recycling: bool = False  # the block recycler guessed wrong and the kernel ran twice
    parallel_fallback: str = ""  # why a split loop's halves could not be merged (the kernel ran again in one process)
    program: Program | None = None  # the executable record (record_program=True; program.py)


class JitKernel:
    """What `@nki.jit` returns: the kernel function, callable with numpy arrays (simulates it)."""

    def __init__(self, func: Any, options: dict[str, Any] | None = None) -> None:
        self.func = func
        self.options = options or {}
        self.__name__ = getattr(func, "__name__", "kernel")
        self.__doc__ = getattr(func, "__doc__", None)
        self.__wrapped__ = func

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if runtime._ACTIVE is not None:
            return self.func(*args, **kwargs)  # a kernel calling another kernel: plain call
        args, kwargs = _arrays_positional(self.func, args, kwargs)
        sim = simulate(self, list(args), kwargs=kwargs, platform=self.platform)
        _write_back(args, sim)
        return sim.outputs[0] if len(sim.outputs) == 1 else sim.outputs

    def __getitem__(self, grid: Any) -> Any:
        """kernel[grid](...): an SPMD launch, simulated as the programs one after another."""
        dims = tuple(int(g) for g in (grid if isinstance(grid, tuple) else (grid,)))

        def launch(*args: Any, **kwargs: Any) -> Any:
            if runtime._ACTIVE is not None:
                raise NKICompileError("spmd", "an SPMD launch cannot happen inside a running kernel")
            args, kwargs = _arrays_positional(self.func, args, kwargs)
            sim = simulate(self, list(args), kwargs=kwargs, grid=dims, platform=self.platform)
            _write_back(args, sim)
            return sim.outputs[0] if len(sim.outputs) == 1 else sim.outputs

        return launch

    @property
    def platform(self) -> str:
        """`@nki.jit(platform_target="trn2")` simulates on that platform (trn1 when none is named)."""

        target = str(self.options.get("platform_target", "trn1"))
        return target if target in CORE_SPECS else "trn1"

    def __repr__(self) -> str:
        return f"<nki.jit kernel {self.__name__}>"


def jit(func: Any = None, **options: Any) -> Any:
    """@nki.jit or @nki.jit(mode=..., ...)."""
    if func is None:
        return lambda f: JitKernel(f, options)
    if isinstance(func, JitKernel):
        return func
    return JitKernel(func, options)


def _unwrap(kernel: Any) -> Any:
    while isinstance(kernel, JitKernel):
        kernel = kernel.func
    return getattr(kernel, "__wrapped__", kernel) if not callable(kernel) else kernel


def check_grid(grid: tuple[int, ...]) -> None:
    """A launch grid must name at least one program on every axis: `kernel[0](...)` would run nothing and
    return outputs nobody wrote, so it is an error (the device rejects an empty launch too)."""
    for axis, size in enumerate(grid):
        if size < 1:
            raise NKICompileError("spmd", f"launch grid {list(grid)} has {size} programs on axis {axis}; every "
                                          "axis needs at least 1")


def simulate(kernel: Any, inputs: list[Any], *, platform: str = "trn1", record_trace: bool = True,
             kwargs: dict[str, Any] | None = None, grid: tuple[int, ...] = (), workers: int = 1,
             record_program: bool = False) -> Simulation:
    """Run `kernel` on copies of `inputs`; return its outputs (numpy) and the instruction trace.

    With an SPMD `grid`, every program runs in turn (nl.program_id tells them apart) and the HBM
    tensors they declare are shared: the n-th shared_hbm declaration of every program is one tensor.

    `workers=2` runs the two halves of each top-level `affine_range` loop that only touches tensors in
    two processes (parallel.py); the outputs and the trace are the same as with one. It forks, so use
    it only in a process that runs no other threads (the evaluation child, the benchmark).

    `record_program=True` also records the executable program (program.py) that replay.py runs again on
    other inputs; it runs in one process (workers is ignored)."""
    func = _unwrap(kernel)
    code = getattr(func, "__code__", None)
    if code is None:
        raise TypeError(f"simulate needs a kernel function, got {type(kernel).__name__}")
    check_grid(grid)
    names = _parameter_names(func, len(inputs))
    rerun = False
    fallback = ""
    parallel = parallel_loops(func) if workers > 1 and not grid and not record_program else {}
    run = functools.partial(_run, func, code, inputs, names, platform, record_trace, kwargs, grid,
                            record_program=record_program)
    try:
        try:
            sim, args, result = run(recycle=True, parallel=parallel)
        except NeedsCores:
            # core_barrier / sendrecv: the programs must run side by side (cores.py); run the kernel again so,
            # with plain storage (the recycler's liveness guesses assume one program at a time)
            gc.collect()
            run = functools.partial(run, cores=True)
            sim, args, result = run(recycle=False)
    except BlockRecyclingMiss:
        rerun = True
    except ParallelFallback as err:
        fallback = str(err) or "fallback"
        gc.collect()
        try:
            sim, args, result = run(recycle=True)
        except BlockRecyclingMiss:
            rerun = True
    if rerun:
        # The kernel reused a block the recycler had judged dead: run it again with plain storage, once
        # the first attempt's tensors are gone (outside the except block, whose traceback holds them).
        gc.collect()
        sim, args, result = run(recycle=False)
    returned = _flatten(result)
    outputs = tuple(_output(t) for t in returned)
    after = tuple(a.data if isinstance(a, Tensor) else a for a in args)
    program = None
    if sim.recorder is not None:
        program = sim.recorder.finish([_input_entry(x) for x in inputs], [_output_spec(sim.recorder, t) for t in returned])
    return Simulation(outputs=outputs, trace=sim.trace.freeze(), instructions=sim.instructions, inputs_after=after,
                      rerun_without_recycling=rerun, parallel_fallback=fallback, program=program)


def _run(func: Any, code: Any, inputs: list[Any], names: list[str], platform: str, record_trace: bool,
         kwargs: dict[str, Any] | None, grid: tuple[int, ...], *, recycle: bool, record_program: bool = False,
         parallel: dict[int, SplitLoop] | None = None, cores: bool = False) -> tuple[Simulator, list[Any], Any]:
    sim = Simulator(get_core_spec(platform), record_trace=record_trace, kernel_file=code.co_filename,
                    recycler=BlockRecycler() if recycle else None,
                    liveness=kernel_liveness(func) if recycle or parallel else None,
                    splitter=LoopSplitter(parallel) if parallel else None,
                    recorder=ProgramRecorder() if record_program else None)
    with sim, single_threaded_blas(), _rare_garbage_collection():
        args = [_as_input(x, name, sim, k) for k, (x, name) in enumerate(zip(inputs, names, strict=False))]
        try:
            programs = list(np.ndindex(*grid)) if grid else [()]
            result = None
            if cores:
                sim.cores = Cores(sim, programs, grid)  # type: ignore[attr-defined]
                result = sim.cores.run(lambda: func(*args, **(kwargs or {})))  # type: ignore[attr-defined]
            else:
                for program in programs:
                    sim.start_program(program, grid)
                    result = func(*args, **(kwargs or {}))
            sim.finish()
        except BaseException as err:
            if sim.split is not None and sim.split.child:
                # A split loop's child that fails must not return into the caller: the parent falls
                # back to one process, which reports the error as usual.
                child_exit(sim.split, {"fallback": f"the second half failed: {type(err).__name__}: {err}"}, 1)  # type: ignore[arg-type]
            if isinstance(err, NKIError):
                raise err.with_line(_kernel_line(err, code.co_filename)) from None
            raise
    return sim, args, result


@contextmanager
def _rare_garbage_collection() -> Iterator[None]:
    """A kernel allocates hundreds of thousands of small objects that live to its end (trace rows, race
    records): with the default thresholds the collector walks them over and over."""
    before = gc.get_threshold()
    gc.set_threshold(100_000, 50, 100)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _write_back(args: tuple, sim: Simulation) -> None:
    """A kernel called from Python (`kernel(a, out)`, `simulate_kernel(kernel, a, out)`) writes its HBM arguments
    in place, as NKI's own simulator does (AWS's tests pass an output array in and read it after); `simulate`
    itself leaves the caller's arrays alone (it reports `inputs_after`)."""
    for given, after in zip(args, sim.inputs_after, strict=False):
        if isinstance(given, np.ndarray) and isinstance(after, np.ndarray) and given.flags.writeable \
                and given.shape == after.shape:
            np.copyto(given, after, casting="unsafe")


def _arrays_positional(func: Any, args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """Arrays given by keyword (`kernel(src, imm0=array)`) become positional inputs, so they are HBM tensors
    like every other array argument (keyword arguments reach the kernel as they are)."""
    if not any(isinstance(v, np.ndarray) for v in kwargs.values()):
        return args, kwargs
    try:
        bound = inspect.signature(func).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return args, kwargs
    bound.apply_defaults()
    return bound.args, bound.kwargs


def simulate_kernel(kernel: Any, *args: Any, **kwargs: Any) -> Any:
    """nki.simulate_kernel(kernel, *numpy_arrays): the kernel's outputs as numpy arrays."""
    args, kwargs = _arrays_positional(_unwrap(kernel), args, kwargs)
    sim = simulate(kernel, list(args), kwargs=kwargs)
    _write_back(args, sim)
    return sim.outputs[0] if len(sim.outputs) == 1 else sim.outputs


def _parameter_names(func: Any, n: int) -> list[str]:
    try:
        params = list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"input{i}" for i in range(n)]


def _as_input(x: Any, name: str, sim: Simulator, index: int = 0) -> Any:
    if isinstance(x, np.ndarray):
        d = dt.as_dtype(x.dtype)
        t = sim.remember(Tensor(name, x.shape, d, SHARED_HBM, data=np.array(x, dtype=d.storage, copy=True),
                                initialised=True))
        if sim.recorder is not None:
            sim.recorder.declared(t, ("input", index))
        return t
    return x


def _input_entry(x: Any) -> tuple:
    """What a program assumes of one kernel argument: an array's shape and dtype, or a scalar's value."""
    if isinstance(x, np.ndarray):
        return ("array", tuple(x.shape), x.dtype.str)
    return ("scalar", x)


def _output_spec(recorder: ProgramRecorder, t: Tensor) -> Any:
    return recorder.spec(t.alias) if t.alias is not None else recorder.array_spec(t, t.data)  # type: ignore[arg-type]


def _flatten(result: Any) -> list[Tensor]:
    if result is None:
        return []
    if isinstance(result, Tensor):
        return [result]
    if isinstance(result, (tuple, list)):
        out: list[Tensor] = []
        for r in result:
            out.extend(_flatten(r))
        return out
    raise NKICompileError("return", f"a kernel returns HBM tensors, got {type(result).__name__}")


def _output(t: Tensor) -> np.ndarray:
    if t.alias is not None:
        return np.array(t.alias.array)
    return t.reveal_unwritten()


def _kernel_line(err: BaseException, filename: str) -> int:
    """The deepest traceback frame inside the kernel's source file."""
    line = 0
    tb = err.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line
