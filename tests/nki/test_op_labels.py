"""Every kind of instruction the simulator runs has the op labels it may carry (semantics/ops.py): a kind
missing from the table makes every kernel that uses it fail verification, which is how the NKI 0.6
instructions first met the label check."""

from __future__ import annotations

from engine.platforms.nki.perf import estimate
from engine.platforms.nki.simulator.semantics import semantics, semantics_v06  # noqa: F401 - registers the 0.6 kinds
from engine.platforms.nki.simulator.semantics.ops import FIXED_LABELS
from engine.platforms.nki.simulator.trace import Engine, Trace
from tests.perf.builders import hbm, sbuf

# Kinds whose label follows their parameters (label_allowed's own rules), not a fixed set.
LABELLED_BY_PARAMETERS = {"binary", "unary", "activation", "reduce", "move"}
# Kinds that record no cost-trace row of their own (trace_check skips them): the zeros a matmul into a partly
# written PSUM tile starts from.
WITHOUT_A_ROW = {"keep_written"}


def test_every_kind_the_simulator_runs_has_the_labels_it_may_carry():
    missing = sorted(set(semantics.KINDS) - set(FIXED_LABELS) - LABELLED_BY_PARAMETERS - WITHOUT_A_ROW)
    assert not missing, f"kinds with no op label in semantics/ops.py (every kernel using them would be refused): {missing}"


def _priced_as(op: str, engine: Engine, second: int) -> float:
    """The model's latency (ms) of one kernel whose only compute row, on `engine`, is labelled `op`: load a
    [128, 512] and a [128, `second`] fp32 tile, combine them twice (the repeat is what elision rules look at),
    store the result."""
    tr = Trace()
    tile = 128 * 512 * 4
    a_hbm, b_hbm, out = (hbm(tr, name, tile) for name in ("a", "b", "out"))
    a, b, c, d = (sbuf(tr, name, 512 * 4) for name in ("a_sb", "b_sb", "c_sb", "d_sb"))
    b_bytes = second * 4
    for src, dst in ((a_hbm, a), (b_hbm, b)):
        tr.append(engine=Engine.DMA, op="load", dtype="float32", partitions=128, free_elems=512, hbm_read=tile,
                  sbuf_write=tile, accesses=((src, False, 0, 1, 0, tile), (dst, True, 0, 128, 0, 512 * 4)))
    for dst in (c, d):
        tr.append(engine=engine, op=op, dtype="float32", partitions=128, free_elems=512, flops=128 * 512,
                  sbuf_read=2 * tile, sbuf_write=tile,
                  accesses=((a, False, 0, 128, 0, 512 * 4), (b, False, 0, 128, 0, b_bytes),
                            (dst, True, 0, 128, 0, 512 * 4)))
    tr.append(engine=Engine.DMA, op="store", dtype="float32", partitions=128, free_elems=512, hbm_write=tile,
              sbuf_read=tile, accesses=((d, False, 0, 128, 0, 512 * 4), (out, True, 0, 1, 0, tile)))
    return estimate(tr.freeze(), "trn1", breakdown=False).latency_ms


def test_labels_that_may_stand_for_one_instruction_are_priced_alike():
    """The model prices by op name, and a recorded label is the kernel's choice among those the verifier accepts
    for what runs: each such choice must cost the same on the same engine, or a kernel buys a price by its label
    (issue 35: `tensor_tensor` cost 2 cycles per element on two SBUF tiles, the same instruction labelled `add`
    1.2). Every label of every group is priced on the same row; no group is excepted."""
    from engine.platforms.nki.simulator.semantics.ops import interchangeable_labels

    apart = {}
    for kind in sorted(set(semantics.KINDS)):
        for group in interchangeable_labels(kind):
            for engine in (Engine.TENSOR, Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD):
                for second in (512, 1):  # two full tiles, or the second broadcast along the free axis
                    prices = {op: round(_priced_as(op, engine, second), 9) for op in sorted(group)}
                    if len(set(prices.values())) > 1:
                        apart[f"{kind} {'/'.join(sorted(group))} on {engine.name}, [128, {second}]"] = prices
    assert not apart, f"labels of one instruction priced apart: {apart}"
    # the groups issue 35 found
    assert interchangeable_labels("reduce") and interchangeable_labels("convert")
    assert frozenset({"tensor_tensor", "add"}) in interchangeable_labels("binary")
