"""Which op names may label an instruction: one table from each op the simulator emits to the semantics it runs.

The performance model prices a trace row by its op name (engine/platforms/nki/perf/costs.py: which engine rates, which
ops may move between Vector and Scalar Engine, which repeats it may elide), and the verifier replays the
instruction's kind (semantics.py) with its parameters. A recorded row comes from the kernel's process, so its
label must be the one the simulator gives what the replay executes (issue 35: a reduction relabelled as a
copy was elided, a matmul relabelled `broadcast_matmul` had its passes halved). `label_allowed` is checked for
every row during the first replay (trace_check.RowCheck).

What each op costs is in the same module (`COST_CLASSES`, read by engine/platforms/nki/perf/costs.py and valnum.py), so
a label's semantics and its price sit side by side, and labels that may stand for one instruction cost the same
(`interchangeable_labels`; tests/nki/test_op_labels.py walks them): a kernel gains nothing by choosing one.
"""

from __future__ import annotations

from typing import Any

from engine.platforms.nki.simulator.semantics import alu
from engine.platforms.nki.simulator.trace import Engine

# nl.sum and friends: their ALU combine operator (semantics.py's reduce runs `combine`); mean divides by a count.
LANGUAGE_REDUCES = {"sum": "add", "prod": "multiply", "max": "maximum", "min": "minimum", "mean": "add",
                    "all": "logical_and", "any": "logical_or"}

# kind -> op names that always label it (kinds whose label also depends on params are in `label_allowed`).
FIXED_LABELS: dict[str, frozenset[str]] = {
    "matmul": frozenset({"nc_matmul", "matmul"}),  # nl.matmul lowers to nc_matmul under its own name
    "transpose": frozenset({"nc_transpose"}),
    "tensor_scalar": frozenset({"tensor_scalar"}),
    "scalar_tensor_tensor": frozenset({"scalar_tensor_tensor"}),
    "scan": frozenset({"tensor_tensor_scan"}),
    "reciprocal": frozenset({"reciprocal"}),
    "where": frozenset({"where"}),
    "memset": frozenset({"memset"}),
    "scalar": frozenset({"memset"}),  # t[...] = scalar
    "constant": frozenset({"iota", "rand"}),  # nl.rand's draws are a constant tile the program carries
    # an accumulating one is a loop_reduce, and only that; a loop_reduce whose result lands in a fresh tile of its
    # own accumulates nothing, and the simulator labels it `copy` (runtime.flush)
    "convert": frozenset({"load", "copy", "tensor_copy"}),
    # the NKI 0.6 instructions (isa_v06.py; their kinds in semantics_v06.py): each runs under its own name
    "scalar_reduce": frozenset({"tensor_scalar_reduce"}),
    "cumulative": frozenset({"tensor_scalar_cumulative"}),
    "max8": frozenset({"max8"}),
    "find_index8": frozenset({"nc_find_index8"}),
    "match_replace8": frozenset({"nc_match_replace8"}),
    "keep_where": frozenset({"dropout"}),
    "bn_stats": frozenset({"bn_stats"}),
    "bn_aggr": frozenset({"bn_aggr"}),
    "predicated": frozenset({"tensor_copy_predicated"}),
    "partition_reduce": frozenset({"tensor_partition_reduce"}),
    "transpose_axes": frozenset({"dma_transpose", "load_transpose2d"}),
    "exponential": frozenset({"exponential"}),
    "affine_select": frozenset({"affine_select"}),
    "select": frozenset({"select_reduce"}),
    "range_select": frozenset({"range_select"}),
    "composite": frozenset({"var", "softmax", "rms_norm"}),
    "uniform": frozenset({"rand2", "rng"}),
    "shuffle": frozenset({"nc_stream_shuffle"}),
    "gather_free": frozenset({"gather_flattened", "nc_n_gather"}),
    "sequence_bounds": frozenset({"sequence_bounds"}),
    "local_gather": frozenset({"local_gather"}),
    "activate2": frozenset({"activate2"}),
    "nonzero": frozenset({"nonzero_with_count"}),
    "register": frozenset({"register_load", "set_rng_seed"}),
    # the last names of the 0.6 reference (isa_v06_more.py)
    "rng_state": frozenset({"rand_set_state"}),
    "rng_words": frozenset({"rand_get_state"}),  # the state it writes is a constant tile the program carries
    "dma_sum": frozenset({"dma_compute"}),
    "barrier": frozenset({"core_barrier"}),
    "exchange": frozenset({"sendrecv"}),
    "topk": frozenset({"topk"}),
    "mx_quantize": frozenset({"quantize_mx"}),
    "mx_matmul": frozenset({"nc_matmul_mx"}),
}


# The performance model's classes of op names (everything else: one cycle per element on its engine, at least
# MIN_II). Names are matched after lower-casing and stripping a namespace ("nisa.tensor_tensor").
COST_CLASSES: dict[str, frozenset[str]] = {
    "two_cycle": frozenset({"scalar_tensor_tensor", "tensor_copy_predicated"}),  # two cycles per element
    # plus MIN_II for the accumulator read-out
    "reduce_extra": frozenset({"activation_reduce", "tensor_scalar_reduce"}),
    # nisa.tensor_tensor and every ALU op an nl binary is labelled with (it is that instruction on the device):
    # one rate, whichever label (engine/platforms/nki/perf/costs.py)
    "binary": frozenset({"tensor_tensor", "fmod", *alu.BINARY}),
    # (nl.rand's constant tile is a GpSimd instruction like iota's; the engine gives it the start already)
    "gpsimd_start": frozenset({"iota", "rand", "affine_select", "local_gather"}),
    # nl.sum & co. are tensor_reduce on the device (one `reduce` kind in the replay), so they cost the same
    "no_min_ii": frozenset({"tensor_reduce", "sum", "prod", "max", "min", "all", "any", "max8", "nc_find_index8"}),
    # the compiler places these on Vector or Scalar Engine as load allows
    "flexible": frozenset({"tensor_scalar", "tensor_copy", "copy", "memset"}),
    # Tensor Engine matmuls whose stationary operand is ones and zeros: made by the model's own lowering of
    # partition broadcasts (engine/platforms/nki/perf/lowering.py), never a label a recorded row may carry
    "onezero": frozenset({"broadcast_matmul"}),
    # a row says everything that determines the result, so equal rows are equal values (valnum.py)
    "parameterless": frozenset({"copy", "tensor_copy"}),
}


# The engines an instruction's `engine=` may pick, as its nki.isa page names them (the others run where their page
# says): the simulator refuses any other (isa.engine_of) and the verifier holds every row to them (trace_check), so
# an engine a kernel claims is one an honest kernel may ask for. `tensor_tensor` on the Scalar Engine skipped the
# Vector Engine's two-operand rate (1.7x cheaper), and no page allows it.
ENGINE_CHOICES: dict[str, frozenset[Engine]] = {
    "tensor_tensor": frozenset({Engine.VECTOR, Engine.GPSIMD}),  # "using Vector Engine or GpSimd Engine"
    "tensor_scalar": frozenset({Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD}),
    "tensor_copy": frozenset({Engine.VECTOR, Engine.SCALAR, Engine.GPSIMD}),
    "memset": frozenset({Engine.VECTOR, Engine.GPSIMD}),
    "nc_transpose": frozenset({Engine.TENSOR, Engine.VECTOR}),
}


def label_allowed(op: str, kind: str, params: tuple, stores: tuple) -> bool:
    """Whether the simulator labels an instruction of `kind` with `params` and `stores` as `op`."""
    fixed = FIXED_LABELS.get(kind)
    if kind == "convert" and any(_accumulates(store) for store in stores):
        return op == "loop_reduce"  # a copy never accumulates; its label would make it flexible and elidable
    if fixed is not None:
        return op in fixed
    if kind == "binary":  # nl.add & co. carry their ALU op's name; nisa.tensor_tensor its own
        return op == "tensor_tensor" or op == _first(params)
    if kind == "unary":  # nl.exp & co.
        return op == _first(params)
    if kind == "activation":  # params[3]: which entry point (activation or activation_reduce) ran it
        return op in ("activation", "activation_reduce") and len(params) > 3 and op == params[3]
    if kind == "reduce":
        count = params[3] if len(params) > 3 else None
        if op == "tensor_reduce":
            return count == 0
        return LANGUAGE_REDUCES.get(op) == _first(params) and (op == "mean") == (isinstance(count, int) and count > 0)
    if kind == "move":  # DMAs, and assignments into tiles: `t[...] = x` copies, `t[...] += x` is a tensor_tensor
        if op in ("store", "dma_copy"):
            return True
        return op == ("tensor_tensor" if stores and _accumulates(stores[0]) else "tensor_copy")
    return False


# Labels the performance model puts on engines of their own, whatever their kind: a DMA's price is its bytes.
DMA_LABELS = frozenset({"load", "store", "dma_copy", "dma_transpose", "load_transpose2d"})


def cost_classes(op: str) -> frozenset[str]:
    """The `COST_CLASSES` an op name is in: with its engine and its row's numbers, all the model prices it by."""
    return frozenset(name for name, ops in COST_CLASSES.items() if op in ops)


def interchangeable_labels(kind: str) -> list[frozenset[str]]:
    """The groups of labels that `label_allowed` accepts for one instruction of `kind` with the same parameters
    and stores, and that run on compute engines: each group must be priced alike (tests/nki/test_op_labels.py
    prices every label of a group on the same row)."""
    if kind == "reduce":
        return [frozenset({"tensor_reduce"} | {op for op in LANGUAGE_REDUCES if op != "mean"})]
    if kind == "binary":  # nisa.tensor_tensor(op=nl.add) and nl.add run the same instruction
        return [frozenset({"tensor_tensor", op}) for op in sorted(alu.BINARY)]
    fixed = FIXED_LABELS.get(kind, frozenset())
    return [frozenset(fixed - DMA_LABELS)] if len(fixed - DMA_LABELS) > 1 else []


def _accumulates(store: Any) -> bool:
    """A `write` store that combines into its destination (an accumulate operator), or that the race rule
    files as accumulating (a loop_reduce's first contribution)."""
    return isinstance(store, tuple) and len(store) > 4 and store[0] == "write" \
        and (store[3] is not None or store[4] is True)


def _first(params: tuple) -> Any:
    return params[0] if params else None
