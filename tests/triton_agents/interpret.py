"""Run our own small Triton test kernels on Triton's CPU interpreter, in the test process.

Only for kernels this test suite wrote (and the catalog's rewrites of them): kernels from users run in the
evaluation sandbox. The interpreter cannot time anything, so an autotuned kernel's configurations are
"timed" as equal and the first is kept; every configuration still has to compile and run correctly.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path

import torch

from tests.triton_agents.kernels import Case


def load(source: str, directory: Path):
    """Import `source` as a module from a file (triton.jit reads the kernel's source through inspect)."""
    name = "triton_case_" + hashlib.sha256(source.encode()).hexdigest()[:16]
    path = directory / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    return module


def check(source: str, case: Case, directory: Path, seed: int = 0) -> str:
    """'' when `run` matches the reference on every workload of `case`, else what went wrong."""
    try:
        module = load(source, directory)
    except Exception as exc:  # a rewrite that does not even import is a failed rewrite
        return f"import failed: {type(exc).__name__}: {exc}"
    for inputs in case.inputs(torch.Generator().manual_seed(seed)):
        expected = case.reference(*inputs)
        try:
            got = module.run(*[t.clone() for t in inputs])
        except Exception as exc:
            return f"run failed on shapes {[tuple(t.shape) for t in inputs]}: {type(exc).__name__}: {exc}"
        if got.shape != expected.shape or not torch.allclose(got, expected, rtol=1e-4, atol=1e-5):
            return f"wrong output on shapes {[tuple(t.shape) for t in inputs]}"
    return ""
