"""NKIBench baseline for lora: out = x @ W + (x @ A) @ B with a rank-R adapter (R <= 128).

Per block of 128 rows: load the x rows and transpose them (K onto the partitions); compute (x A)^T
directly as A^T x^T (A's tiles are the stationary operand), so it can serve as the stationary operand
of the second adapter product; then for each block of up to 512 output columns accumulate x W over K and
the adapter term (x A) B into the same PSUM tile and store it.
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
def kernel(x, w, a, b):
    x = _as_matrix(x, 3)  # given as (M // 512, 4, 128, K // 128, 128)
    w = _as_matrix(w, 2)  # given as (K // 128, 128, N)
    a = _as_matrix(a, 2)  # given as (K // 128, 128, R); b comes as it is, R x N
    rows, depth = x.shape
    cols = w.shape[1]
    rank = a.shape[1]
    assert rank <= nl.tile_size.pmax, f"lora: rank R={rank} must be <= 128 (one contraction tile)"
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    tile_m = _even_tile(rows, nl.tile_size.gemm_stationary_fmax)
    tile_k = _even_tile(depth, nl.tile_size.pmax)
    tile_n = _even_tile(cols, nl.tile_size.gemm_moving_fmax)
    k_tiles = depth // tile_k

    for m in nl.affine_range(rows // tile_m):
        m0 = m * tile_m
        x_rows = nl.load(x[m0:m0 + tile_m, 0:depth])
        x_t = nl.ndarray((tile_k, k_tiles * tile_m), dtype=x.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(k_tiles):
            block = nisa.nc_transpose(x_rows[:, k * tile_k:(k + 1) * tile_k])
            x_t[:, k * tile_m:(k + 1) * tile_m] = nl.copy(block)

        # (x A)^T = A^T x^T: [rank, tile_m], accumulated over K.
        xa_t_psum = nl.zeros((rank, tile_m), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(k_tiles):
            a_tile = nl.load(a[k * tile_k:(k + 1) * tile_k, 0:rank])
            xa_t_psum += nisa.nc_matmul(a_tile, x_t[:, k * tile_m:(k + 1) * tile_m])
        xa_t = nl.copy(xa_t_psum, dtype=x.dtype)

        for n in nl.affine_range(cols // tile_n):
            n0 = n * tile_n
            acc = nl.zeros((tile_m, tile_n), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_tiles):
                w_tile = nl.load(w[k * tile_k:(k + 1) * tile_k, n0:n0 + tile_n])
                acc += nisa.nc_matmul(x_t[:, k * tile_m:(k + 1) * tile_m], w_tile)
            b_tile = nl.load(b[0:rank, n0:n0 + tile_n])
            acc += nisa.nc_matmul(xa_t, b_tile)
            nl.store(out[m0:m0 + tile_m, n0:n0 + tile_n], value=nl.copy(acc, dtype=out.dtype))
    return out
