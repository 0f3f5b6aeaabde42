"""One model for every kernel (issue 38): a kernel's prediction does not depend on who measured it.

Up to perf-10 the differential pairs the NKI tutorials measured were predicted with another spec than every other
kernel (a one-bank partition broadcast read from PSUM there, copied to SBUF elsewhere: `pairs.SOURCE_SPECS`). Now
a pair is predicted with the platform's spec whatever its source, and a one-bank broadcast is read from PSUM in
every kernel ([ARCH-V2] "Alternative Use Case", [TILING] psum_bank_fmax)."""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf import lowered, prepare
from engine.platforms.nki.perf.pairs import SIMULATED, Pair, PairTraces, predict_pairs
from engine.platforms.nki.simulator import jit, simulate
from engine.platforms.nki.simulator.semantics import isa as nisa
from engine.platforms.nki.simulator.semantics import language as nl
from engine.platforms.nki.simulator.trace import Engine

ROWS, K = 128, 8
BANK = TRN1.psum_bank_bytes_per_partition // 4  # 512 fp32: one PSUM bank


def _kernel(width: int):
    @jit
    def scale_rows(x, rows):
        """acc += x * row_k (k < K), each row broadcast over the 128 partitions."""
        out = nl.ndarray((ROWS, width), dtype=np.float32, buffer=nl.shared_hbm)
        xt = nl.load(x[0:ROWS, 0:width])
        acc = nl.zeros((nl.par_dim(ROWS), width), dtype=np.float32)
        for k in nl.affine_range(K):
            r = nl.load(rows[k:k + 1, 0:width])
            acc[0:ROWS, 0:width] += nisa.tensor_tensor(xt, r.broadcast_to((ROWS, width)), op=nl.multiply)
        nl.store(out[0:ROWS, 0:width], value=acc)
        return out
    return scale_rows


def _prepared(width: int):
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((ROWS, width)).astype(np.float32), rng.standard_normal((K, width)).astype(np.float32)]
    return prepare(simulate(_kernel(width), args).trace)


def _pair(name: str, source: str) -> Pair:
    return Pair(name=name, slow=None, fast=None, inputs="", shape={}, slow_ms=2.0, fast_ms=1.0, hardware="trn1",
                source=source, status=SIMULATED, notes="")


def test_a_pair_is_predicted_the_same_whoever_measured_it():
    sides = {"slow": _prepared(2 * BANK), "fast": _prepared(BANK)}  # one-bank broadcasts in the fast version
    pairs = [_pair("tutorial", "awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/tutorials/fused_mamba.html"),
             _pair("harness", "AccelOpt harness on trn1")]
    traces = PairTraces([], {}, "trn1", None)
    traces.pairs = pairs
    traces.prepared = {p.name: sides for p in pairs}
    tutorial, harness = predict_pairs(traces, TRN1)
    assert tutorial.predicted == harness.predicted
    assert (tutorial.slow_ms, tutorial.fast_ms) == (harness.slow_ms, harness.fast_ms)


def test_a_one_bank_broadcast_is_read_from_psum_and_a_wider_one_copied_to_sbuf():
    for width, copies in ((BANK, 0), (2 * BANK, 2)):
        prepared = _prepared(width)
        trace = lowered(prepared, TRN1.psum_bank_bytes_per_partition).trace
        engines = np.asarray(trace.columns["engine"])
        added = len(trace) - len(prepared.trace)
        matmuls = int((engines == Engine.TENSOR).sum())
        assert matmuls == K * max(1, copies) and added == matmuls + K * copies


def test_the_spec_has_no_per_source_or_per_kernel_switch():
    names = {f.name for f in fields(TRN1)}
    assert "broadcast_psum_operands" not in names
    import engine.platforms.nki.perf.pairs as pairs
    assert not hasattr(pairs, "SOURCE_SPECS")
