"""The executable record (program.py) and its replay (replay.py): a program recorded on one input set, replayed
on any other, gives bit for bit what a simulation on those inputs gives; a forged program or cost trace is
refused with the rule it breaks (rules.py, trace_check.py). (conftest.py replays every other kernel these
tests simulate, too.)"""

from __future__ import annotations

import dataclasses
import json
import random

import numpy as np
import pytest

from engine.evaluator.inputs import apply_distribution
from engine.platforms.nki.simulator import simulate
from engine.platforms.nki.simulator.semantics import isa as nisa
from engine.platforms.nki.simulator.semantics import language as nl
from engine.platforms.nki.simulator.semantics import namespaces
from engine.platforms.nki.simulator.trace import Trace
from engine.platforms.nki.simulator.verification.program import RecordingError, ReplayError, from_wire, wire
from engine.platforms.nki.simulator.verification.replay import replay
from engine.platforms.nki.suites import load_suite
from tests.nki.conftest import assert_same_arrays, with_instruction
from tests.versions import digests

PROBLEMS = [spec.slug for spec in load_suite("nkibench").problems]


@pytest.fixture(scope="module")
def installed():
    before = "neuronxcc.nki" in __import__("sys").modules
    namespaces.install()
    yield
    if not before:
        namespaces.uninstall()


def mini_case(slug: str):
    spec = next(s for s in load_suite("nkibench").problems if s.slug == slug)
    reference = digests._module(spec.reference_source("mini"), f"replay_reference_{slug}")
    kernel = digests._module(spec.baseline_for("mini"), f"replay_baseline_{slug}").kernel

    def inputs(seed: int, distribution: str = "reference") -> list:
        np.random.seed(seed)
        random.seed(seed)
        raw = apply_distribution(list(reference.get_inputs()), distribution, seed)
        to_nki = getattr(reference, "transform_to_nki_inputs", None)
        return list(to_nki(raw)) if to_nki else raw

    return kernel, inputs


@pytest.mark.parametrize("slug", PROBLEMS)
def test_a_mini_baseline_replays_bit_identically_on_the_recorded_and_on_unseen_inputs(installed, slug):
    kernel, inputs = mini_case(slug)
    recorded = inputs(0)
    sim = simulate(kernel, recorded, record_program=True)
    program = sim.program
    again = replay(program, recorded, trace=sim.trace)  # the cost trace is checked against the program too
    assert_same_arrays(sim.outputs, again.outputs, "output")
    for seed, distribution in ((1, "reference"), (2, "zeros"), (3, "scaled")):
        other = inputs(seed, distribution)
        live = simulate(kernel, other)
        assert_same_arrays(live.outputs, replay(program, other).outputs, f"output ({distribution}, seed {seed})")


def test_a_program_crosses_the_wire_as_json_and_arrays(installed):
    kernel, inputs = mini_case("lora")
    sim = simulate(kernel, inputs(0), record_program=True)
    header, arrays = wire(sim.program)
    received = from_wire(json.loads(json.dumps(header)), {k: np.array(v) for k, v in arrays.items()})
    assert dataclasses.replace(received, constants=[]) == dataclasses.replace(sim.program, constants=[])
    assert all(np.array_equal(a, b) for a, b in zip(received.constants, sim.program.constants, strict=True))
    other = inputs(5)
    assert_same_arrays(simulate(kernel, other).outputs, replay(received, other, trace=sim.trace).outputs, "output")


def test_nothing_is_recorded_unless_asked():
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.exp(nl.load(x)))
        return out

    assert simulate(kernel, [np.ones((4, 8), np.float32)]).program is None


# -- forgeries ---------------------------------------------------------------------------------------------
def _matmul_kernel(a, b):
    out = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 256), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(2):
        acc += nisa.nc_matmul(nl.load(a[k * 64:(k + 1) * 64, :]), nl.load(b[k * 64:(k + 1) * 64, :]))
    nl.store(out, nl.copy(acc))
    return out


@pytest.fixture
def recorded():
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((128, 128), dtype=np.float32), rng.standard_normal((128, 256), dtype=np.float32)]
    sim = simulate(_matmul_kernel, inputs, record_program=True)
    np.testing.assert_allclose(sim.outputs[0], inputs[0].T @ inputs[1], rtol=1e-4, atol=1e-4)
    return sim, inputs


def _instruction(program, kind):
    return next(k for k, ins in enumerate(program.instructions) if ins[0] == kind)


def test_the_recorded_matmul_replays(recorded):
    sim, inputs = recorded
    assert_same_arrays(sim.outputs, replay(sim.program, inputs, trace=sim.trace).outputs, "output")


def test_a_region_outside_its_buffer_is_refused(recorded):
    sim, inputs = recorded
    k = _instruction(sim.program, "matmul")
    _, bid, offset, shape, strides = sim.program.instructions[k][2][0]
    forged = with_instruction(sim.program, k, operands=(("r", bid, offset + 10**6, shape, strides),
                                                             sim.program.instructions[k][2][1]))
    with pytest.raises(ReplayError, match="outside buffer"):
        replay(forged, inputs)


def test_a_matmul_into_sbuf_is_refused(recorded):
    sim, inputs = recorded
    program = sim.program
    k = _instruction(program, "matmul")
    sbuf = next(bid for bid, b in enumerate(program.buffers) if b[1] == 1 and b[5] >= 128 * 256)
    mode, slot, _dst = program.instructions[k][3][0]
    forged = with_instruction(program, k, stores=((mode, slot, ("r", sbuf, 0, (128, 256), (256, 1))),))
    with pytest.raises(ReplayError, match="matmul writes PSUM"):
        replay(forged, inputs, trace=sim.trace)


def test_reading_hbm_outside_a_load_is_refused(recorded):
    sim, inputs = recorded
    program = sim.program
    k = _instruction(program, "matmul")
    hbm = next(bid for bid, b in enumerate(program.buffers) if b[6] == ("input", 0))
    forged = with_instruction(program, k, operands=(("r", hbm, 0, (64, 128), (128, 1)),
                                                         program.instructions[k][2][1]))
    with pytest.raises(ReplayError, match="HBM"):
        replay(forged, inputs, trace=sim.trace)


def _forged_trace(trace: Trace, column: str, row: int, value: int, table: str = "columns") -> Trace:
    tables = {"columns": dict(trace.columns), "access": dict(trace.access)}
    changed = np.array(tables[table][column], copy=True)
    changed[row] = value
    tables[table][column] = changed
    return dataclasses.replace(trace, columns=tables["columns"], access=tables["access"], frozen=True)


def test_a_trace_row_claiming_fewer_flops_is_refused(recorded):
    sim, inputs = recorded
    row = sim.program.instructions[_instruction(sim.program, "matmul")][4]
    forged = _forged_trace(sim.trace, "flops", row, 2)
    with pytest.raises(ReplayError, match="FLOPs"):
        replay(sim.program, inputs, trace=forged)


def test_a_trace_row_claiming_fewer_free_elements_is_refused(recorded):
    sim, inputs = recorded
    row = sim.program.instructions[_instruction(sim.program, "matmul")][4]
    forged = _forged_trace(sim.trace, "free_elems", row, 1)
    with pytest.raises(ReplayError, match="free elements"):
        replay(sim.program, inputs, trace=forged)


def test_a_trace_row_moving_fewer_bytes_is_refused(recorded):
    sim, inputs = recorded
    forged = _forged_trace(sim.trace, "hbm_read", 0, 4)
    with pytest.raises(ReplayError, match="bytes it moves"):
        replay(sim.program, inputs, trace=forged)


def test_a_smaller_box_than_the_region_is_refused(recorded):
    """Boxes are what the performance model builds dependencies from: a shrunk one would hide them."""
    sim, inputs = recorded
    byte_hi = int(sim.trace.access["byte_hi"][0])
    forged = _forged_trace(sim.trace, "byte_hi", 0, byte_hi - 4, table="access")
    with pytest.raises(ReplayError, match="touches partitions"):
        replay(sim.program, inputs, trace=forged)


def test_an_instruction_missing_from_the_trace_is_refused(recorded):
    sim, inputs = recorded
    program = dataclasses.replace(sim.program, instructions=sim.program.instructions[1:],
                                  trace_operands=sim.program.trace_operands[1:])
    with pytest.raises(ReplayError, match="rows"):
        replay(program, inputs, trace=sim.trace)


def test_an_unknown_kind_is_refused(recorded):
    sim, inputs = recorded
    forged = with_instruction(sim.program, 0, kind="exec")
    with pytest.raises(ReplayError, match="unknown kind"):
        replay(forged, inputs)


def test_inputs_must_match_the_recorded_shapes_and_scalars(recorded):
    sim, inputs = recorded
    with pytest.raises(ReplayError, match="recorded for"):
        replay(sim.program, [inputs[0][:64], inputs[1]])
    with pytest.raises(ReplayError, match="takes 2 inputs"):
        replay(sim.program, inputs[:1])

    def scaled(x, eps):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.multiply(nl.load(x), eps))
        return out

    x = np.ones((4, 8), np.float32)
    program = simulate(scaled, [x, 0.5], record_program=True).program
    np.testing.assert_array_equal(replay(program, [2 * x, 0.5]).outputs[0], x)
    with pytest.raises(ReplayError, match="scalar input 1"):
        replay(program, [x, 0.25])


@pytest.mark.parametrize("garbage", [("x",), (), (1, 2, 3, 4, 5, 6, 7), (None, None, None), ("add", "exp", 3)])
def test_malformed_parameters_are_refused_not_crashed_on(recorded, garbage):
    """Whatever a forged parameter makes of an instruction, the replay refuses it with a ReplayError (never
    another exception, which the verifier child would report as its own failure)."""
    sim, inputs = recorded
    for k, instruction in enumerate(sim.program.instructions):
        try:
            replay(with_instruction(sim.program, k, params=garbage), inputs, trace=sim.trace)
        except ReplayError:
            continue
        assert instruction[0] in ("move", "constant", "keep_written"), instruction  # kinds without parameters


def test_a_malformed_wire_form_is_refused(recorded):
    sim, _ = recorded
    header, arrays = wire(sim.program)
    for broken in ({**header, "buffers": {"not": "a list"}}, {**header, "constants": "many"}, {}):
        with pytest.raises(RecordingError):
            from_wire(broken, arrays)
    program = from_wire({**header, "buffers": [["x", 9, "float32"]]}, arrays)
    with pytest.raises(ReplayError, match="malformed"):
        replay(program, [np.zeros((128, 128), np.float32), np.zeros((128, 256), np.float32)])
