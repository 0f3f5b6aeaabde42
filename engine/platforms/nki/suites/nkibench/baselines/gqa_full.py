"""NKIBench baseline for gqa_full: grouped-query attention with a full (non-causal) softmax.

q is B x N x QH x D, k and v are B x N x KH x D, the output B x QH x N x D; query head h reads key/value
head h // (QH // KH). Per key/value head the kernel keeps K^T (D x N, built with Tensor Engine
transposes) and V (in 128-row blocks) in SBUF. Per query head and block of up to 128 queries it computes
the full score row block [128, N] (scaled by 1/sqrt(D)), exp(score - row max), the row sums, then P V
over 128-key blocks (transposing each block of P) and finally divides by the row sums.
"""

import math

import neuronxcc.nki as nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


def _even_tile(extent, limit):
    # The largest tile size <= limit that divides extent: every tile is full, no tail handling.
    for size in range(min(extent, limit), 0, -1):
        if extent % size == 0:
            return size
    return 1


@nki.jit
def kernel(q, k, v):
    # Given as q (B * N // 128, 128, QH, D), k (B, N // 512, 4, 128, KH, D), v (B, N // 128, 128, KH * D):
    # reshapes of the HBM tensors (views of the same bytes) give back B x N x heads x D.
    batches, blocks, tiles, block_rows, kv_heads, dim = k.shape
    seq = blocks * tiles * block_rows
    q_heads = q.shape[2]
    q = q.reshape((batches, seq, q_heads, dim))
    k = k.reshape((batches, seq, kv_heads, dim))
    v = v.reshape((batches, seq, kv_heads, dim))
    assert dim <= nl.tile_size.pmax, f"gqa_full: head dim D={dim} must be <= 128 (one contraction tile)"
    assert q_heads % kv_heads == 0, f"gqa_full: QH={q_heads} is not a multiple of KH={kv_heads}"
    group = q_heads // kv_heads
    scale = 1.0 / math.sqrt(dim)
    out = nl.ndarray((batches, q_heads, seq, dim), dtype=q.dtype, buffer=nl.shared_hbm)
    tile_q = _even_tile(seq, nl.tile_size.gemm_stationary_fmax)  # queries per block
    tile_kv = _even_tile(seq, nl.tile_size.pmax)  # keys per transpose / contraction block
    tile_s = _even_tile(seq, nl.tile_size.gemm_moving_fmax)  # score columns per PSUM tile
    kv_tiles = seq // tile_kv

    for bi in nl.affine_range(batches):
        for kh in nl.affine_range(kv_heads):
            k_t = nl.ndarray((dim, seq), dtype=k.dtype, buffer=nl.sbuf)
            v_blocks = nl.ndarray((tile_kv, kv_tiles * dim), dtype=v.dtype, buffer=nl.sbuf)
            for t in nl.affine_range(kv_tiles):
                t0 = t * tile_kv
                k_rows = nl.load(k[bi, t0:t0 + tile_kv, kh, 0:dim])
                k_t[:, t0:t0 + tile_kv] = nl.copy(nisa.nc_transpose(k_rows))
                v_blocks[:, t * dim:(t + 1) * dim] = nl.load(v[bi, t0:t0 + tile_kv, kh, 0:dim])

            for r in nl.affine_range(group):
                head = kh * group + r
                for qt in nl.affine_range(seq // tile_q):
                    q0 = qt * tile_q
                    q_rows = nl.load(q[bi, q0:q0 + tile_q, head, 0:dim])
                    q_t = nl.copy(nisa.nc_transpose(q_rows))

                    scores = nl.ndarray((tile_q, seq), dtype=nl.float32, buffer=nl.sbuf)
                    for j in nl.affine_range(seq // tile_s):
                        s0 = j * tile_s
                        product = nisa.nc_matmul(q_t, k_t[:, s0:s0 + tile_s])
                        scores[:, s0:s0 + tile_s] = nl.multiply(product, scale)

                    row_max = nl.max(scores, axis=1, keepdims=True)
                    probs = nisa.activation(op=nl.exp, data=scores, bias=nl.multiply(row_max, -1.0))
                    inv_sum = nl.reciprocal(nl.sum(probs, axis=1, keepdims=True))

                    acc = nl.zeros((tile_q, dim), dtype=nl.float32, buffer=nl.psum)
                    for t in nl.affine_range(kv_tiles):
                        probs_t = nl.copy(nisa.nc_transpose(probs[:, t * tile_kv:(t + 1) * tile_kv]))
                        acc += nisa.nc_matmul(probs_t, v_blocks[:, t * dim:(t + 1) * dim])
                    nl.store(out[bi, head, q0:q0 + tile_q, 0:dim], value=nl.multiply(acc, inv_sum))
    return out
