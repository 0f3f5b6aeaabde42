"""NKIBench baseline for matmul: out = lhs @ rhs on the Tensor Engine.

For each block of 128 output rows the kernel loads the lhs rows once and transposes them (K onto the
partitions, as nc_matmul's stationary operand needs); then for each block of up to 512 output columns it
streams the rhs tiles, accumulates over K in one PSUM tile, copies the result to SBUF and stores it.
The rhs is read again for every row block.
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


def _as_matrix(tensor, row_axes):
    # NKIBench hands matrices over in tiled shapes, e.g. (M // 128, 128, K): the first `row_axes` axes
    # number the rows and the others the columns, in row-major order, so a reshape of the HBM tensor (a view
    # of the same bytes, no data movement) gives the plain matrix back.
    rows, cols = 1, 1
    for extent in tensor.shape[:row_axes]:
        rows *= extent
    for extent in tensor.shape[row_axes:]:
        cols *= extent
    return tensor.reshape((rows, cols))


@nki.jit
def kernel(lhs, rhs):
    lhs = _as_matrix(lhs, 2)  # given as (M // 128, 128, K // 128, 128)
    rhs = _as_matrix(rhs, 2)  # given as (K // 128, 128, N)
    rows, depth = lhs.shape
    depth_rhs, cols = rhs.shape
    assert depth == depth_rhs, f"matmul: lhs is {lhs.shape} but rhs is {rhs.shape}"
    out = nl.ndarray((rows, cols), dtype=lhs.dtype, buffer=nl.shared_hbm)
    tile_m = _even_tile(rows, nl.tile_size.gemm_stationary_fmax)
    tile_k = _even_tile(depth, nl.tile_size.pmax)
    tile_n = _even_tile(cols, nl.tile_size.gemm_moving_fmax)
    k_tiles = depth // tile_k

    for m in nl.affine_range(rows // tile_m):
        m0 = m * tile_m
        lhs_rows = nl.load(lhs[m0:m0 + tile_m, 0:depth])
        # lhs_t[:, k*tile_m:(k+1)*tile_m] holds block k of lhs rows transposed: [tile_k, tile_m].
        lhs_t = nl.ndarray((tile_k, k_tiles * tile_m), dtype=lhs.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(k_tiles):
            block = nisa.nc_transpose(lhs_rows[:, k * tile_k:(k + 1) * tile_k])
            lhs_t[:, k * tile_m:(k + 1) * tile_m] = nl.copy(block)

        for n in nl.affine_range(cols // tile_n):
            n0 = n * tile_n
            acc = nl.zeros((tile_m, tile_n), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_tiles):
                rhs_tile = nl.load(rhs[k * tile_k:(k + 1) * tile_k, n0:n0 + tile_n])
                acc += nisa.nc_matmul(lhs_t[:, k * tile_m:(k + 1) * tile_m], rhs_tile)
            nl.store(out[m0:m0 + tile_m, n0:n0 + tile_n], value=nl.copy(acc, dtype=out.dtype))
    return out
