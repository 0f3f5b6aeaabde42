"""perf-10 candidate (issue 19): the Vector Engine rate of `tensor_tensor_scan` (helper MAMBA4).

`NeuronCoreSpec.tensor_tensor_scan_cycles_per_elem`: [ISA]'s estimate is 2N, as a tensor_tensor with both inputs in
SBUF (the shipped 2.0, perf-9); trn1's Vector active time in the four Mamba kernels says about 1 (docs/benchmarks.md,
"perf-10 candidates: the scan's Vector rate"). Two kernels that differ only in the scan: the same Vector-bound
chain with the scan or with a tensor_tensor multiply in its place. At 2.0 they take the same time; at 1.0 the scan
kernel is faster by one cycle per element per scan, and nothing else moves."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf import estimate, prepare
from engine.platforms.nki.simulator import jit, simulate
from engine.platforms.nki.simulator.semantics import isa as nisa
from engine.platforms.nki.simulator.semantics import language as nl

ROWS, FREE, STEPS = 128, 4096, 8
ONE = replace(TRN1, tensor_tensor_scan_cycles_per_elem=1.0)


def _kernel(scan: bool):
    @jit
    def chain(a, b):
        """acc += step(a, b) for STEPS steps: step is the scan a[i] * s[i-1] + b[i], or the product a * b."""
        out = nl.ndarray((ROWS, FREE), dtype=np.float32, buffer=nl.shared_hbm)
        at = nl.load(a[0:ROWS, 0:FREE])
        bt = nl.load(b[0:ROWS, 0:FREE])
        acc = nl.zeros((nl.par_dim(ROWS), FREE), dtype=np.float32)
        for _ in nl.affine_range(STEPS):
            if scan:
                y = nisa.tensor_tensor_scan(at, bt, initial=0, op0=np.multiply, op1=np.add)
            else:
                y = nisa.tensor_tensor(at, bt, op=nl.multiply)
            acc[0:ROWS, 0:FREE] += y
        nl.store(out[0:ROWS, 0:FREE], value=acc)
        return out
    return chain


def _latency_ms(scan: bool, spec) -> float:
    rng = np.random.default_rng(0)
    args = [rng.uniform(0.0, 0.5, (ROWS, FREE)).astype(np.float32) for _ in range(2)]
    return estimate(prepare(simulate(_kernel(scan), args).trace), spec, breakdown=False).latency_ms


def test_the_shipped_spec_costs_the_scan_as_the_isa_estimate():
    assert TRN1.tensor_tensor_scan_cycles_per_elem == 2.0
    assert _latency_ms(True, TRN1) == pytest.approx(_latency_ms(False, TRN1), rel=1e-6)


def test_at_one_cycle_per_element_the_scan_kernel_is_faster_by_that_cycle_and_the_product_kernel_unmoved():
    saved_ms = STEPS * FREE * (2.0 - 1.0) / TRN1.engine_clock_hz * 1e3
    scan, product = _latency_ms(True, ONE), _latency_ms(False, ONE)
    assert product == pytest.approx(_latency_ms(False, TRN1), rel=1e-6)
    assert product - scan == pytest.approx(saved_ms, rel=0.1)
