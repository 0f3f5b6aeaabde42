"""Small Triton solutions in FlashInfer-Bench style (`run(inputs...) -> output`) with torch references and
inputs, for the Triton rewrite catalog's tests. Sizes are deliberately not multiples of the blocks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

ADD = '''import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def run(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = 256
    grid = (triton.cdiv(n, BLOCK),)
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=BLOCK, num_warps=4)
    return out
'''

ROW_SUMSQ = '''import torch
import triton
import triton.language as tl


@triton.jit
def row_sumsq_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0)
        acc += x * x
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


def run(x):
    rows, cols = x.shape
    out = torch.empty(rows, dtype=torch.float32, device=x.device)
    row_sumsq_kernel[(rows,)](x, out, cols, x.stride(0), BLOCK=64)
    return out
'''

SCALE_AUTOTUNED = '''import torch
import triton
import triton.language as tl


@triton.autotune(configs=[triton.Config({'BLOCK_SIZE': 64}, num_warps=2),
                          triton.Config({'BLOCK_SIZE': 128}, num_warps=4)], key=['n_elements'])
@triton.jit
def scale_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < n_elements
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


def run(x):
    out = torch.empty_like(x)
    n = x.numel()
    grid = lambda meta: (triton.cdiv(n, meta['BLOCK_SIZE']),)
    scale_kernel[grid](x, out, n)
    return out
'''

# One program per row, the block covering the row; no masks: correct only when the row is exactly BLOCK
# long. Its loads read the next row (and its stores write it) when the row is shorter.
RMSNORM_UNMASKED = '''import torch
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, out_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols)
    w = tl.load(w_ptr + cols)
    ms = tl.sum(x * x, axis=0) / n_cols
    y = x * tl.rsqrt(ms + eps) * w
    tl.store(out_ptr + row * n_cols + cols, y)


def run(x, weight):
    rows, n = x.shape
    out = torch.empty_like(x)
    rmsnorm_kernel[(rows,)](x, weight, out, n, 1e-6, BLOCK=128)
    return out
'''
RMSNORM_MASKED = RMSNORM_UNMASKED.replace(
    "x = tl.load(x_ptr + row * n_cols + cols)", "x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)"
).replace("w = tl.load(w_ptr + cols)", "w = tl.load(w_ptr + cols, mask=cols < n_cols, other=0.0)").replace(
    "tl.store(out_ptr + row * n_cols + cols, y)", "tl.store(out_ptr + row * n_cols + cols, y, mask=cols < n_cols)")


def _rmsnorm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 1e-6) * weight


@dataclass(frozen=True)
class Case:
    source: str
    reference: Callable[..., torch.Tensor]
    inputs: Callable[[torch.Generator], list[tuple[torch.Tensor, ...]]]  # one tuple per workload


def _randn(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=gen, dtype=torch.float32)


CASES: dict[str, Case] = {
    "add": Case(ADD, lambda x, y: x + y,
                lambda g: [(_randn(g, n), _randn(g, n)) for n in (1000, 3000)]),
    "row_sumsq": Case(ROW_SUMSQ, lambda x: (x * x).sum(dim=1),
                      lambda g: [(_randn(g, 5, n),) for n in (200, 65)]),
    "scale_autotuned": Case(SCALE_AUTOTUNED, lambda x: x * 2.0,
                            lambda g: [(_randn(g, n),) for n in (1000, 300)]),
    "rmsnorm_masked": Case(RMSNORM_MASKED, _rmsnorm,
                           lambda g: [(_randn(g, 4, n), _randn(g, n)) for n in (128, 96)]),
}

# The same kernel in FlashInfer-Bench's destination-passing style (`run(inputs..., outputs...)`): the harness
# owns the output buffer too, so a store past its end is caught by the guard around it.
RMSNORM_UNMASKED_DPS = RMSNORM_UNMASKED.replace("def run(x, weight):", "def run(x, weight, out):").replace(
    "    out = torch.empty_like(x)\n", "").replace("    return out\n", "")
