"""perf-8 candidate (issue 19): a broadcast one PSUM bank wide copied to SBUF, as AccelOpt's trn1 counters say its
compiler does (`NeuronCoreSpec.broadcast_psum_operands`, engine/platforms/nki/perf/lowering.py): copied in the shipped spec
(the compiler that measured the baselines), read from PSUM for the pairs the NKI tutorials measured
(`pairs.SOURCE_SPECS`).

With True (perf-7, the NKI tutorial's profiles) a consumer reads a <= 512-wide broadcast straight from PSUM; with
False the compiler copies it to SBUF on the Scalar Engine as it does a wider one, and the consumer reads both
operands from SBUF. Two runs of one kernel that differ only in the flag, in the right order by the margin the
constants imply."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf import estimate, lowered, prepare
from engine.platforms.nki.perf.pairs import load_pairs, pair_platform
from engine.platforms.nki.simulator import jit, simulate
from engine.platforms.nki.simulator.semantics import isa as nisa
from engine.platforms.nki.simulator.semantics import language as nl
from engine.platforms.nki.simulator.trace import Engine

ROWS, K = 128, 32
BANK = TRN1.psum_bank_bytes_per_partition // 4  # 512 fp32
DIRECT = replace(TRN1, partition_broadcast_matmul=True, broadcast_psum_operands=True)
COPIED = replace(DIRECT, broadcast_psum_operands=False)


@jit
def _kernel(x, rows):
    """acc += x * row_k (k < K), each row broadcast over the 128 partitions: one PSUM bank wide."""
    out = nl.ndarray((ROWS, BANK), dtype=np.float32, buffer=nl.shared_hbm)
    xt = nl.load(x[0:ROWS, 0:BANK])
    acc = nl.zeros((nl.par_dim(ROWS), BANK), dtype=np.float32)
    for k in nl.affine_range(K):
        r = nl.load(rows[k:k + 1, 0:BANK])
        y = nisa.tensor_tensor(xt, r.broadcast_to((ROWS, BANK)), op=nl.multiply)
        acc[0:ROWS, 0:BANK] += y
    nl.store(out[0:ROWS, 0:BANK], value=acc)
    return out


def _trace():
    rng = np.random.default_rng(0)
    return simulate(_kernel, [rng.standard_normal((ROWS, BANK)).astype(np.float32),
                              rng.standard_normal((K, BANK)).astype(np.float32)]).trace


def _cycles(free: int, rate: float) -> float:
    return max(TRN1.min_ii_cycles, rate * free) + TRN1.engine_dispatch_cycles


def test_the_copy_is_one_scalar_engine_instruction_per_broadcast_and_only_when_asked():
    trace = _trace()
    direct = lowered(prepare(trace), TRN1.psum_bank_bytes_per_partition, True).trace
    copied = lowered(prepare(trace), TRN1.psum_bank_bytes_per_partition, False).trace
    assert len(direct) == len(trace) + K  # one matmul per broadcast
    assert len(copied) == len(trace) + 2 * K  # and one PSUM-to-SBUF copy each
    for t in (direct, copied):
        assert int((np.asarray(t.columns["engine"]) == Engine.TENSOR).sum()) == K


def test_copied_broadcasts_make_the_multiply_read_sbuf_and_the_scalar_engine_copy():
    """Vector-bound both: the copied kernel is slower by (2 - 1) x 512 cycles per row (the multiply reads two SBUF
    operands), and its Scalar Engine is busier by one 512-wide copy per row."""
    trace = _trace()
    direct = estimate(prepare(trace), DIRECT, breakdown=False)
    copied = estimate(prepare(trace), COPIED, breakdown=False)
    slower_s = K * (_cycles(BANK, TRN1.tensor_tensor_cycles_per_elem) - _cycles(BANK, 1.0)) / TRN1.engine_clock_hz
    assert copied.latency_ms - direct.latency_ms == pytest.approx(slower_s * 1e3, rel=0.1)
    copies_s = K * _cycles(BANK, 1.0) / TRN1.scalar_clock_hz
    scalar_s = [r.profile["scalar_engine_active_time_percent"] * r.latency_ms * 1e-3 for r in (copied, direct)]
    assert scalar_s[0] - scalar_s[1] == pytest.approx(copies_s, rel=0.05)


def test_the_shipped_spec_copies_one_bank_broadcasts_as_the_baselines_compiler_did():
    assert TRN1.broadcast_psum_operands is False


def test_accelopt_measured_pairs_are_predicted_with_their_compilers_copies_and_the_tutorials_without():
    """The pairs' sources decide: AccelOpt's harness copies one-bank broadcasts, the NKI tutorials read PSUM."""
    by_name = {p.name: p for p in load_pairs()}
    assert pair_platform(by_name["accelopt_mamba"], TRN1) == TRN1
    assert pair_platform(by_name["mamba_tutorial_v2_v3_s1024"], TRN1).broadcast_psum_operands is True
    assert pair_platform(by_name["matmul_tutorial_block_free"], TRN1).broadcast_psum_operands is True
