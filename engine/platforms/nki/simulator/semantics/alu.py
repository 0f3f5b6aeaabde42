"""The math of NKI operators, one table keyed by operator name.

Kernels name operators by passing functions (`nl.add`, `np.add`, `nl.exp`, `np.max`); `op_name` maps
any of those to a canonical name, and the tables give its numpy semantics. Activation functions follow
the "Supported Activation Functions" list of the NKI ISA reference; binary operators the "Supported Math
Operators" list.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from engine.platforms.nki.simulator.errors import unsupported


def _erf(x: np.ndarray) -> np.ndarray:
    # Abramowitz & Stegun 7.1.26 is too coarse for fp32 tolerances; use the Numerical Recipes erfc
    # Chebyshev fit (fractional error < 1.2e-7 everywhere).
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
            -0.82215223 + t * 0.17087277))))))))
    erfc = t * np.exp(poly)
    return np.where(x >= 0, 1.0 - erfc, erfc - 1.0).astype(x.dtype, copy=False)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def _gelu_dx(x: np.ndarray) -> np.ndarray:
    """d/dx of the exact gelu: Phi(x) + x * phi(x)."""
    return 0.5 * (1.0 + _erf(x * 0.7071067811865476)) + x * np.exp(-0.5 * x * x) * 0.3989422804014327


def _sigmoid_gelu_dx(x: np.ndarray) -> np.ndarray:
    """d/dx of x * sigmoid(1.702 x)."""
    s = _sigmoid(1.702 * x)
    return s + 1.702 * x * s * (1.0 - s)


UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    # NKI 0.6 derivatives (nki.language gelu_dx, gelu_apprx_sigmoid_dx, silu_dx, erf_dx) and bypass
    "gelu_dx": _gelu_dx,
    "gelu_apprx_sigmoid_dx": _sigmoid_gelu_dx,
    "silu_dx": lambda x: _sigmoid(x) * (1.0 + x * (1.0 - _sigmoid(x))),
    "erf_dx": lambda x: 1.1283791670955126 * np.exp(-x * x),
    "bypass": lambda x: x,
    "copy": lambda x: x,
    "identity": lambda x: x,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "square": np.square,
    "reciprocal": lambda x: 1.0 / x,
    "tanh": np.tanh,
    "sigmoid": _sigmoid,
    "silu": lambda x: x * _sigmoid(x),
    "gelu": lambda x: 0.5 * x * (1.0 + _erf(x * 0.7071067811865476)),
    "gelu_apprx_tanh": _gelu_tanh,
    "gelu_apprx_sigmoid": lambda x: x * _sigmoid(1.702 * x),
    "relu": lambda x: np.maximum(x, 0),
    "abs": np.abs,
    "negative": np.negative,
    "sign": np.sign,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "arctan": np.arctan,
    "erf": _erf,
    "softplus": lambda x: np.logaddexp(0, x),
    "mish": lambda x: x * np.tanh(np.logaddexp(0, x)),
    "ceil": np.ceil,
    "floor": np.floor,
    "trunc": np.trunc,
    "logical_not": np.logical_not,
    "invert": np.invert,
}

BINARY: dict[str, Callable[[Any, Any], np.ndarray]] = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "power": np.power,
    "mod": np.mod,
    "equal": np.equal,
    "not_equal": np.not_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
    "left_shift": np.left_shift,
    "right_shift": np.right_shift,
    # The input with the larger magnitude, sign kept; a tie returns y (nki.language.abs_max, NKI 0.6 API
    # reference: abs_max(-5, 3) is -5, abs_max(1, -1) is -1).
    "abs_max": lambda a, b: np.where(np.abs(a) > np.abs(b), a, b),
    "abs_min": lambda a, b: np.where(np.abs(a) < np.abs(b), a, b),
    "bypass": lambda a, b: a,  # NKI 0.6 nl.bypass: the operator slot does nothing
}

# Reductions: binary operators with an associative numpy reduce.
REDUCE: dict[str, Callable[..., np.ndarray]] = {
    "add": np.add.reduce,
    "multiply": np.multiply.reduce,
    "maximum": np.maximum.reduce,
    "minimum": np.minimum.reduce,
    "bitwise_and": np.bitwise_and.reduce,
    "bitwise_or": np.bitwise_or.reduce,
    "logical_and": np.logical_and.reduce,
    "logical_or": np.logical_or.reduce,
}

# Operator objects a kernel may pass -> canonical name. nl.* functions are registered by language.py.
_NAMES: dict[Any, str] = {
    np.add: "add", np.subtract: "subtract", np.multiply: "multiply", np.divide: "divide",
    np.true_divide: "divide", np.maximum: "maximum", np.minimum: "minimum", np.max: "maximum",
    np.amax: "maximum", np.min: "minimum", np.amin: "minimum", np.sum: "add", np.prod: "multiply",
    np.power: "power", np.mod: "mod", np.equal: "equal", np.not_equal: "not_equal", np.greater: "greater",
    np.greater_equal: "greater_equal", np.less: "less", np.less_equal: "less_equal",
    np.logical_and: "logical_and", np.logical_or: "logical_or", np.logical_xor: "logical_xor",
    np.bitwise_and: "bitwise_and", np.bitwise_or: "bitwise_or", np.bitwise_xor: "bitwise_xor",
    np.left_shift: "left_shift", np.right_shift: "right_shift", np.exp: "exp", np.log: "log",
    np.sqrt: "sqrt", np.square: "square", np.tanh: "tanh", np.abs: "abs", np.sign: "sign", np.sin: "sin",
    np.cos: "cos", np.negative: "negative", np.reciprocal: "reciprocal",
}


def register(fn: Any, name: str) -> None:
    _NAMES[fn] = name


def op_name(op: Any, where: str) -> str:
    if isinstance(op, str):
        return op
    try:
        return _NAMES[op]
    except (KeyError, TypeError):
        label = getattr(op, "__name__", repr(op))
        raise unsupported(where, f"operator {label}") from None


def unary(name: str, where: str) -> Callable[[np.ndarray], np.ndarray]:
    try:
        return UNARY[name]
    except KeyError:
        raise unsupported(where, f"activation function {name}") from None


def binary(name: str, where: str) -> Callable[[Any, Any], np.ndarray]:
    try:
        return BINARY[name]
    except KeyError:
        raise unsupported(where, f"operator {name}") from None


def reducer(name: str, where: str) -> Callable[..., np.ndarray]:
    try:
        return REDUCE[name]
    except KeyError:
        raise unsupported(where, f"reduction with {name}") from None
