"""NKIBench baseline for bmm: out[b] = lhs[b] @ rhs[b] on the Tensor Engine, one batch at a time.

Per batch and block of 128 output rows: load the lhs rows, transpose them (K onto the partitions), then
for each block of up to 512 output columns accumulate over K in PSUM and store. With K=64 the contraction
uses half of the PE rows; the rhs tiles are read again for every row block.
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
    batches_rhs, depth_rhs, cols = rhs.shape
    assert (batches, depth) == (batches_rhs, depth_rhs), f"bmm: lhs is {lhs.shape} but rhs is {rhs.shape}"
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

            for n in nl.affine_range(cols // tile_n):
                n0 = n * tile_n
                acc = nl.zeros((tile_m, tile_n), dtype=nl.float32, buffer=nl.psum)
                for k in nl.affine_range(k_tiles):
                    rhs_tile = nl.load(rhs[bi, k * tile_k:(k + 1) * tile_k, n0:n0 + tile_n])
                    acc += nisa.nc_matmul(lhs_t[:, k * tile_m:(k + 1) * tile_m], rhs_tile)
                nl.store(out[bi, m0:m0 + tile_m, n0:n0 + tile_n], value=nl.copy(acc, dtype=out.dtype))
    return out
