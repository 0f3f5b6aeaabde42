"""MX (OCP microscaling) on NeuronCore-v4: the packed float8/float4 formats, and what `quantize_mx` and
`nc_matmul_mx` compute (issue 34; their instructions are in isa_v06_more.py, their kinds registered by
semantics_v06.py).

Semantics from the SDK 2.32 API reference (nki/api/nki/isa/__init__.py in aws-neuron-sdk: quantize_mx's scale
formula, nc_matmul_mx's layout) and the OCP Microscaling formats: float8_e4m3fn (bias 7, no infinity),
float8_e5m2 (bias 15), float4_e2m1fn (bias 1). Scales sit in the first four partitions of their group's
32-partition quadrant, as the nki-samples MX tutorial lays them out for nc_matmul_mx.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.platforms.nki.simulator.semantics import dtypes as dt
from engine.platforms.nki.simulator.semantics import semantics


def _format_values(exp_bits: int, man_bits: int, finite: int) -> np.ndarray:
    """The value of each non-negative code of a small float format (codes 0 .. finite-1; subnormals at e=0)."""
    bias = 2 ** (exp_bits - 1) - 1
    codes = np.arange(finite)
    e, m = codes >> man_bits, (codes & (2**man_bits - 1)) / 2.0**man_bits
    return np.where(e == 0, m * 2.0 ** (1 - bias), (1 + m) * 2.0 ** (e - bias))


# (values of the codes without sign, sign bit, bits per value, E_max for quantize_mx's scale): float8_e4m3fn has
# no infinity (code 0x7F is NaN), float8_e5m2 reserves exponent 31, float4_e2m1fn is all finite (max 6).
MX_FORMATS = {
    "float8_e4m3fn_x4": (_format_values(4, 3, 0x7F), 0x80, 8, 8),
    "float8_e5m2_x4": (_format_values(5, 2, 0x7C), 0x80, 8, 15),
    "float4_e2m1fn_x4": (_format_values(2, 1, 0x8), 0x8, 4, 2),
}


def mx_encode(values: np.ndarray, fmt: str) -> np.ndarray:
    """Codes of the values, rounded to the nearest representable (ties to the even code), saturating."""
    table, sign, _, _ = MX_FORMATS[fmt]
    mag = np.abs(values.astype(np.float64))
    hi = np.clip(np.searchsorted(table, mag), 0, len(table) - 1)
    lo = np.clip(hi - 1, 0, len(table) - 1)
    below, above = mag - table[lo], table[hi] - mag
    code = np.where(below < above, lo, np.where(above < below, hi, np.where(lo % 2 == 0, lo, hi)))
    code = np.where(mag >= table[-1], len(table) - 1, code)
    return (code | np.where(np.signbit(values), sign, 0)).astype(np.uint32)


def mx_unpack(packed: np.ndarray, fmt: str) -> np.ndarray:
    """[P, F] packed elements -> [P, F, 4] values (the lowest bits hold the first value)."""
    table, sign, bits, _ = MX_FORMATS[fmt]
    words = np.asarray(packed).astype(np.uint64)[..., None] >> (bits * np.arange(4, dtype=np.uint64))
    codes = (words & np.uint64(2**bits - 1)).astype(np.int64)
    mags = table[np.minimum(codes & (sign - 1), len(table) - 1)]
    return np.where(codes & sign, -mags, mags)


def mx_scale_rows(partitions: int) -> np.ndarray:
    """The scale tile's partition for each group of 8 data partitions: the first 4 partitions of the group's own
    32-partition quadrant (all in the first quadrant when the data spans one)."""
    groups = np.arange(partitions // 8)
    return groups if partitions <= 32 else groups // 4 * 32 + groups % 4


def _scale_factors(scale: np.ndarray, partitions: int, as_code: bool) -> np.ndarray:
    """[groups, F] scale factors from the scale tile (uint8 codes: 2^(code-127); float8_e8m0fnu: the values)."""
    rows = np.asarray(scale, dtype=np.float64)[mx_scale_rows(partitions)]
    return np.exp2(rows - 127.0) if as_code else rows


def mx_quantize(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """quantize_mx: per group of 8 partitions x 4 elements, X = 2^(floor(log2 max|V|) - (E_max - 1)) (2^-127 for
    an all-zero group), data = V / X in the element format, packed four to an element; the scales as uint8
    codes (127 + log2 X) or float8_e8m0fnu values, [groups, F/4]. params: (format, scale dtype)."""
    fmt, scale_dtype, _src_dtype = params
    x = np.asarray(semantics.as_fp32(v[0]), dtype=np.float64)
    p, f = x.shape
    groups = np.abs(x).reshape(p // 8, 8, f // 4, 4).max(axis=(1, 3))
    _, exponent = np.frexp(groups)  # groups = m * 2^exponent, m in [0.5, 1): floor(log2) = exponent - 1
    code = np.where(groups > 0, exponent - 1 - (MX_FORMATS[fmt][3] - 1) + 127, 0).clip(0, 254)
    factor = np.repeat(np.repeat(np.exp2(code - 127.0), 8, axis=0), 4, axis=1)
    codes = mx_encode(x / factor, fmt).reshape(p, f // 4, 4)
    bits = MX_FORMATS[fmt][2]
    packed = np.zeros((p, f // 4), dtype=np.uint64)
    for j in range(4):
        packed |= codes[:, :, j].astype(np.uint64) << np.uint64(bits * j)
    scale = code.astype(np.float32) if scale_dtype == "uint8" else np.exp2(code - 127.0).astype(np.float32)
    # one block of scale rows per 32-partition quadrant (each goes to its quadrant's first partitions)
    return (packed.astype(dt.as_dtype(fmt).storage), *(scale[q:q + 4] for q in range(0, len(scale), 4)))


def mx_matmul(params: tuple, v: list[Any], tiles: tuple[bool, ...]) -> Any:
    """nc_matmul_mx: stationary [K, M] and moving [K, N] (packed) dequantized by their scales and contracted over
    the K partitions and the four values of each element: [M, N] in float32. params: (stationary format, moving
    format, stationary scale is uint8, moving scale is uint8, dst dtype)."""
    sfmt, mfmt, s_codes, m_codes, d = params
    k = np.shape(v[0])[0]
    stationary = mx_unpack(v[0], sfmt) * np.repeat(_scale_factors(v[2], k, s_codes), 8, axis=0)[..., None]
    moving = mx_unpack(v[1], mfmt) * np.repeat(_scale_factors(v[3], k, m_codes), 8, axis=0)[..., None]
    out = np.einsum("pmj,pnj->mn", stationary, moving).astype(np.float32)
    return semantics.to_dtype(out, dt.as_dtype(d))
