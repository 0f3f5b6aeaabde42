"""stationary.T @ moving in float32 with the same bits on every CPU, BLAS kernel and thread count.

numpy's float32 matmul sums in whatever order the BLAS kernel it picked at run time uses (OpenBLAS chooses
by CPU: SkylakeX, Haswell and Sandybridge kernels give different last bits), so simulated outputs, their
digests and the verifier's bit-for-bit replay check would depend on the machine. Here every element is
`f32(V)`, V being the float64 sum of the exact products in a fixed order (index order over the contraction
axis), which no kernel choice can change:

* The operands are float32 values (bf16/fp8 tiles are read as float32), so each product is exact in
  float64 and float64 BLAS computes `d`, the sum of exact products in its own order. Any summation order of
  K terms is within gamma_K * S of the exact sum (S = sum |products|, gamma_K ~ K * 2**-53), and so is V.
* With a radius r >= (K + 2) * 2**-52 * S (twice that bound, with margin for rounding), the exact sum, V and
  d all lie in [d - r, d + r]. Where both ends round to the same float32 bits, that is f32(V) (and the
  exact sum's rounding); elsewhere V is computed as defined, vectorised over those elements.
* S is first bounded by Cauchy-Schwarz (|a_i| * |b_j|: two norms and an outer product, about 1.25x loose on
  random data, so about 1e-5 of the elements are unsure). Where that leaves many elements unsure (sums
  that cancel, e.g. disjoint nonzeros), S itself is computed with a second BLAS product of |a| and |b|.
* Non-finite operands (rare) take the fixed-order sum for the whole product, and NaNs are written as the one
  canonical NaN, so which NaN propagates does not matter either.

Chosen over a float32 accumulation in a fixed order (as PSUM adds) because that costs one numpy call per
contraction row: per 128x128x512 tile, measured 12-25x float32 BLAS against 3.4-4.4x for this
(measurements/matmul_determinism.py; the simulator on the matmul mini cases: 1.3-1.7x).
"""

from __future__ import annotations

import threading

import numpy as np

_NAN32 = np.float32(np.nan)


def _fixed_order_sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """sum_k a[k] * b[k] in float64, added in k order starting from +0.0 (a, b: (K, ...) float64, broadcast).
    One numpy call per k: for the non-finite case, where the products could not all be held at once."""
    acc = np.zeros(np.broadcast_shapes(a.shape[1:], b.shape[1:]), dtype=np.float64)
    for k in range(a.shape[0]):
        acc += a[k] * b[k]
    return acc


class _Scratch:
    """float64 work arrays for one (K, M, N), reused: allocating them afresh for every tile cost more than the
    arithmetic (glibc maps and unmaps blocks this size: 1.42 vs 0.62 ms per 128x128x512 tile, measured)."""

    def __init__(self, k: int, m: int, n: int) -> None:
        self.a = np.empty((k, m))
        self.b = np.empty((k, n))
        self.abs_a = np.empty((k, m))
        self.abs_b = np.empty((k, n))
        self.d = np.empty((m, n))
        self.radius = np.empty((m, n))
        self.low = np.empty((m, n), dtype=np.float32)
        self.unsure = np.empty((m, n), dtype=bool)


_LOCAL = threading.local()  # scratch per thread: evaluations may simulate in threads of one process
_SHAPES_KEPT = 4


def _scratch(k: int, m: int, n: int) -> _Scratch:
    kept: dict[tuple[int, int, int], _Scratch] | None = getattr(_LOCAL, "kept", None)
    if kept is None:
        kept = _LOCAL.kept = {}
    found = kept.get((k, m, n))
    if found is None:
        if len(kept) >= _SHAPES_KEPT:
            del kept[next(iter(kept))]
        found = kept[(k, m, n)] = _Scratch(k, m, n)
    return found


def _unsure(w: _Scratch, out: np.ndarray) -> np.ndarray:
    """Write f32(d + radius) into `out`; True where f32(d - radius) has other bits (+0.0 and -0.0 differ)."""
    np.add(w.d, w.radius, out=out, casting="unsafe")  # float64 sum, rounded once to float32
    np.subtract(w.d, w.radius, out=w.low, casting="unsafe")  # likewise: no float64 intermediate array
    return np.not_equal(out.view(np.int32), w.low.view(np.int32), out=w.unsure)


def matmul_tn(stationary: np.ndarray, moving: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """stationary.T @ moving, (K, M) x (K, N) -> (M, N) float32, the same bits wherever it runs (module doc).

    `out`: a float32 (M, N) array to write into (must not overlap the operands); returned."""
    k, m = stationary.shape
    n = moving.shape[1]
    w = _scratch(k, m, n)
    a, b = w.a, w.b
    np.copyto(a, stationary)
    np.copyto(b, moving)
    if out is None:
        out = np.empty((m, n), dtype=np.float32)
    scale = (k + 2) * 2.0**-52 * (1 + 2.0**-20)  # the margin covers the norms' own rounding
    norm_a = np.sqrt(np.einsum("km,km->m", a, a))  # a bound's ingredient only: its order does not matter
    norm_b = np.sqrt(np.einsum("kn,kn->n", b, b))
    if not (np.isfinite(norm_a).all() and np.isfinite(norm_b).all()):  # an inf or NaN operand
        with np.errstate(invalid="ignore", over="ignore"):  # inf * 0 and inf - inf are NaN, as in BLAS
            out[...] = _fixed_order_sum(a[:, :, None], b[:, None, :])
        np.copyto(out, _NAN32, where=np.isnan(out))
        return out
    np.matmul(a.T, b, out=w.d)
    norm_a *= scale
    np.multiply.outer(norm_a, norm_b, out=w.radius)
    unsure = _unsure(w, out)
    count = int(np.count_nonzero(unsure))
    if count > 16 + out.size // 1024:  # a loose bound: bound S by S itself (one more BLAS product)
        np.abs(a, out=w.abs_a)
        w.abs_a *= scale
        np.abs(b, out=w.abs_b)
        np.matmul(w.abs_a.T, w.abs_b, out=w.radius)
        unsure = _unsure(w, out)
        count = int(np.count_nonzero(unsure))
    if count:
        # flatnonzero, then divmod: numpy's 2-D nonzero costs ~6x as much on a (128, 512) mask (same indices)
        rows, cols = np.divmod(np.flatnonzero(unsure), n)
        products = a[:, rows] * b[:, cols]
        # np.add.accumulate adds in k order by definition (every partial sum is an output); + 0.0 makes
        # an all-zero sum +0.0 whatever the first product's sign, as a sum started from +0.0 would be.
        out[rows, cols] = np.add.accumulate(products, axis=0)[-1] + 0.0
    return out
