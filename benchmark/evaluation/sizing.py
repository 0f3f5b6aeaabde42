"""How much data a reference's problem moves: the bytes of its inputs and outputs, as the reference itself
makes them. The caller chooses the sandbox limits from it before the first evaluation starts (a full-size
reference needs the large ones; `benchmark.services.limits_for`).

The reference runs once in a sandboxed reference child (the role, static check and guards an evaluation
uses) on its plain inputs; only the sizes come back to the caller as a number.
"""

from __future__ import annotations

import math

import numpy as np

from benchmark.evaluation.sandbox import ChildProcess, Limits
from benchmark.evaluation.static_check import StaticCheckError, check_reference_source

# Sizes do not depend on the values, so any fixed seed will do.
_SEED = 0


def reference_io_bytes(reference_source: str, limits: Limits) -> int | None:
    """Bytes of the reference's inputs plus its outputs: NKIBench's `hbm_bytes` (each input read once, each
    output written once). None when the reference cannot run within `limits`; the evaluation says why."""
    try:
        check_reference_source(reference_source)
    except StaticCheckError:
        return None
    try:
        with ChildProcess("reference", {}, limits) as reference:
            loaded, _ = reference.request({"op": "load", "source": reference_source})
            if not loaded["ok"]:
                return None
            rendered, arrays = reference.request({"op": "render", "seed": _SEED, "distribution": "reference",
                                                  "index": 0})
    except Exception:  # noqa: BLE001 - best effort: a reference that cannot be measured is evaluated as large
        return None
    if not rendered["ok"]:
        return None
    inputs = sum(array.nbytes for name, array in arrays.items() if name.startswith("in"))
    outputs = sum(np.dtype(dtype).itemsize * math.prod(shape) for dtype, shape in rendered["expected"])
    return int(inputs + outputs)
