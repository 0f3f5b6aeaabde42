"""Instructions wait for the instructions whose results they read, on any engine."""

from __future__ import annotations

from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf import estimate
from engine.platforms.nki.perf.costs import instruction_costs
from engine.platforms.nki.perf.deps import build_dependencies
from engine.platforms.nki.simulator.trace import Engine, Trace
from tests.perf.builders import sbuf


def _two_ops(consumer_reads_producer: bool) -> Trace:
    tr = Trace()
    a, b, c = sbuf(tr, "a", 2048), sbuf(tr, "b", 2048), sbuf(tr, "c", 2048)
    tr.append(engine=Engine.SCALAR, op="activation", dtype="float32", partitions=128, free_elems=512,
              accesses=((a, False, 0, 128, 0, 2048), (b, True, 0, 128, 0, 2048)))
    src = b if consumer_reads_producer else a
    tr.append(engine=Engine.VECTOR, op="tensor_scalar", dtype="float32", partitions=128, free_elems=512,
              accesses=((src, False, 0, 128, 0, 2048), (c, True, 0, 128, 0, 2048)))
    return tr.freeze()


def test_a_consumer_on_another_engine_waits_for_its_producer():
    dependent = estimate(_two_ops(True)).latency_ms
    independent = estimate(_two_ops(False)).latency_ms
    # In sequence: Scalar's 576 cycles at 1.4 GHz, then Vector's at 1.12 GHz (0.8 + 1); overlapped: the longer.
    assert dependent > 1.7 * independent


def test_it_finds_the_dependency_through_a_partial_overlap_of_regions():
    tr = Trace()
    big, out = sbuf(tr, "big", 4096), sbuf(tr, "out", 2048)
    tr.append(engine=Engine.SCALAR, op="activation", dtype="float32", partitions=128, free_elems=1024,
              accesses=((big, True, 0, 128, 0, 4096),))
    tr.append(engine=Engine.VECTOR, op="tensor_scalar", dtype="float32", partitions=128, free_elems=512,
              accesses=((big, False, 0, 128, 2048, 4096), (out, True, 0, 128, 0, 2048)))
    deps = build_dependencies(tr.freeze())
    assert deps.indices[deps.indptr[1]:deps.indptr[2]].tolist() == [0]


def test_instructions_on_one_engine_run_in_program_order():
    tr = _two_ops(False)
    costs = instruction_costs(tr, TRN1)
    # Two independent ops on different engines overlap, so the latency is the longer of the two.
    assert abs(estimate(tr).latency_ms - max(costs.seconds) * 1e3) < 1e-9
