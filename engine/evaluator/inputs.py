"""Fresh seeds and value distributions for the inputs a kernel is checked on.

Seeds are drawn in the parent from the OS's entropy for every evaluation (unless the caller fixes them to
reproduce one), so no kernel can be tuned to a known input. The reference child seeds numpy's global
generator with each seed before calling the reference's `get_inputs()` (NKIBench references draw from it),
then reshapes the values with the seed's distribution:

* `reference`: the values `get_inputs()` draws;
* `zeros`: about half of every floating input set to exact 0.0 (catches kernels that mishandle zeros or
  special-case a value range);
* `scaled`: every floating input multiplied by 64 (large magnitudes: overflow, poor scaling, lost
  precision in accumulation show up).

Scalar inputs (an epsilon) are parameters of the problem and never reshaped. When a variant makes the
reference itself produce NaN/Inf (an exp that overflows when scaled), the reference child checks that
seed on the plain values instead and the result records "reference" for it. A problem can also opt out
for good by defining `EVAL_DISTRIBUTIONS = ("reference", "zeros")` in its reference, or the caller passes
`distributions`.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from typing import Any

import numpy as np

DISTRIBUTIONS = ("reference", "zeros", "scaled")
MIN_SEEDS = 3
SCALE_FACTOR = 64.0
ZERO_FRACTION = 0.5


def draw_seeds(count: int) -> tuple[int, ...]:
    """Seeds the kernel cannot predict (numpy seeds are 32-bit)."""
    return tuple(secrets.randbelow(2**32) for _ in range(count))


def plan_distributions(count: int, allowed: Sequence[str]) -> tuple[str, ...]:
    """Which distribution each of `count` seeds uses: the plain one first, each variant once, then plain."""
    unknown = [d for d in allowed if d not in DISTRIBUTIONS]
    if unknown:
        raise ValueError(f"unknown input distribution(s) {unknown}; expected a subset of {list(DISTRIBUTIONS)}")
    allowed = tuple(allowed) or ("reference",)
    base = "reference" if "reference" in allowed else allowed[0]
    plan = [base] + [d for d in DISTRIBUTIONS if d in allowed and d != base]
    plan += [base] * max(0, count - len(plan))
    return tuple(plan[:count])


def apply_distribution(inputs: list[Any], distribution: str, seed: int) -> list[Any]:
    if distribution == "reference":
        return inputs
    rng = np.random.default_rng(seed ^ 0x5EED)
    shaped = []
    for value in inputs:
        if not isinstance(value, np.ndarray) or value.ndim == 0:
            shaped.append(value)  # a scalar parameter (an epsilon, say) is part of the problem, not data
            continue
        if value.dtype.kind != "f":
            shaped.append(value.copy())
        elif distribution == "zeros":
            # copyto with a mask: the same zeros as indexing with it, at about half the cost on large inputs
            array = value.copy()
            np.copyto(array, 0.0, where=rng.random(array.shape) < ZERO_FRACTION)
            shaped.append(array)
        elif distribution != "scaled":
            raise ValueError(f"unknown input distribution {distribution!r}")
        else:  # one new array, in the input's own dtype
            shaped.append(np.multiply(value, value.dtype.type(SCALE_FACTOR)))
    return shaped
