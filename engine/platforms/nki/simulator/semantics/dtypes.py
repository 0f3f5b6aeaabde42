"""NKI data types on numpy: types numpy lacks (bfloat16, tfloat32, fp8) are stored as float32 and rounded.

Each `DType` knows its hardware size in bytes (what the trace charges for) and how to round a float32
array to its precision when written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class DType:
    name: str
    storage: np.dtype  # how the simulator holds the values
    itemsize: int  # bytes on the device
    mantissa_bits: int = 0  # >0: round float32 storage to this many explicit mantissa bits

    def __repr__(self) -> str:
        return self.name

    @property
    def dtype(self) -> np.dtype:
        """numpy takes any object with a `dtype` as that dtype: `np.ones(shape, dtype=nl.float8_e5m2)` (AWS's
        tests build inputs so) gives an array in the type's storage (float32 for the narrow floats)."""
        return self.storage

    def round(self, values: np.ndarray) -> np.ndarray:
        """Round float32 values to this type's precision (round to nearest even)."""
        if not self.mantissa_bits:
            return values
        bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
        drop = 23 - self.mantissa_bits
        half = np.uint32(1 << (drop - 1))
        lsb = (bits >> np.uint32(drop)) & np.uint32(1)
        rounded = (bits + half - np.uint32(1) + lsb) & np.uint32(~((1 << drop) - 1) & 0xFFFFFFFF)
        return rounded.view(np.float32)


def _numpy(name: str) -> DType:
    dt = np.dtype(name)
    return DType(name, dt, dt.itemsize)


float32 = _numpy("float32")
float16 = _numpy("float16")
float64 = _numpy("float64")
int8 = _numpy("int8")
int16 = _numpy("int16")
int32 = _numpy("int32")
int64 = _numpy("int64")
uint8 = _numpy("uint8")
uint16 = _numpy("uint16")
uint32 = _numpy("uint32")
uint64 = _numpy("uint64")
bool_ = DType("bool", np.dtype(np.bool_), 1)
bfloat16 = DType("bfloat16", np.dtype(np.float32), 2, mantissa_bits=7)
tfloat32 = DType("tfloat32", np.dtype(np.float32), 4, mantissa_bits=10)
float8_e4m3 = DType("float8_e4m3", np.dtype(np.float32), 1, mantissa_bits=3)
float8_e5m2 = DType("float8_e5m2", np.dtype(np.float32), 1, mantissa_bits=2)

_BY_NAME: dict[str, DType] = {
    d.name: d
    for d in (float32, float16, float64, int8, int16, int32, int64, uint8, uint16, uint32, uint64, bool_,
              bfloat16, tfloat32, float8_e4m3, float8_e5m2)
}
_BY_NAME["bool_"] = bool_
_BY_NAME["float8_e4m3fn"] = float8_e4m3
# NKI 0.6 (API reference, nki.api.shared: data types): float8_e4m3fn is the OCP e4m3 (same mantissa as our
# float8_e4m3); float8_e8m0fnu is the MX scale type: 8 exponent bits, no mantissa, so values round to powers of
# two (mantissa_bits=0 would mean "no rounding", hence the explicit power-of-two rounding below).
float8_e4m3fn = DType("float8_e4m3fn", np.dtype(np.float32), 1, mantissa_bits=3)
_BY_NAME["float8_e4m3fn"] = float8_e4m3fn


class _PowerOfTwo(DType):
    def round(self, values: np.ndarray) -> np.ndarray:
        v = np.asarray(values, dtype=np.float32)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.exp2(np.round(np.log2(np.abs(v)))).astype(np.float32)
        return np.where(v > 0, out, np.float32(0.0))


float8_e8m0fnu = _PowerOfTwo("float8_e8m0fnu", np.dtype(np.float32), 1, mantissa_bits=-1)
_BY_NAME["float8_e8m0fnu"] = float8_e8m0fnu


# The packed MX types of NKI 0.6 (nc_matmul_mx, quantize_mx on NeuronCore-v4): one element holds four float8
# (32 bits) or four float4 (16 bits) values, lowest bits first. Held as their bits (uint32 / uint16), as the
# device holds them; semantics/mx.py packs and unpacks.
float8_e5m2_x4 = DType("float8_e5m2_x4", np.dtype(np.uint32), 4)
float8_e4m3fn_x4 = DType("float8_e4m3fn_x4", np.dtype(np.uint32), 4)
float4_e2m1fn_x4 = DType("float4_e2m1fn_x4", np.dtype(np.uint16), 2)
_BY_NAME.update({d.name: d for d in (float8_e5m2_x4, float8_e4m3fn_x4, float4_e2m1fn_x4)})


def as_dtype(value: Any) -> DType:
    """Accept an NKI dtype, a numpy dtype/type, or a name."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        try:
            return _BY_NAME[value]
        except KeyError:
            raise TypeError(f"unknown dtype {value!r}") from None
    try:
        return _BY_NUMPY[value]  # np.float32 and friends: kernels pass them on every instruction
    except (KeyError, TypeError):
        pass
    try:
        name = np.dtype(value).name
    except TypeError:
        raise TypeError(f"unknown dtype {value!r}") from None
    if name not in _BY_NAME:
        raise TypeError(f"unsupported dtype {name}")
    if len(_BY_NUMPY) < 64:
        _BY_NUMPY[value] = _BY_NAME[name]
    return _BY_NAME[name]


_BY_NUMPY: dict[Any, DType] = {}  # numpy types and dtypes seen, by themselves


def is_float(dtype: DType) -> bool:
    return dtype.storage.kind == "f"
