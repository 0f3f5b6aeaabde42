"""The full case of every built-in problem presents exactly NKIBench's kernel interface.

A public NKIBench kernel (AccelOpt's NKIBench/kernels/) must run unmodified on our full case, so what our
reference hands the kernel (transform_to_nki_inputs: the inputs' order, shapes, dtypes and scalars) and how it
reads the kernel's outputs back (transform_nki_outputs) are pinned here against tables recorded from
AccelOpt's NKIBench/reference/<file>.py and NKIBench/kernels/<file>.py (file named per problem), without
needing that checkout. The mini case must present the same layout family at its own shape: LAYOUTS writes each
layout over the shape parameters, checked against NKIBench at the full shape and against every case.

Shapes only: get_inputs() runs on a numpy whose random draws carry a shape and a dtype but no elements, and
the transforms get zero-stride arrays, so no full-size array is ever allocated.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from engine.platforms.nki.suites import load_suite
from engine.platforms.nki.suites.specs import evaluate_count

from .conftest import exec_reference, seeded_inputs

EPS = 1e-5  # add_rmsnorm_matmul's and matmul_add_rmsnorm's scalar input, passed to the kernel as a float


@dataclass(frozen=True)
class Published:
    """One problem as AccelOpt's NKIBench publishes it (full shape)."""

    reference: str  # NKIBench/reference/<file>: get_inputs, transform_to_nki_inputs, transform_nki_outputs
    kernel: str  # NKIBench/kernels/<file>: the output shape the kernel declares and returns
    values: dict[str, int]  # summary.json's case values
    inputs: list[Any]  # get_inputs(): shapes (float32) or scalar values, in order
    nki_inputs: list[Any]  # transform_to_nki_inputs(get_inputs())
    kernel_output: tuple[int, ...]
    output: tuple[int, ...]  # forward()'s output shape


NKIBENCH: dict[str, Published] = {
    "silu": Published(
        "silu_M4096_N7168_numpy_0.py", "silu_M4096_N7168_0.py", {"M": 4096, "N": 7168},
        [(4096, 7168)], [(128, 32, 7168)], (128, 32, 7168), (4096, 7168)),
    "adamw": Published(
        "adamw_M10944_N2048_numpy_1.py", "adamw_M10944_N2048_0.py", {"M": 10944, "N": 2048},
        [(10944, 2048)] * 4, [(10944, 2048)] * 4, (10944, 2048), (10944, 2048)),
    "rope_single_freq_apply": Published(
        "rope_single_freq_apply_B1_H64_N4096_D128_numpy_1.py", "rope_single_freq_apply_B1_H64_N4096_D128_0.py",
        {"B": 1, "H": 64, "N": 4096, "D": 128},
        [(128, 262144), (64, 262144), (64, 262144)], [(128, 262144), (64, 262144), (64, 262144)],
        (128, 262144), (128, 262144)),
    "mamba": Published(
        "mamba_M7168_C256_S16_numpy_1.py", "mamba_M7168_C256_S16_0.py", {"M": 7168, "C": 256, "S": 16},
        [(256, 7168), (256, 7168), (256, 16), (16, 7168), (16, 7168)],
        [(256, 7168), (256, 7168), (256, 16), (16, 7168), (16, 7168)], (256, 7168), (256, 7168)),
    "matmul": Published(
        "matmul_M4096_N12288_K5120_numpy_2.py", "matmul_M4096_N12288_K5120_0.py", {"M": 4096, "N": 12288, "K": 5120},
        [(4096, 5120), (5120, 12288)], [(32, 128, 40, 128), (40, 128, 12288)], (32, 128, 12288), (4096, 12288)),
    "transpose_matmul": Published(
        "transpose_matmul_M4096_K2048_N10944_numpy_1.py", "transpose_matmul_M4096_K2048_N10944_0.py",
        {"M": 4096, "K": 2048, "N": 10944},
        [(2048, 4096), (2048, 10944)], [(128, 16, 4096), (128, 16, 10944)], (32, 128, 10944), (4096, 10944)),
    "bmm": Published(
        "bmm_B16_M4096_K64_N4096_numpy_1.py", "bmm_B16_M4096_K64_N4096_0.py", {"B": 16, "M": 4096, "K": 64, "N": 4096},
        [(16, 4096, 64), (16, 64, 4096)], [(16, 4096, 64), (16, 64, 4096)], (16, 32, 128, 4096), (16, 4096, 4096)),
    "bmm_softmax": Published(
        "bmm_softmax_B16_K64_M4096_N4096_numpy_1.py", "bmm_softmax_B16_K64_M4096_N4096_0.py",
        {"B": 16, "K": 64, "M": 4096, "N": 4096},
        [(16, 4096, 64), (16, 64, 4096)], [(16, 4096, 64), (16, 64, 4096)], (16, 32, 128, 4096), (16, 4096, 4096)),
    "lora": Published(
        "lora_M4096_N12288_K5120_R128_numpy_1.py", "lora_M4096_N12288_K5120_R128_0.py",
        {"M": 4096, "N": 12288, "K": 5120, "R": 128},
        [(4096, 5120), (5120, 12288), (5120, 128), (128, 12288)],
        [(8, 4, 128, 40, 128), (40, 128, 12288), (40, 128, 128), (128, 12288)],
        (8, 4, 128, 96, 128), (4096, 12288)),
    "rmsnorm_matmul": Published(
        "rmsnorm_matmul_M4096_N2048_K1024_numpy_1.py", "rmsnorm_matmul_M4096_N2048_K1024_0.py",
        {"M": 4096, "N": 2048, "K": 1024},
        [(4096, 1024), (1024, 2048)], [(32, 128, 1024), (8, 128, 2048)], (32, 128, 2048), (4096, 2048)),
    "add_rmsnorm_matmul": Published(
        "add_rmsnorm_matmul_M4096_N2048_K1024_numpy_1.py", "add_rmsnorm_matmul_M4096_N2048_K1024_0.py",
        {"M": 4096, "N": 2048, "K": 1024},
        [(4096, 1024), (1024, 2048), EPS, (4096, 1024), (1024,)],
        [(4096, 1024), (1024, 2048), EPS, (4096, 1024), (1024,)], (4096, 2048), (4096, 2048)),
    "matmul_add_rmsnorm": Published(
        "matmul_add_rmsnorm_M4096_N2048_K2048_numpy_1.py", "matmul_add_rmsnorm_M4096_N2048_K2048_0.py",
        {"M": 4096, "N": 2048, "K": 2048},
        [(4096, 2048), (2048, 2048), EPS, (4096, 2048), (2048,)],
        [(4096, 2048), (2048, 2048), EPS, (4096, 2048), (2048,)], (4096, 2048), (4096, 2048)),
    "swiglu": Published(
        "swiglu_M4096_N3072_K1024_numpy_2.py", "swiglu_M4096_N3072_K1024_0.py", {"M": 4096, "N": 3072, "K": 1024},
        [(4096, 1024), (1024, 3072), (3072, 1024), (1024, 3072)],
        [(8, 4, 128, 8, 128), (8, 128, 3072), (24, 128, 1024), (8, 128, 3072)], (32, 128, 1024), (4096, 1024)),
    "gqa_full": Published(
        "gqa_full_B1_N4096_QH16_KH8_D128_numpy_2.py", "gqa_full_B1_N4096_QH16_KH8_D128_0.py",
        {"B": 1, "N": 4096, "QH": 16, "KH": 8, "D": 128},
        [(1, 4096, 16, 128), (1, 4096, 8, 128), (1, 4096, 8, 128)],
        [(32, 128, 16, 128), (1, 8, 4, 128, 8, 128), (1, 32, 128, 1024)],
        (1, 8, 2, 32, 128, 128), (1, 16, 4096, 128)),
}

# The layout family over the parameters: what transform_to_nki_inputs gives for any case (a scalar stays one).
LAYOUTS: dict[str, list[Any]] = {
    "silu": [("128", "M // 128", "N")],
    "adamw": [("M", "N")] * 4,
    "rope_single_freq_apply": [("D", "B*H*N"), ("D // 2", "B*H*N"), ("D // 2", "B*H*N")],
    "mamba": [("C", "M"), ("C", "M"), ("C", "S"), ("S", "M"), ("S", "M")],
    "matmul": [("M // 128", "128", "K // 128", "128"), ("K // 128", "128", "N")],
    "transpose_matmul": [("128", "K // 128", "M"), ("128", "K // 128", "N")],
    "bmm": [("B", "M", "K"), ("B", "K", "N")],
    "bmm_softmax": [("B", "M", "K"), ("B", "K", "N")],
    "lora": [("M // 512", "4", "128", "K // 128", "128"), ("K // 128", "128", "N"), ("K // 128", "128", "R"),
             ("R", "N")],
    "rmsnorm_matmul": [("M // 128", "128", "K"), ("K // 128", "128", "N")],
    "add_rmsnorm_matmul": [("M", "K"), ("K", "N"), EPS, ("M", "K"), ("K",)],
    "matmul_add_rmsnorm": [("M", "K"), ("K", "N"), EPS, ("M", "N"), ("N",)],
    "swiglu": [("M // 512", "4", "128", "K // 128", "128"), ("K // 128", "128", "N"), ("N // 128", "128", "K"),
               ("K // 128", "128", "N")],
    "gqa_full": [("B*N // 128", "128", "QH", "D"), ("B", "N // 512", "4", "128", "KH", "D"),
                 ("B", "N // 128", "128", "KH*D")],
}

SUITE = load_suite("nkibench")
SLUGS = [spec.slug for spec in SUITE.problems]
CASES = [(spec.slug, case) for spec in SUITE.problems for case in spec.case_names]


# -- a numpy whose random draws have a shape and a dtype but no elements ---------------------------------


class _Shaped:
    """What a random draw gives under `_ShapeOnlyNumpy`; elementwise ufuncs (np.abs) keep the shape."""

    def __init__(self, shape: Any, dtype: Any = np.float64) -> None:
        self.shape = (int(shape),) if np.isscalar(shape) else tuple(int(n) for n in shape)
        self.dtype = np.dtype(dtype)

    def astype(self, dtype: Any) -> _Shaped:
        return _Shaped(self.shape, dtype)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method != "__call__" or "out" in kwargs:
            return NotImplemented
        shapes = [np.shape(i) if not isinstance(i, _Shaped) else i.shape for i in inputs]
        return _Shaped(np.broadcast_shapes(*shapes), self.dtype)


class _ShapeOnlyRandom:
    def normal(self, loc: Any = 0.0, scale: Any = 1.0, size: Any = None) -> _Shaped:
        return _Shaped(size)

    def uniform(self, low: Any = 0.0, high: Any = 1.0, size: Any = None) -> _Shaped:
        return _Shaped(size)

    def standard_normal(self, size: Any = None) -> _Shaped:
        return _Shaped(size)


class _ShapeOnlyNumpy:
    random = _ShapeOnlyRandom()

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)


def shaped_inputs(module: types.ModuleType) -> list[Any]:
    """get_inputs() as zero-stride arrays of the right shapes and dtypes (scalars as they are)."""
    module.np = _ShapeOnlyNumpy()
    try:
        drawn = list(module.get_inputs())
    finally:
        module.np = np
    return [np.broadcast_to(np.zeros((), x.dtype), x.shape) if isinstance(x, _Shaped) else x for x in drawn]


def interface(arrays: list[Any]) -> list[Any]:
    """Shapes of float32 arrays, other arrays as (shape, dtype), scalars as their value."""
    described: list[Any] = []
    for a in arrays:
        if isinstance(a, np.ndarray):
            described.append(tuple(a.shape) if a.dtype == np.float32 else (tuple(a.shape), a.dtype.name))
        else:
            described.append(a)
    return described


def layout(slug: str, values: dict[str, int]) -> list[Any]:
    return [tuple(evaluate_count(n, values) for n in entry) if isinstance(entry, tuple) else entry
            for entry in LAYOUTS[slug]]


def reference(slug: str, case: str) -> types.ModuleType:
    return exec_reference(SUITE.problem(slug).reference_source(case), f"{slug}_{case}")


# -- the tests ---------------------------------------------------------------------------------------------


def test_every_problem_has_a_published_interface_and_a_layout():
    assert sorted(NKIBENCH) == sorted(SLUGS) == sorted(LAYOUTS)


@pytest.mark.parametrize("slug", SLUGS)
def test_the_full_case_is_nkibenchs_case_and_the_layout_family_gives_nkibenchs_layout(slug):
    published = NKIBENCH[slug]
    assert SUITE.problem(slug).case("full") == published.values
    assert layout(slug, published.values) == published.nki_inputs


@pytest.mark.parametrize("slug", SLUGS)
def test_the_full_case_draws_nkibenchs_inputs_and_hands_the_kernel_nkibenchs_layout(slug):
    module = reference(slug, "full")
    inputs = shaped_inputs(module)
    assert interface(inputs) == NKIBENCH[slug].inputs
    assert interface(list(module.transform_to_nki_inputs(inputs))) == NKIBENCH[slug].nki_inputs


@pytest.mark.parametrize(("slug", "case"), CASES)
def test_every_case_hands_the_kernel_the_same_layout_family(slug, case):
    module = reference(slug, case)
    nki_inputs = list(module.transform_to_nki_inputs(shaped_inputs(module)))
    assert interface(nki_inputs) == layout(slug, SUITE.problem(slug).case(case))


@pytest.mark.parametrize("slug", SLUGS)
def test_the_full_case_reads_a_public_kernels_output_as_nkibench_does(slug):
    published = NKIBENCH[slug]
    module = reference(slug, "full")
    returned = np.broadcast_to(np.zeros((), np.float32), published.kernel_output)
    expected = np.broadcast_to(np.zeros((), np.float32), published.output)
    (compared,) = module.transform_nki_outputs(returned, expected)
    assert compared.shape == published.output


def test_rope_compares_the_output_as_returned_like_nkibench():
    # NKIBench's rope reference returns the kernel's output without a reshape, so a kernel returning the same
    # elements in another shape fails there; ours passes it on unchanged for the shape check to name.
    module = reference("rope_single_freq_apply", "mini")
    expected = np.zeros((128, 512), np.float32)
    (compared,) = module.transform_nki_outputs(np.zeros((64, 1024), np.float32), expected)
    assert compared.shape == (64, 1024)


@pytest.mark.parametrize("slug", SLUGS)
def test_the_mini_inputs_reach_the_kernel_reshaped_in_order(slug):
    # NKIBench's transforms only reshape (no transpose): each nki input holds get_inputs()'s values in order.
    module = reference(slug, "mini")
    inputs = seeded_inputs(module)
    nki_inputs = list(module.transform_to_nki_inputs(inputs))
    assert len(nki_inputs) == len(inputs)
    for given, original in zip(nki_inputs, inputs, strict=True):
        if isinstance(original, np.ndarray):
            assert given.dtype == original.dtype
            assert np.array_equal(np.ravel(given), np.ravel(original))
        else:
            assert given == original


def test_a_case_whose_shape_does_not_divide_the_layout_is_named():
    source = SUITE.problem("swiglu").reference_source("mini").replace("\nM = 512\n", "\nM = 256\n")
    module = exec_reference(source, "swiglu_m256")
    with pytest.raises(ValueError, match="M = 256 must be a multiple of 512"):
        module.transform_to_nki_inputs(shaped_inputs(module))
