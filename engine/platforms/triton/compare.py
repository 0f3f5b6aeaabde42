"""Comparing a kernel's outputs with the reference's, with FlashInfer-Bench's tolerances.

The rule is `torch.allclose`'s: |out - ref| <= atol + rtol * |ref| elementwise, and out is NaN/inf exactly where
ref is. The tolerances are FlashInfer-Bench's `BenchmarkConfig` defaults (rtol = atol = 1e-2) for 16-bit and
8-bit floats; float32 outputs get 1e-3 (ours: a float32 reference and a float32 kernel differ by summation
order, ~1e-6 relative, and 1e-3 still refuses a kernel computing in bf16); integer and bool outputs must match
exactly. An output left as the NaN sentinel fails the "non-finite exactly where the reference is" rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

TOLERANCES: dict[str, tuple[float, float]] = {  # dtype -> (atol, rtol)
    "float16": (1e-2, 1e-2), "bfloat16": (1e-2, 1e-2), "float8_e4m3fn": (1e-2, 1e-2), "float8_e5m2": (1e-2, 1e-2),
    "float32": (1e-3, 1e-3), "float64": (1e-3, 1e-3),
}


@dataclass(frozen=True)
class OutputComparison:
    name: str
    ok: bool
    max_abs_error: float | None  # None where not comparable (shape or finiteness mismatch)
    max_rel_error: float | None
    mismatched: int  # elements outside tolerance
    message: str = ""


def compare_output(name: str, out: torch.Tensor, ref: torch.Tensor, dtype: str) -> OutputComparison:
    if tuple(out.shape) != tuple(ref.shape):
        return OutputComparison(name, False, None, None, ref.numel(),
                                f"{name}: shape {list(out.shape)}, expected {list(ref.shape)}")
    out, ref = out.detach(), ref.detach().to(out.device)  # compared where they are (a GPU: fast)
    if dtype not in TOLERANCES:
        same = bool(torch.equal(out, ref))
        mismatched = 0 if same else int((out != ref).sum())
        return OutputComparison(name, same, 0.0 if same else None, 0.0 if same else None, mismatched,
                                "" if same else f"{name}: {mismatched} of {ref.numel()} values differ (exact match required)")
    atol, rtol = TOLERANCES[dtype]
    x, y = (out.double(), ref.double()) if dtype == "float64" else (out.float(), ref.float())
    finite_x, finite_y = torch.isfinite(x), torch.isfinite(y)
    inf_y = torch.isinf(y)
    same_nan = torch.equal(torch.isnan(x), torch.isnan(y))
    same_inf = torch.equal(torch.isinf(x), inf_y) and torch.equal(x[inf_y], y[inf_y])
    if not (same_nan and same_inf):
        bad = int((finite_x != finite_y).sum())
        nans = int(torch.isnan(x).sum())
        return OutputComparison(name, False, None, None, bad,
                                f"{name}: {bad} of {ref.numel()} values non-finite where the reference is finite "
                                f"or the reverse ({nans} NaN: an output never written stays NaN)")
    diff = (x - y).abs()[finite_y]
    scale = y.abs()[finite_y]
    mismatched = int((diff > atol + rtol * scale).sum())
    max_abs = float(diff.max()) if diff.numel() else 0.0
    max_rel = float((diff / scale.clamp_min(1e-12)).max()) if diff.numel() else 0.0
    message = "" if mismatched == 0 else (f"{name}: {mismatched} of {ref.numel()} values outside atol={atol}, "
                                          f"rtol={rtol} (max abs error {max_abs:.3g})")
    return OutputComparison(name, mismatched == 0, max_abs, max_rel, mismatched, message)


def compare_outputs(names: Sequence[str], dtypes: Sequence[str], outputs: Sequence[torch.Tensor],
                    expected: Sequence[torch.Tensor]) -> list[OutputComparison]:
    return [compare_output(n, o, r, d) for n, d, o, r in zip(names, dtypes, outputs, expected, strict=False)]
