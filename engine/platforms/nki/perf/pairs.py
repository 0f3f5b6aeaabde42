"""Differential pairs: two versions of one kernel measured on Trainium, and the speedup the model predicts.

The ground truth is `measurements/data/trn1_differential_pairs.csv`: one row per public pair (a slow and a
fast version of one kernel, both latencies measured on trn1, the page or results file that published them).
Kernel sources are never copied into this project: a row names each version as
`<source>:<path>@<commit>#<function>`, and the caller says where each source lives on disk
(`{"accelopt": Path(...), "neuron-sdk": Path(...)}`), a work tree or a git directory (read at the commit).

`predict_pairs` simulates both versions on the row's inputs (full published size, traces cached like the
calibration's) and returns measured against predicted speedup. Pure Python + numpy, no Django.
"""

from __future__ import annotations

import csv
import hashlib
import importlib.util
import json
import math
import pickle
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.platforms.nki.hardware import NeuronCoreSpec
from engine.platforms.nki.perf import PreparedTrace, estimate, prepare
from engine.platforms.nki.simulator.trace import Trace

DEFAULT_PAIRS_CSV = Path(__file__).resolve().parents[4] / "measurements" / "data" / "trn1_differential_pairs.csv"
SIMULATED = "simulated"  # the status of a row the model can be checked on


@dataclass(frozen=True)
class KernelRef:
    """One kernel version: `<source>:<path>@<commit>#<function>`."""

    source: str
    path: str
    commit: str
    function: str

    @classmethod
    def parse(cls, text: str) -> KernelRef | None:
        if not text:
            return None
        source, _, rest = text.partition(":")
        location, _, function = rest.partition("#")
        path, _, commit = location.partition("@")
        return cls(source, path, commit, function or "kernel")

    def __str__(self) -> str:
        return f"{self.source}:{self.path}@{self.commit[:7]}#{self.function}"


@dataclass(frozen=True)
class Pair:
    name: str
    slow: KernelRef | None
    fast: KernelRef | None
    inputs: str  # how the inputs are built: "nkibench:<reference path>" or an INPUT_BUILDERS name
    shape: dict[str, int]
    slow_ms: float
    fast_ms: float
    hardware: str
    source: str
    status: str  # "simulated", or why the model cannot be checked on this pair
    notes: str

    @property
    def measured_speedup(self) -> float:
        return self.slow_ms / self.fast_ms


@dataclass
class PairResult:
    name: str
    measured: float
    predicted: float | None = None
    slow_ms: float | None = None  # predicted latencies
    fast_ms: float | None = None
    status: str = SIMULATED
    error: str = ""

    @property
    def ratio(self) -> float | None:
        """predicted / measured speedup (1.0: exact; the issue's goal is within 0.85-1.15)."""
        return self.predicted / self.measured if self.predicted else None

    @property
    def sign_right(self) -> bool | None:
        """Both say faster, both say slower, or both within 2% of no change."""
        if self.predicted is None:
            return None
        def side(s: float) -> int:
            return 0 if abs(math.log(s)) < 0.02 else (1 if s > 1 else -1)
        return side(self.predicted) == side(self.measured)


def load_pairs(csv_path: Path = DEFAULT_PAIRS_CSV) -> list[Pair]:
    with Path(csv_path).open() as f:
        return [Pair(name=r["pair"], slow=KernelRef.parse(r["slow_kernel"]), fast=KernelRef.parse(r["fast_kernel"]),
                     inputs=r["inputs"], shape=json.loads(r["shape"]), slow_ms=float(r["slow_ms"]),
                     fast_ms=float(r["fast_ms"]), hardware=r["hardware"], source=r["source"], status=r["status"],
                     notes=r["notes"]) for r in csv.DictReader(f)]


# --- kernel sources -----------------------------------------------------------------------------------------

def kernel_source(ref: KernelRef, roots: dict[str, Path]) -> bytes:
    """The source file of `ref`: from a git directory at the recorded commit, else from a work tree's file."""
    root = roots.get(ref.source)
    if root is None:
        raise FileNotFoundError(f"no path given for kernel source {ref.source!r} (e.g. --kernel-source {ref.source}=DIR)")
    root = Path(root)
    if ref.commit:
        shown = subprocess.run(["git", f"--git-dir={_git_dir(root)}", "show", f"{ref.commit}:{ref.path}"],
                               capture_output=True, check=False) if _git_dir(root) else None
        if shown is not None and shown.returncode == 0:
            return shown.stdout
    path = root / ref.path
    if not path.is_file():
        raise FileNotFoundError(f"{ref}: neither {ref.commit[:7]}:{ref.path} in the git history of {root} nor {path}")
    return path.read_bytes()


def _git_dir(root: Path) -> Path | None:
    if (root / ".git").exists():
        return root / ".git"
    if (root / "HEAD").is_file() and (root / "objects").is_dir():
        return root  # a bare repository
    return None


def _import_source(source: bytes, work_dir: Path, name: str):
    work_dir.mkdir(parents=True, exist_ok=True)
    path = work_dir / f"{name}_{hashlib.sha256(source).hexdigest()[:12]}.py"
    if not path.exists():
        path.write_bytes(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    # AccelOpt's harness runs its kernels after an import header (samples/nki/profile_*.py): some files, such as
    # samples/nki/mamba_optimized.py, rely on it. The same names, bound before the file runs.
    import neuronxcc.nki as nki
    import neuronxcc.nki.isa as nisa
    import neuronxcc.nki.language as nl
    import neuronxcc.nki.typing as nt

    module.__dict__.update(np=np, nki=nki, nl=nl, nt=nt, nisa=nisa, trace=getattr(nki, "trace", None),
                           par_dim=getattr(nl, "par_dim", None))
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


class _Grid(tuple):
    """An nl.mgrid result with the fields NKI documents (`.p` partition index, `.x`, `.y`, `.z` free indices)."""

    p = property(lambda self: self[0])
    x = property(lambda self: self[1])
    y = property(lambda self: self[2])
    z = property(lambda self: self[3])


@contextmanager
def _mgrid_fields() -> Iterator[None]:
    """The simulator's nl.mgrid returns a plain tuple; the matmul tutorial reads `grid.p` / `grid.x`. For the
    pair runs only, wrap its results in _Grid (the simulator itself is not changed; reported as a gap)."""
    import neuronxcc.nki.language as nl  # lazy: the Neuron SDK is optional

    original = nl.mgrid

    class _Fields:
        def __getitem__(self, key: Any) -> Any:
            out = original[key]
            return _Grid(out) if isinstance(out, tuple) else out

    nl.mgrid = _Fields()
    try:
        yield
    finally:
        nl.mgrid = original


# --- inputs -------------------------------------------------------------------------------------------------

def _matmul_tutorial(shape: dict[str, int], rng: np.random.Generator) -> list[np.ndarray]:
    # The tutorial benchmarks BF16; numpy has no bfloat16, float16 has its size and Tensor Engine rate.
    k, m, n = shape["K"], shape["M"], shape["N"]
    return [rng.standard_normal((k, m)).astype(np.float16), rng.standard_normal((k, n)).astype(np.float16)]


def _mamba_tutorial_2d(shape: dict[str, int], rng: np.random.Generator) -> list[np.ndarray]:
    # delta, u (channels, seq_len); A (channels, state); B, C (state, seq_len): the tutorial's with batch = 1 dropped.
    assert shape.get("batch", 1) == 1
    c, s, n = shape["channels"], shape["seq_len"], shape["state_size"]
    def normal(*dims: int) -> np.ndarray:
        return rng.normal(0.0, 0.05, size=dims).astype(np.float32)
    return [normal(c, s), normal(c, s), normal(c, n), normal(n, s), normal(n, s)]


INPUT_BUILDERS: dict[str, Callable[[dict[str, int], np.random.Generator], list[np.ndarray]]] = {
    "matmul_tutorial": _matmul_tutorial,
    "mamba_tutorial_2d": _mamba_tutorial_2d,
}


def build_inputs(pair: Pair, roots: dict[str, Path]) -> list[np.ndarray]:
    if pair.inputs.startswith("nkibench:"):
        reference = Path(roots["accelopt"]) / pair.inputs.split(":", 1)[1]
        spec = importlib.util.spec_from_file_location(f"pair_ref_{pair.name}", reference)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {reference}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        np.random.seed(0)  # as calibration.simulate_case seeds the NKIBench references
        return list(module.transform_to_nki_inputs(module.get_inputs()))
    try:
        builder = INPUT_BUILDERS[pair.inputs]
    except KeyError:
        raise ValueError(f"{pair.name}: no input builder {pair.inputs!r}") from None
    return builder(pair.shape, np.random.default_rng(0))


# --- traces -------------------------------------------------------------------------------------------------

def _trace_key(source: bytes, ref: KernelRef, pair: Pair, platform: str) -> str:
    return hashlib.sha256(source + f"|{ref.function}|{pair.inputs}|{json.dumps(pair.shape, sort_keys=True)}|"
                                   f"{platform}".encode()).hexdigest()[:16]


def pair_trace(ref: KernelRef, pair: Pair, roots: dict[str, Path], platform: str,
               cache_dir: Path | None) -> tuple[Trace, float | None]:
    """Simulate one version on the pair's inputs (or take its cached trace); also the simulation seconds."""
    source = kernel_source(ref, roots)
    key = _trace_key(source, ref, pair, platform)
    path = cache_dir / f"{Path(ref.path).stem}_{ref.function}_{key}.pkl" if cache_dir else None
    if path is not None and path.exists():
        with path.open("rb") as f:
            return pickle.load(f), None
    from engine.platforms.nki import simulator as sim  # the simulator; late so the model runs without it

    sim.install()
    with _mgrid_fields():
        module = _import_source(source, (cache_dir or Path("/tmp")) / "sources", Path(ref.path).stem)
        kernel = getattr(module, ref.function)
        inputs = build_inputs(pair, roots)
        t0 = time.perf_counter()
        trace = sim.simulate(kernel, inputs, platform=platform).trace.freeze()
        elapsed = time.perf_counter() - t0
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        with tmp.open("wb") as f:
            pickle.dump(trace, f, protocol=pickle.HIGHEST_PROTOCOL)
        tmp.replace(path)
        path.with_suffix(".json").write_text(json.dumps({"simulate_s": elapsed, "kernel": str(ref), "pair": pair.name}))
    return trace, elapsed


class PairTraces:
    """The prepared traces of every simulated version, loaded once and shared by the pairs that use them."""

    def __init__(self, pairs: list[Pair], roots: dict[str, Path], platform: str, cache_dir: Path | None,
                 log: Callable[[str], None] | None = None) -> None:
        self.pairs = pairs
        self.prepared: dict[str, dict[str, PreparedTrace]] = {}
        self.errors: dict[str, str] = {}
        by_key: dict[str, PreparedTrace] = {}
        for pair in pairs:
            if pair.status != SIMULATED:
                continue
            sides: dict[str, PreparedTrace] = {}
            for side, ref in (("slow", pair.slow), ("fast", pair.fast)):
                assert ref is not None
                try:
                    key = _trace_key(kernel_source(ref, roots), ref, pair, platform)
                    if key not in by_key:
                        trace, seconds = pair_trace(ref, pair, roots, platform, cache_dir)
                        if log is not None and seconds is not None:
                            log(f"simulated {ref} for {pair.name} in {seconds:.0f} s")
                        by_key[key] = prepare(trace)
                    sides[side] = by_key[key]
                except Exception as exc:  # a pair that cannot run is a row of the report
                    self.errors[pair.name] = f"{side} version: {type(exc).__name__}: {exc}"
                    break
            else:
                self.prepared[pair.name] = sides


def predict_pairs(traces: PairTraces, platform: NeuronCoreSpec,
                  cache: dict[tuple[int, NeuronCoreSpec], float] | None = None) -> list[PairResult]:
    """Measured and predicted speedup of every pair (`cache` keeps latencies by trace and spec across calls)."""
    results = []
    cache = {} if cache is None else cache
    for pair in traces.pairs:
        result = PairResult(pair.name, pair.measured_speedup, status=pair.status)
        sides = traces.prepared.get(pair.name)
        if pair.status != SIMULATED:
            results.append(result)
            continue
        if sides is None:
            result.error = traces.errors.get(pair.name, "not simulated")
            results.append(result)
            continue
        ms = {}
        for side, prepared in sides.items():  # one spec for every pair, whoever measured it
            key = (id(prepared), platform)
            if key not in cache:
                cache[key] = estimate(prepared, platform, breakdown=False).latency_ms
            ms[side] = cache[key]
        result.slow_ms, result.fast_ms = ms["slow"], ms["fast"]
        result.predicted = ms["slow"] / ms["fast"]
        results.append(result)
    return results


def summarize_pairs(results: list[PairResult]) -> dict[str, float | int | None]:
    """How the predicted speedups compare: count within +-15%, right sign, median |log(pred/measured)|."""
    ok = [r for r in results if r.predicted is not None]
    if not ok:
        return {"pairs": 0, "within_15pct": 0, "sign_right": 0, "median_abs_log_ratio": None}
    return {
        "pairs": len(ok),
        "within_15pct": sum(0.85 <= (r.ratio or 0) <= 1.15 for r in ok),
        "sign_right": sum(bool(r.sign_right) for r in ok),
        "median_abs_log_ratio": float(np.median([abs(math.log(r.ratio or 1)) for r in ok])),
    }


def format_pairs(results: list[PairResult]) -> str:
    lines = [f"{'pair':34} {'measured':>9} {'predicted':>10} {'pred/meas':>10} {'sign':>5}  "
             f"{'slow ms':>9} {'fast ms':>9}  (predicted latencies)"]
    for r in results:
        if r.predicted is None:
            why = r.error or r.status
            lines.append(f"{r.name:34} {r.measured:>8.3f}x {'-':>10} {'-':>10} {'-':>5}  {why}")
            continue
        lines.append(f"{r.name:34} {r.measured:>8.3f}x {r.predicted:>9.3f}x {r.ratio:>10.3f} "
                     f"{'ok' if r.sign_right else 'WRONG':>5}  {r.slow_ms:>9.3f} {r.fast_ms:>9.3f}")
    s = summarize_pairs(results)
    if s["pairs"]:
        lines.append(f"differential pairs: {s['within_15pct']}/{s['pairs']} within +-15% of the measured speedup, "
                     f"sign right on {s['sign_right']}/{s['pairs']}, median |log(pred/measured)| = "
                     f"{s['median_abs_log_ratio']:.3f}")
    return "\n".join(lines)
