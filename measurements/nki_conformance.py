"""How much NKI written by others runs correctly on our simulator (issue 34).

Runs, against engine.platforms.nki.simulator and nothing else:

1. AWS's NKI test suite (`nki/test/*.py` of an aws-neuron-sdk checkout): every `unittest` test method is one
   case; it passes when it runs to the end (each test asserts its own expected values).
2. The SDK's `nki/examples`: every NKI kernel is one case, run on inputs chosen here and compared with a numpy
   reference written here (the examples' own checks need torch/jax or a device).
3. nki-samples: the tutorials' kernels and the contributed kernels, the same way.

Usage (the checkouts stay where they are; nothing is copied into this repository):

    python measurements/nki_conformance.py --sdk PATH/aws-neuron-sdk --samples PATH/nki-samples [--only TEXT] [-v]

It prints one line per failing case with its reason, then the counts per source. Torch, torch_xla, jax and
ml_dtypes imports in a kernel file are skipped (only the kernels are run), so neither needs to be installed.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import os
import signal
import sys
import time
import traceback
import types
import unittest
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.platforms.nki.simulator import JitKernel, simulate_kernel
from engine.platforms.nki.simulator.semantics import namespaces  # noqa: E402

CASE_SECONDS = 180  # one case longer than this counts as a failure (timeout)
_SKIPPED_IMPORTS = {"torch", "torch_xla", "jax", "ml_dtypes", "neuronxcc.nki._private_kernels", "pytest",
                    "torch_neuronx", "neuron_utils", "perf_utils", "argparse", "shutil"}


@dataclass
class Outcome:
    source: str
    case: str
    ok: bool
    reason: str = ""
    seconds: float = 0.0


class _Timeout(Exception):
    pass


@contextlib.contextmanager
def _deadline(seconds: int):
    def fire(*_: Any) -> None:
        raise _Timeout(f"ran over {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _reason(err: BaseException) -> str:
    """One line: the exception and where in the kernel file it came from."""
    frames = [f for f in traceback.extract_tb(err.__traceback__) if "engine/platforms/nki/simulator" not in f.filename]
    where = f" [{Path(frames[-1].filename).name}:{frames[-1].lineno}]" if frames else ""
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return f"{type(err).__name__}: {text[:220]}{where}"


def _skipped(node: ast.stmt) -> bool:
    if isinstance(node, ast.If):  # if __name__ == "__main__": the file's own driver
        test = node.test
        return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__")
    names: list[str] = []
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        names = [node.module or ""]
    return any(n.split(".")[0] in _SKIPPED_IMPORTS or n in _SKIPPED_IMPORTS for n in names)


def load_file(path: Path, keep_going: bool = True) -> tuple[dict[str, Any], list[str]]:
    """Execute a kernel/test file statement by statement into a fresh namespace, without its `__main__` driver
    or torch/jax imports; a statement that fails is noted and skipped (the rest still defines its kernels)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    module = types.ModuleType(f"conformance_{path.stem.replace('-', '_')}")
    module.__file__ = str(path)
    sys.modules[module.__name__] = module
    ns = module.__dict__
    errors: list[str] = []
    sys.path.insert(0, str(path.parent))
    try:
        for node in tree.body:
            if _skipped(node):
                continue
            code = compile(ast.Module([node], type_ignores=[]), str(path), "exec")
            try:
                with _deadline(CASE_SECONDS), contextlib.redirect_stdout(io.StringIO()):
                    exec(code, ns)
            except BaseException as err:  # noqa: BLE001 - a module-level statement of someone else's file
                if isinstance(err, KeyboardInterrupt):
                    raise
                errors.append(f"line {node.lineno}: {_reason(err)}")
                if not keep_going:
                    break
    finally:
        sys.path.remove(str(path.parent))
    return ns, errors


# -- 1. AWS's nki/test ---------------------------------------------------------------------------------------
def run_aws_tests(sdk: Path, only: str) -> list[Outcome]:
    outcomes = []
    for path in sorted((sdk / "nki" / "test").glob("test_*.py")):
        if only and only not in path.name:
            continue
        np.random.seed(0)
        ns, _errors = load_file(path)
        classes = [v for v in ns.values() if isinstance(v, type) and issubclass(v, unittest.TestCase)
                   and v.__module__ == ns["__name__"]]
        for cls in classes:
            for name in unittest.defaultTestLoader.getTestCaseNames(cls):
                case = f"{path.name}::{cls.__name__}.{name}"
                outcomes.append(_run_unittest(cls(name), case))
    return outcomes


def _run_unittest(test: unittest.TestCase, case: str) -> Outcome:
    result = unittest.TestResult()
    start = time.perf_counter()
    try:
        with _deadline(CASE_SECONDS), contextlib.redirect_stdout(io.StringIO()):
            test.run(result)
    except _Timeout as err:
        return Outcome("aws-tests", case, False, str(err), time.perf_counter() - start)
    seconds = time.perf_counter() - start
    problems = result.errors + result.failures
    if problems:
        text = problems[0][1].strip().splitlines()
        last = text[-1] if text else "?"
        where = next((ln.strip() for ln in reversed(text) if ln.strip().startswith("File ")
                      and "engine/platforms/nki/simulator" not in ln and "unittest" not in ln), "")
        return Outcome("aws-tests", case, False, f"{last[:220]} {where[-90:]}", seconds)
    if result.skipped:
        return Outcome("aws-tests", case, False, f"skipped: {result.skipped[0][1]}", seconds)
    return Outcome("aws-tests", case, True, "", seconds)


# -- kernels with a reference written here -------------------------------------------------------------------
@dataclass
class KernelCase:
    file: str  # relative to the checkout
    kernel: str  # function name in the file
    inputs: Callable[[np.random.Generator], tuple]  # positional arguments
    reference: Callable[..., Any] | None  # numpy: the expected outputs from the same arguments; None: must fail
    rtol: float = 1e-4
    atol: float = 1e-4
    driver: bool = False  # a plain host function that launches jitted kernels itself (call it as is)
    note: str = ""


def _f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _avgpool(x: np.ndarray, pool: int) -> np.ndarray:
    c, h, w = x.shape
    return x.reshape(c, h // pool, pool, w // pool, pool).mean(axis=(2, 4)).astype(x.dtype)


def _maxpool(x: np.ndarray, pool: int) -> np.ndarray:
    c, h, w = x.shape
    return x.reshape(c, h // pool, pool, w // pool, pool).max(axis=(2, 4))


def _upsample2x(x: np.ndarray, axis: int) -> np.ndarray:
    """Linear 2x upsampling along one axis, align_corners=False (torch's interpolate)."""
    n = x.shape[axis]
    src = np.maximum((np.arange(2 * n) + 0.5) / 2 - 0.5, 0.0)
    lo = np.floor(src).astype(int)
    hi = np.minimum(lo + 1, n - 1)
    w = (src - lo).reshape([-1 if a == axis else 1 for a in range(x.ndim)])
    return np.take(x, lo, axis=axis) * (1 - w) + np.take(x, hi, axis=axis) * w


def _bilinear(x: np.ndarray) -> np.ndarray:
    return _upsample2x(_upsample2x(x.astype(np.float64), 2), 3).astype(np.float32)


def _trilinear(x: np.ndarray) -> np.ndarray:
    y = x.astype(np.float64)
    for axis in (2, 3, 4):
        y = _upsample2x(y, axis)
    return y.astype(np.float32)


def _mamba_inputs(r: np.random.Generator) -> tuple:
    # seq_len a multiple of 512 and channels of 128: mamba_v3's tiling asserts both.
    return (np.abs(_f32(r, 1, 128, 512)) * 0.1, _f32(r, 1, 128, 512), -np.abs(_f32(r, 128, 16)),
            _f32(r, 1, 16, 512), _f32(r, 1, 16, 512))


def _mamba(delta, u, a, b, c):
    delta64, u64, a64, b64, c64 = (np.asarray(t, np.float64) for t in (delta, u, a, b, c))
    d_a = np.exp(delta64[:, :, None, :] * a64[None, :, :, None])
    d_bu = delta64[:, :, None, :] * b64[:, None, :, :] * u64[:, :, None, :]
    state = np.zeros(d_a.shape[:-1])
    out = np.empty_like(d_a)
    for t in range(d_a.shape[-1]):
        state = d_a[..., t] * state + d_bu[..., t]
        out[..., t] = state
    return (c64[:, None, :, :] * out).sum(axis=2).astype(np.float32)


def _attention(q, k, v):
    qk = q.astype(np.float64).T @ k.astype(np.float64)
    e = np.exp(qk - qk.max(axis=1, keepdims=True))
    return ((e / e.sum(axis=1, keepdims=True)) @ v.astype(np.float64).T).astype(np.float32)


def _transpose2d(a, shape2d):
    x, y = shape2d
    return np.transpose(a.reshape(a.shape[0], x, y), (0, 2, 1)).reshape(a.shape[0], x * y)


def _uniform(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return ((rng.random(shape) - 0.5) * 2).astype(np.float32)


def _matmul_t(lhs_t, rhs):
    return (lhs_t.astype(np.float64).T @ rhs.astype(np.float64)).astype(np.float32)


_MM = "matrix_multiplication/matrix_multiplication_nki_kernels.py"
EXAMPLE_CASES = [
    KernelCase("nki/examples/getting_started_baremetal.py", "nki_tensor_add_kernel",
               lambda r: (_f32(r, 4, 3), _f32(r, 4, 3)), lambda a, b: a + b),
    KernelCase("nki/examples/getting_started_jax.py", "nki_tensor_add_kernel",
               lambda r: (_f32(r, 4, 3), _f32(r, 4, 3)), lambda a, b: a + b),
    KernelCase("nki/examples/getting_started_torch.py", "nki_tensor_add_kernel",
               lambda r: (_f32(r, 4, 3), _f32(r, 4, 3)), lambda a, b: a + b),
    KernelCase("nki/examples/simulate/nki_simulate_example.py", "add_kernel",
               lambda r: (_f32(r, 128, 512), _f32(r, 128, 512)), lambda a, b: a + b),
    KernelCase("nki/examples/tensor_addition/tensor_addition_nki_kernels.py", "nki_tensor_add",
               lambda r: (_f32(r, 256, 1024), _f32(r, 256, 1024)), lambda a, b: a + b, driver=True),
    KernelCase("nki/examples/layout-pass.py", "tensor_exp_kernel_", lambda r: (_f32(r, 128, 512),), np.exp),
    KernelCase("nki/examples/layout-loop.py", "tensor_exp_kernel_", lambda r: (_f32(r, 256, 512),), np.exp),
    # The guide's counter-example: 256 partitions in one tile must be refused.
    KernelCase("nki/examples/layout-violation.py", "tensor_exp_kernel_", lambda r: (_f32(r, 256, 512),), None),
    KernelCase("nki/examples/index-case-1.py", "tensor_split_kernel_", lambda r: (_f32(r, 4, 5),),
               lambda a: (a[:, 0::2], a[:, 1::2])),
    KernelCase("nki/examples/index-case-3.py", "tensor_maxpool_kernel_", lambda r: (_f32(r, 2, 8, 16), 2),
               _maxpool),
    KernelCase("nki/examples/transpose2d/transpose2d_nki_kernels.py", "tensor_transpose2D_kernel_",
               lambda r: (np.arange(60, dtype=np.int8).reshape(5, 12), (3, 4)), _transpose2d),
    KernelCase("nki/examples/average_pool2d/average_pool2d_nki_kernels.py", "tensor_avgpool_kernel",
               lambda r: (np.arange(72, dtype=np.float16).reshape(2, 6, 6), 2), _avgpool, 1e-3, 1e-3),
    *(KernelCase("nki/examples/fused_mamba/mamba_nki_kernels.py", f"mamba_v{v}",
                 _mamba_inputs, _mamba, 1e-3, 1e-3) for v in (1, 2, 3)),
    KernelCase(f"nki/examples/{_MM}", "nki_matmul_basic_", lambda r: (_f32(r, 128, 64), _f32(r, 128, 512)),
               _matmul_t, 1e-3, 1e-3),
    KernelCase(f"nki/examples/{_MM}", "nki_matmul_tiled_", lambda r: (_f32(r, 256, 256), _f32(r, 256, 1024)),
               _matmul_t, 1e-3, 1e-3),
    KernelCase(f"nki/examples/{_MM}", "nki_matmul_hoist_load_", lambda r: (_f32(r, 256, 256),
               _f32(r, 256, 1024)), _matmul_t, 1e-3, 1e-3),
    KernelCase(f"nki/examples/{_MM}", "nki_matmul_block_free_dimension_", lambda r: (_f32(r, 256, 512),
               _f32(r, 256, 2048)), _matmul_t, 1e-3, 1e-3),
    KernelCase(f"nki/examples/{_MM}", "nki_matmul_fully_optimized_", lambda r: (_f32(r, 1024, 2048),
               _f32(r, 1024, 1024)), _matmul_t, 1e-3, 1e-3),
]

_TUT = "src/nki_samples/tutorials"
_ATT = f"{_TUT}/attention_fwd_performance/attention_kernels.py"
SAMPLE_CASES = [
    *(KernelCase(_ATT, f"attn_fwd_v{v}", (lambda n: lambda r: (_uniform(r, 128, n), _uniform(r, 128, n),
                                                                _uniform(r, 128, n)))(128 if v in ("1", "2")
                                                                                     else 2048),
                 _attention, 1e-2, 1e-2)  # the tutorials compute the softmax partly in bfloat16
      for v in ("1", "2", "3", "4", "5", "6", "7", "8", "8a", "9", "10", "11")),
    KernelCase(f"{_TUT}/average_pool2d/average_pool2d_nki_kernels.py", "tensor_avgpool_kernel",
               lambda r: (np.arange(72, dtype=np.float16).reshape(2, 6, 6), 2), _avgpool, 1e-3, 1e-3),
    *(KernelCase(f"{_TUT}/fused_mamba/mamba_nki_kernels.py", f"mamba_v{v}",
                 _mamba_inputs, _mamba, 1e-3, 1e-3) for v in (1, 2, 3)),
    KernelCase(f"{_TUT}/{_MM}", "nki_matmul_basic_", lambda r: (_f32(r, 128, 64), _f32(r, 128, 512)),
               _matmul_t, 1e-3, 1e-3),
    KernelCase(f"{_TUT}/{_MM}", "nki_matmul_tiled_", lambda r: (_f32(r, 256, 256), _f32(r, 256, 1024)),
               _matmul_t, 1e-3, 1e-3),
    KernelCase(f"{_TUT}/{_MM}", "nki_matmul_hoist_load_", lambda r: (_f32(r, 256, 256), _f32(r, 256, 1024)),
               _matmul_t, 1e-3, 1e-3),
    KernelCase(f"{_TUT}/{_MM}", "nki_matmul_block_free_dimension_", lambda r: (_f32(r, 256, 512),
               _f32(r, 256, 2048)), _matmul_t, 1e-3, 1e-3),
    KernelCase(f"{_TUT}/{_MM}", "nki_matmul_fully_optimized_", lambda r: (_f32(r, 1024, 2048),
               _f32(r, 1024, 1024)), _matmul_t, 1e-3, 1e-3),
    KernelCase(f"{_TUT}/tensor_addition/tensor_addition_nki_kernels.py", "nki_tensor_add",
               lambda r: (_f32(r, 256, 1024), _f32(r, 256, 1024)), lambda a, b: a + b, driver=True),
    KernelCase(f"{_TUT}/tensor_addition/spmd_tensor_addition_nki_kernels.py", "nki_tensor_add",
               lambda r: (_f32(r, 256, 1024), _f32(r, 256, 1024)), lambda a, b: a + b, driver=True),
    KernelCase(f"{_TUT}/tensor_addition/spmd_multiple_nc_tensor_addition_nki_kernels.py", "nki_tensor_add_nc2",
               lambda r: (_f32(r, 512, 1024), _f32(r, 512, 1024)), lambda a, b: a + b, driver=True),
    KernelCase(f"{_TUT}/transpose2d/transpose2d_nki_kernels.py", "tensor_transpose2D_kernel_",
               lambda r: (np.arange(60, dtype=np.int8).reshape(5, 12), (3, 4)), _transpose2d),
    KernelCase("contributed/matmul.py", "matmul", lambda r: (_f32(r, 1024, 1024), _f32(r, 1024, 2048)),
               lambda a, b: (a.astype(np.float64).T @ b).astype(np.float32), 1e-3, 1e-3),
    KernelCase("contributed/maxpooling.py", "max_pooling_2d_stride_1", lambda r: (_f32(r, 130, 66), 3),
               lambda x, p: np.lib.stride_tricks.sliding_window_view(x, (p, p)).max(axis=(2, 3))),
    KernelCase("contributed/interpolate_bilinear_fwd.py", "interpolate_bilinear_2x_fwd",
               lambda r: (_f32(r, 1, 128, 10, 10),), _bilinear, 1e-4, 1e-4),
    KernelCase("contributed/interpolate_trilinear_fwd.py", "interpolate_trilinear_2x_fwd",
               lambda r: (_f32(r, 1, 128, 4, 10, 10),), _trilinear, 1e-4, 1e-4),
]


def _compare(got: Any, want: Any, rtol: float, atol: float) -> str:
    got_list = list(got) if isinstance(got, (tuple, list)) else [got]
    want_list = list(want) if isinstance(want, (tuple, list)) else [want]
    if len(got_list) != len(want_list):
        return f"{len(got_list)} outputs, expected {len(want_list)}"
    for k, (g, w) in enumerate(zip(got_list, want_list, strict=True)):
        g, w = np.asarray(g, dtype=np.float64), np.asarray(w, dtype=np.float64)
        if g.shape != w.shape:
            return f"output {k}: shape {g.shape}, expected {w.shape}"
        if not np.allclose(g, w, rtol=rtol, atol=atol, equal_nan=False):
            bad = ~np.isclose(g, w, rtol=rtol, atol=atol)
            return f"output {k}: {int(bad.sum())} of {g.size} values differ (max abs error {np.nanmax(np.abs(g - w)):.3g})"
    return ""


def run_kernel_cases(root: Path, cases: list[KernelCase], source: str, only: str) -> list[Outcome]:
    outcomes = []
    loaded: dict[str, tuple[dict[str, Any], list[str]]] = {}
    for case in cases:
        label = f"{case.file}::{case.kernel}"
        if only and only not in label:
            continue
        path = root / case.file
        if not path.exists():
            outcomes.append(Outcome(source, label, False, "file not in this checkout"))
            continue
        if case.file not in loaded:
            loaded[case.file] = load_file(path)
        ns, errors = loaded[case.file]
        kernel = ns.get(case.kernel)
        if kernel is None:
            outcomes.append(Outcome(source, label, False, f"kernel not defined: {'; '.join(errors)[:220]}"))
            continue
        args = case.inputs(np.random.default_rng(0))
        start = time.perf_counter()
        try:
            with _deadline(CASE_SECONDS), contextlib.redirect_stdout(io.StringIO()):
                got = kernel(*args) if case.driver or isinstance(kernel, JitKernel) \
                    else simulate_kernel(kernel, *args)
        except BaseException as err:  # noqa: BLE001 - any failure of someone else's kernel is a finding
            if isinstance(err, KeyboardInterrupt):
                raise
            seconds = time.perf_counter() - start
            if case.reference is None and not case.note:
                outcomes.append(Outcome(source, label, True, f"refused as expected: {_reason(err)}", seconds))
            else:
                outcomes.append(Outcome(source, label, False, _reason(err), seconds))
            continue
        seconds = time.perf_counter() - start
        if case.reference is None:
            outcomes.append(Outcome(source, label, False, case.note or "ran, but the kernel must be refused",
                                    seconds))
            continue
        problem = _compare(got, case.reference(*args), case.rtol, case.atol)
        outcomes.append(Outcome(source, label, not problem, problem, seconds))
    return outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sdk", type=Path, help="an aws-neuron-sdk checkout (uses nki/test and nki/examples)")
    parser.add_argument("--samples", type=Path, help="an nki-samples checkout")
    parser.add_argument("--only", default="", help="run only the cases whose name contains this text")
    parser.add_argument("-v", "--verbose", action="store_true", help="also list the cases that pass")
    args = parser.parse_args(argv)
    if not args.sdk and not args.samples:
        parser.error("give --sdk and/or --samples")
    namespaces.install()
    os.environ.setdefault("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2")
    outcomes: list[Outcome] = []
    if args.sdk:
        outcomes += run_aws_tests(args.sdk, args.only)
        outcomes += run_kernel_cases(args.sdk, EXAMPLE_CASES, "sdk-examples", args.only)
    if args.samples:
        outcomes += run_kernel_cases(args.samples, SAMPLE_CASES, "nki-samples", args.only)
    for o in outcomes:
        if not o.ok or args.verbose:
            print(f"{'PASS' if o.ok else 'FAIL'} {o.source} {o.case} ({o.seconds:.1f} s){': ' + o.reason if o.reason else ''}")
    print()
    for source in ("aws-tests", "sdk-examples", "nki-samples"):
        mine = [o for o in outcomes if o.source == source]
        if mine:
            ok = sum(o.ok for o in mine)
            print(f"{source:13s} {ok:3d} / {len(mine):3d} correct ({100 * ok / len(mine):.0f}%)")
    total = len(outcomes)
    print(f"{'all':13s} {sum(o.ok for o in outcomes):3d} / {total:3d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
