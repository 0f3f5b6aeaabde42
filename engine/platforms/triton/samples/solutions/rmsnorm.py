"""RMSNorm, several rows per program (FlashInfer-Bench rmsnorm_h*): y = x * rsqrt(mean(x^2) + 1e-6) * w."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_rows(x_ptr, w_ptr, y_ptr, rows, stride_x, stride_y, eps,
                  HIDDEN: tl.constexpr, BLOCK_H: tl.constexpr, ROWS: tl.constexpr):
    row = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    col = tl.arange(0, BLOCK_H)
    row_ok = row < rows
    col_ok = col < HIDDEN
    mask = row_ok[:, None] & col_ok[None, :]
    x = tl.load(x_ptr + row[:, None] * stride_x + col[None, :], mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + col, mask=col_ok, other=0.0).to(tl.float32)
    scale = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / HIDDEN + eps)
    y = x * scale[:, None] * w[None, :]
    tl.store(y_ptr + row[:, None] * stride_y + col[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


def run(hidden_states, weight):
    rows, hidden = hidden_states.shape
    x = hidden_states.contiguous()
    out = torch.empty_like(x)
    block_h = triton.next_power_of_2(hidden)
    rows_per_program = max(1, min(16, 2048 // block_h))  # about 2K elements per program
    grid = (triton.cdiv(rows, rows_per_program),)
    _rmsnorm_rows[grid](x, weight.contiguous(), out, rows, x.stride(0), out.stride(0), 1e-6,
                        HIDDEN=hidden, BLOCK_H=block_h, ROWS=rows_per_program, num_warps=4)
    return out
