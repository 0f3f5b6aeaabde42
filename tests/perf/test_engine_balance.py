"""Ops the compiler may put on Vector or Scalar Engine are balanced between the two."""

from __future__ import annotations

from engine.platforms.nki.perf import estimate
from engine.platforms.nki.simulator.trace import Engine, Trace
from tests.perf.builders import sbuf


def _independent(op: str, count: int) -> Trace:
    tr = Trace()
    for k in range(count):
        a, b = sbuf(tr, f"a{k}", 2048), sbuf(tr, f"b{k}", 2048)
        tr.append(engine=Engine.VECTOR, op=op, dtype="float32", partitions=128, free_elems=512,
                  accesses=((a, False, 0, 128, 0, 2048), (b, True, 0, 128, 0, 2048)))
    return tr.freeze()


def test_independent_tensor_scalar_ops_spread_over_vector_and_scalar_engines():
    report = estimate(_independent("tensor_scalar", 8))
    assert report.timeline["scalar"] and report.timeline["vector"]
    assert report.profile["scalar_engine_active_time_percent"] > 0.4


def test_ops_only_the_vector_engine_runs_stay_there():
    balanced = estimate(_independent("tensor_scalar", 8)).latency_ms
    pinned = estimate(_independent("tensor_reduce", 8))
    assert not pinned.timeline["scalar"]
    assert pinned.latency_ms > 1.5 * balanced
