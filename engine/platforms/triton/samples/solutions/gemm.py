"""C = A @ B.T (FlashInfer-Bench gemm_n*_k*: A [M, K], B [N, K]): tiled, grouped program order for L2 reuse.
On a GPU: 128x256x64 tiles, 8 warps, 3 stages (a Hopper-friendly fp16 configuration); on the CPU
interpreter: small tiles, for speed."""

import torch
import triton
import triton.language as tl


@triton.jit
def _gemm_nt(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    group = pid // per_group
    first_m = group * GROUP_M
    group_m = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_m
    pid_n = (pid % per_group) // group_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b = b_ptr + rn[None, :] * stride_bn + rk[:, None] * stride_bk
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_ok = rk < K - k * BLOCK_K
        a_tile = tl.load(a, mask=(rm[:, None] < M) & k_ok[None, :], other=0.0)
        b_tile = tl.load(b, mask=(rn[None, :] < N) & k_ok[:, None], other=0.0)
        acc = tl.dot(a_tile, b_tile, acc=acc)
        a += BLOCK_K * stride_ak
        b += BLOCK_K * stride_bk
    c = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def run(A, B):
    M, K = A.shape
    N = B.shape[0]
    C = torch.empty((M, N), dtype=A.dtype, device=A.device)
    if A.is_cuda:
        bm, bn, bk, warps, stages = 128, 256, 64, 8, 3
    else:
        bm, bn, bk, warps, stages = 32, 32, 32, 4, 1
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    _gemm_nt[grid](A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1), C.stride(0), C.stride(1),
                   BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_warps=warps, num_stages=stages)
    return C
