"""NKIBench baseline for bmm_softmax: softmax over the last axis of lhs[b] @ rhs[b].

Per batch and block of 128 rows: transpose the lhs rows (K onto the partitions), compute the full score
row block [128, N] in SBUF one PSUM tile (up to 512 columns) at a time, then take the row max,
exp(score - max) on the Scalar Engine, the row sum and its reciprocal, scale and store.
"""

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
def kernel(lhs, rhs):
    batches, rows, depth = lhs.shape
    cols = rhs.shape[2]
    out = nl.ndarray((batches, rows, cols), dtype=lhs.dtype, buffer=nl.shared_hbm)
    tile_m = _even_tile(rows, nl.tile_size.gemm_stationary_fmax)
    tile_k = _even_tile(depth, nl.tile_size.pmax)
    tile_n = _even_tile(cols, nl.tile_size.gemm_moving_fmax)
    k_tiles = depth // tile_k

    for bi in nl.affine_range(batches):
        for m in nl.affine_range(rows // tile_m):
            m0 = m * tile_m
            lhs_rows = nl.load(lhs[bi, m0:m0 + tile_m, 0:depth])
            lhs_t = nl.ndarray((tile_k, k_tiles * tile_m), dtype=lhs.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(k_tiles):
                block = nisa.nc_transpose(lhs_rows[:, k * tile_k:(k + 1) * tile_k])
                lhs_t[:, k * tile_m:(k + 1) * tile_m] = nl.copy(block)

            scores = nl.ndarray((tile_m, cols), dtype=nl.float32, buffer=nl.sbuf)
            for n in nl.affine_range(cols // tile_n):
                n0 = n * tile_n
                acc = nl.zeros((tile_m, tile_n), dtype=nl.float32, buffer=nl.psum)
                for k in nl.affine_range(k_tiles):
                    rhs_tile = nl.load(rhs[bi, k * tile_k:(k + 1) * tile_k, n0:n0 + tile_n])
                    acc += nisa.nc_matmul(lhs_t[:, k * tile_m:(k + 1) * tile_m], rhs_tile)
                scores[:, n0:n0 + tile_n] = nl.copy(acc)

            row_max = nl.max(scores, axis=1, keepdims=True)
            exps = nisa.activation(op=nl.exp, data=scores, bias=nl.multiply(row_max, -1.0))
            inv_sum = nl.reciprocal(nl.sum(exps, axis=1, keepdims=True))
            nl.store(out[bi, m0:m0 + tile_m, 0:cols], value=nl.multiply(exps, inv_sum))
    return out
