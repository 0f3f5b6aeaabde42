"""The verifier applies the simulator's rules on the order of accesses to the recorded program (issue 18's limits).

Two claims a recorded program used to carry unchecked: the kind of each loop (an `affine_range` lets the
performance model overlap iterations) and that it reads only memory it wrote. Each attack below makes the
simulator in its own process skip a rule (guards off, as an attacker past the static check and the audit hook
would), which used to give a `correct` result with the forged program's price; the verifier now re-applies the
rule on the program (engine/platforms/nki/simulator/verification/replay_checks.py) and the result is `incorrect`, naming the loop or the
tensor and the line. The honest versions stay correct.
"""

from __future__ import annotations

import dataclasses
import textwrap

import numpy as np
import pytest

from engine.evaluator import ErrorKind, evaluate
from engine.platforms.nki.simulator import simulate
from engine.platforms.nki.simulator.semantics import language as nl
from engine.platforms.nki.simulator.trace import LoopInfo, LoopKind
from engine.platforms.nki.simulator.verification.program import ReplayError
from engine.platforms.nki.simulator.verification.replay import replay
from tests.evaluation.conftest import ADD_REFERENCE, FAST_LIMITS, needs_simulator
from tests.nki.conftest import with_instruction

pytestmark = needs_simulator

NO_GUARDS = {"static": False, "imports": False, "audit": False}
SEEDS = (11, 12, 13)
IMPORTS = '''
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
'''


def run(kernel: str, guards: dict | None = None):
    return evaluate(textwrap.dedent(kernel), ADD_REFERENCE, backend="simulator", limits=FAST_LIMITS, seeds=SEEDS,
                    _guards=guards)


# -- loop kinds --------------------------------------------------------------------------------------------
SEQUENTIAL_BODY = '''
@nki.jit
def kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)
    acc[...] = nl.load(a)
    for i in nl.sequential_range(2):  # line 23 as evaluated: every iteration rewrites all of acc
        acc[...] = nl.add(acc, nl.multiply(nl.load(b), 0.5))
    nl.store(out, value=acc)
    return out
'''
# The simulator keeps its own loop table (so its race rule sees a sequential loop) while the trace, which
# the performance model prices, says affine_range.
LABELS_ITS_SEQUENTIAL_LOOP_AFFINE = IMPORTS + '''
import engine.platforms.nki.simulator.trace as trace_module

honest_add_loop = trace_module.Trace.add_loop


def affine_add_loop(self, info):
    return honest_add_loop(self, trace_module.LoopInfo(kind=trace_module.LoopKind.AFFINE,
                                                       trip_count=info.trip_count, line=info.line))


trace_module.Trace.add_loop = affine_add_loop
''' + SEQUENTIAL_BODY


def test_a_sequential_loop_labelled_affine_in_the_trace_is_incorrect_naming_the_loop_and_its_line() -> None:
    honest = run(IMPORTS + SEQUENTIAL_BODY)
    assert honest.correct and honest.error_kind is None, honest.error_message
    forged = run(LABELS_ITS_SEQUENTIAL_LOOP_AFFINE, NO_GUARDS)
    assert forged.error_kind is ErrorKind.INCORRECT and not forged.correct
    assert "failed verification" in forged.error_message
    assert "iterations 0 and 1 of the affine_range loop at line 23 both write tensor" in forged.error_message
    assert forged.error_line == 24, forged.error_message
    assert forged.latency_ms is None


def _carried(x, y):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
    acc[...] = nl.load(x)
    for _ in nl.sequential_range(4):
        acc[...] = nl.add(acc, nl.exp(nl.load(y)))
    nl.store(out, value=acc)
    return out


def _relabelled(trace, kind: LoopKind):
    return dataclasses.replace(trace, loops=[LoopInfo(kind=kind, trip_count=loop.trip_count, line=loop.line)
                                             for loop in trace.loops], frozen=True)


def test_the_affine_label_is_what_the_forgery_buys_and_the_replay_refuses_it() -> None:
    from engine.platforms.nki.perf import estimate

    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((128, 512), dtype=np.float32) for _ in range(2)]
    sim = simulate(_carried, inputs, record_program=True)
    forged = _relabelled(sim.trace, LoopKind.AFFINE)
    assert estimate(forged, "trn1").latency_ms < estimate(sim.trace, "trn1").latency_ms  # the motive
    replay(sim.program, inputs, trace=sim.trace)  # the honest trace passes
    with pytest.raises(ReplayError, match=r"iterations 0 and 1 of the affine_range loop at line \d+ both write"):
        replay(sim.program, inputs, trace=forged)


def _reduced(x, y):
    out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(2):
        acc += nl.load(y[i * 128:(i + 1) * 128, :])  # an accumulation: iterations may overlap
    nl.store(out, value=nl.add(acc, nl.load(x)))
    return out


def test_accumulating_affine_loops_still_verify() -> None:
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((128, 512), dtype=np.float32), rng.standard_normal((256, 512), dtype=np.float32)]
    sim = simulate(_reduced, inputs, record_program=True)
    assert any(loop.kind == LoopKind.AFFINE for loop in sim.trace.loops)
    replay(sim.program, inputs, trace=sim.trace)


# -- never-written memory ----------------------------------------------------------------------------------
SKIPS_ITS_MEMSET = IMPORTS + '''
import engine.platforms.nki.simulator.semantics.runtime as runtime

runtime.Simulator._uninitialised = lambda self, acc, op: None  # the simulator no longer refuses the read


@nki.jit
def kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)  # never set: a memset saved
    acc[...] = nl.add(acc, nl.load(a))  # line 15: reads acc, which holds zeros only by accident
    acc[...] = nl.add(acc, nl.load(b))
    nl.store(out, value=acc)
    return out
'''


def test_a_program_reading_memory_it_never_wrote_is_incorrect_naming_the_tensor_and_the_line() -> None:
    honest = run(SKIPS_ITS_MEMSET.replace("nl.ndarray((128, 512), dtype=a.dtype, buffer=nl.sbuf)",
                                          "nl.zeros((128, 512), dtype=a.dtype, buffer=nl.sbuf)"), NO_GUARDS)
    assert honest.correct and honest.error_kind is None, honest.error_message
    forged = run(SKIPS_ITS_MEMSET, NO_GUARDS)
    assert forged.error_kind is ErrorKind.INCORRECT and not forged.correct
    assert "reads memory of" in forged.error_message and "that nothing wrote before it" in forged.error_message
    assert forged.error_line == 17, forged.error_message  # nki-sim 1.6: where the unwritten values reach a write
    assert forged.latency_ms is None


def test_the_simulator_itself_refuses_that_read() -> None:
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        acc = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.sbuf)
        nl.store(out, value=nl.add(acc, nl.load(x)))
        return out

    from engine.platforms.nki.simulator.errors import NKIError

    with pytest.raises(NKIError, match="uninitialised"):
        simulate(kernel, [np.ones((128, 512), np.float32)])


def _recorded_carried():
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((128, 512), dtype=np.float32) for _ in range(2)]
    return simulate(_carried, inputs, record_program=True), inputs


def test_the_reduction_flag_cannot_excuse_a_plain_overwrite() -> None:
    sim, inputs = _recorded_carried()
    program = sim.program
    k = next(k for k, ins in enumerate(program.instructions) if ins[0] == "binary")  # acc = acc + exp(y)
    (mode, slot, dst, accumulate, _combines), = program.instructions[k][3]
    forged = with_instruction(program, k, stores=((mode, slot, dst, accumulate, True),))
    with pytest.raises(ReplayError, match="first contribution into a region that already holds values"):
        replay(forged, inputs, trace=_relabelled(sim.trace, LoopKind.AFFINE))


def test_an_instruction_cannot_price_a_smaller_region_than_it_reads() -> None:
    from engine.platforms.nki.hardware import TRN1
    from engine.platforms.nki.perf import estimate

    sim, inputs = _recorded_carried()
    program, trace = sim.program, sim.trace
    k = next(k for k, ins in enumerate(program.instructions)
             if ins[4] >= 0 and trace.op_names[int(trace.columns["opcode"][ins[4]])] == "load")
    row = program.instructions[k][4]
    (is_write, (tag, bid, offset, _shape, strides)), *rest = program.trace_operands[k]
    small = (is_write, (tag, bid, offset, (1, 512), strides))  # prices one row of the 128 it loads
    costed = list(program.trace_operands)
    costed[k] = (small, *rest)
    forged_program = dataclasses.replace(program, trace_operands=costed)
    columns = dict(trace.columns)
    columns["hbm_read"] = np.array(columns["hbm_read"], copy=True)
    columns["hbm_read"][row] = 512 * 4
    access = dict(trace.access)  # and the row's box is the small region's (boxes must equal footprints)
    access["byte_hi"] = np.array(access["byte_hi"], copy=True)
    access["byte_hi"][int(trace.columns["access_start"][row])] = 512 * 4
    forged_trace = dataclasses.replace(trace, columns=columns, access=access, frozen=True)
    # The motive, under perf-7's DMA costs (with perf-8's packet floor a 16-byte-per-partition read still pays
    # for its 128 packets, so the forgery stops paying; the rule below must hold either way).
    perf7_dma = dataclasses.replace(TRN1, dma_packet_s=0.0, dma_queue_issue_s=0.0, affine_load_queues=False)
    assert estimate(forged_trace, perf7_dma).latency_ms < estimate(trace, perf7_dma).latency_ms
    with pytest.raises(ReplayError, match="reads a region its row does not list"):
        replay(forged_program, inputs, trace=forged_trace)


# -- reshaped views of one HBM tensor ----------------------------------------------------------------------
def _round_trip(through_another_view: bool):
    def kernel(x):
        out = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
        scratch = nl.ndarray((128, 512), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(scratch, value=nl.exp(nl.load(x)))
        back = scratch.reshape((128, 512)) if through_another_view else scratch
        nl.store(out, value=nl.add(nl.load(back), 1.0))
        return out

    return kernel


def test_reading_back_hbm_through_another_view_is_refused_because_the_model_would_not_order_it() -> None:
    from engine.platforms.nki.perf import estimate

    x = np.random.default_rng(2).standard_normal((128, 512), dtype=np.float32)
    same = simulate(_round_trip(False), [x], record_program=True)
    view = simulate(_round_trip(True), [x], record_program=True)
    np.testing.assert_array_equal(view.outputs[0], same.outputs[0])  # the simulator computes the same
    # The motive: the load through the other view does not wait for the store.
    assert estimate(view.trace, "trn1").latency_ms < 0.8 * estimate(same.trace, "trn1").latency_ms
    replay(same.program, [x], trace=same.trace)
    with pytest.raises(ReplayError, match=r"reads HBM tensor '\w+' through a view \[128, 512\] other than the one "
                                          r"that wrote those bytes .* \(kernel line \d+\)"):
        replay(view.program, [x], trace=view.trace)


def test_keep_written_is_no_free_memset() -> None:
    """nc_matmul's keep_written (unwritten PSUM elements start at zero) has no cost row: a forged one that zeroes
    an SBUF tile instead of starting a matmul is refused."""
    sim, inputs = _recorded_carried()
    program = sim.program
    k = next(k for k, ins in enumerate(program.instructions) if ins[0] == "binary")
    dst = program.instructions[k][3][0][2]  # the SBUF tile the loop accumulates into
    mask = np.zeros(dst[3], dtype=np.bool_)
    memset = ("keep_written", (), (dst, ("c", len(program.constants))), (("write", 0, dst, None, True),), -1, 7)
    forged = dataclasses.replace(program, instructions=[memset, *program.instructions],
                                 trace_operands=[(), *program.trace_operands], constants=[*program.constants, mask])
    with pytest.raises(ReplayError, match="not the start of a matmul into a PSUM tile"):
        replay(forged, inputs, trace=sim.trace)
