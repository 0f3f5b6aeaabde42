"""perf-6 candidate (issue 19): partition-broadcast operands as the compiler lowers them (engine/platforms/nki/perf/lowering.py).

`x.broadcast_to((P, F))` of a one-partition tile is a Tensor Engine matmul into PSUM ([ARCH-V2]); a PSUM tile holds
at most 512 fp32 per partition ([TILING]). So a broadcast up to 512 wide is read from PSUM (tensor_tensor at 1
cycle per element, not 2), a wider one is evacuated to SBUF by copies on the Scalar Engine and read at the SBUF
rate: the Mamba tutorial's v2 -> v3 step (seq_len tiled by 512) in miniature. Each test: two kernels that differ
only in the effect, in the right order by the margin the constants imply."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf import estimate, lowered, prepare
from engine.platforms.nki.simulator import jit, simulate
from engine.platforms.nki.simulator.semantics import isa as nisa
from engine.platforms.nki.simulator.semantics import language as nl
from engine.platforms.nki.simulator.trace import Engine

ROWS, K = 128, 32  # K one-row operands, each broadcast over the 128 partitions and multiplied into x
LOWERED = replace(TRN1, partition_broadcast_matmul=True)
BANK = TRN1.psum_bank_bytes_per_partition // 4  # 512 fp32: the widest PSUM tile


def _kernel(width: int, piece: int, *, broadcast: bool = True):
    """acc += x * row_k (k < K), the rows broadcast over the partitions (or loaded as full tiles), the
    multiply done `piece` columns at a time."""

    @jit
    def kernel(x, rows, full):
        out = nl.ndarray((ROWS, width), dtype=np.float32, buffer=nl.shared_hbm)
        xt = nl.load(x[0:ROWS, 0:width])
        acc = nl.zeros((nl.par_dim(ROWS), width), dtype=np.float32)
        for k in nl.affine_range(K):
            for j in nl.static_range(width // piece):
                lo = j * piece
                if broadcast:
                    r = nl.load(rows[k:k + 1, lo:lo + piece])
                    operand = r.broadcast_to((ROWS, piece))
                else:
                    operand = nl.load(full[k * ROWS:(k + 1) * ROWS, lo:lo + piece])
                y = nisa.tensor_tensor(xt[0:ROWS, lo:lo + piece], operand, op=nl.multiply)
                acc[0:ROWS, lo:lo + piece] += y
        nl.store(out[0:ROWS, 0:width], value=acc)
        return out

    return kernel


def _inputs(width: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((K, width)).astype(np.float32)
    return [rng.standard_normal((ROWS, width)).astype(np.float32), rows, np.repeat(rows, ROWS, axis=0)]


def _run(width: int, piece: int, **kw):
    trace = simulate(_kernel(width, piece, **kw), _inputs(width)).trace
    return estimate(prepare(trace), LOWERED, breakdown=False), trace


def _cycles(free: int, rate: float) -> float:
    return max(TRN1.min_ii_cycles, rate * free) + TRN1.engine_dispatch_cycles


def test_the_simulators_trace_records_the_broadcast_and_the_model_lowers_it():
    _, trace = _run(BANK, BANK)
    prepared = lowered(prepare(trace), TRN1.psum_bank_bytes_per_partition)
    engines = np.asarray(prepared.trace.columns["engine"])
    # One matmul per broadcast, none in the simulator's own trace (its digests do not move).
    assert int((np.asarray(trace.columns["engine"]) == Engine.TENSOR).sum()) == 0
    assert int((engines == Engine.TENSOR).sum()) == K
    assert len(prepared.trace) == len(trace) + K
    # The broadcast's copy of [ROWS, BANK] (<= one bank) is not needed: the multiply reads PSUM.
    # Ones as the stationary operand: half the fp32 passes, counted as neuron-profile counts the mamba baseline's.
    report = estimate(prepare(trace), LOWERED, breakdown=False)
    assert report.profile["hardware_flops"] == 2 * K * ROWS * BANK
    off = replace(TRN1, partition_broadcast_matmul=False)  # perf-5: the broadcast free, no matmul
    assert estimate(prepare(trace), off, breakdown=False).profile["hardware_flops"] == 0


def test_a_broadcast_one_psum_bank_wide_is_read_from_psum_faster_than_a_full_sbuf_operand():
    """The same multiply with the row broadcast (<= 512 wide: read from PSUM, 1 cycle per element) or loaded as a
    full [128, 512] tile (both operands in SBUF: 2 cycles per element): faster by about (2 - 1) x 512 cycles per
    row on the Vector Engine, which is the bottleneck of both (the full tiles' DMAs overlap it)."""
    psum, _ = _run(BANK, BANK)
    sbuf, _ = _run(BANK, BANK, broadcast=False)
    saved_s = K * (_cycles(BANK, TRN1.tensor_tensor_cycles_per_elem) - _cycles(BANK, 1.0)) / TRN1.engine_clock_hz
    assert sbuf.latency_ms - psum.latency_ms == pytest.approx(saved_s * 1e3, rel=0.1)


def test_a_broadcast_wider_than_a_psum_bank_costs_more_than_the_same_work_tiled_by_512():
    """v2 -> v3 of the fused Mamba tutorial in miniature: a 1024-wide broadcast is evacuated to SBUF (two copies on
    the Scalar Engine per row) and its multiply reads SBUF at 2 cycles per element; tiled by 512, each piece is one
    PSUM bank read at 1 cycle. Vector-bound both, so the tiled kernel is faster by about 1024 - 2 x 32 cycles per
    row (the multiply's saving less the second piece's dispatch on the multiply and the add), and the wide kernel's
    Scalar Engine does the copies the tiled one does not."""
    wide, _ = _run(2 * BANK, 2 * BANK)
    tiled, _ = _run(2 * BANK, BANK)
    per_row = (_cycles(2 * BANK, TRN1.tensor_tensor_cycles_per_elem) + _cycles(2 * BANK, TRN1.tensor_tensor_cycles_per_elem)
               - 2 * (_cycles(BANK, 1.0) + _cycles(BANK, TRN1.tensor_tensor_cycles_per_elem)))
    assert wide.latency_ms - tiled.latency_ms == pytest.approx(K * per_row / TRN1.engine_clock_hz * 1e3, rel=0.1)
    copies_s = K * 2 * _cycles(BANK, 1.0) / TRN1.scalar_clock_hz
    wide_s, tiled_s = (r.profile["scalar_engine_active_time_percent"] * r.latency_ms * 1e-3 for r in (wide, tiled))
    assert wide_s - tiled_s == pytest.approx(copies_s, rel=0.05)
