"""NKIBench baseline for rmsnorm_matmul: divide each row of x by its RMS, then multiply by W.

Per block of 128 rows: load the x rows, compute sum(x^2)/K per row, scale the rows by its reciprocal
square root, transpose the normalized rows (K onto the partitions) and run the matmul over blocks of up
to 512 output columns, accumulating over K in PSUM.
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
def kernel(x, w):
    x = _as_matrix(x, 2)  # given as (M // 128, 128, K)
    w = _as_matrix(w, 2)  # given as (K // 128, 128, N)
    rows, depth = x.shape
    cols = w.shape[1]
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    tile_m = _even_tile(rows, nl.tile_size.gemm_stationary_fmax)
    tile_k = _even_tile(depth, nl.tile_size.pmax)
    tile_n = _even_tile(cols, nl.tile_size.gemm_moving_fmax)
    k_tiles = depth // tile_k

    for m in nl.affine_range(rows // tile_m):
        m0 = m * tile_m
        x_rows = nl.load(x[m0:m0 + tile_m, 0:depth])
        mean_square = nl.multiply(nl.sum(nl.square(x_rows), axis=1, keepdims=True), 1.0 / depth)
        normalized = nl.multiply(x_rows, nl.rsqrt(mean_square))

        norm_t = nl.ndarray((tile_k, k_tiles * tile_m), dtype=x.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(k_tiles):
            block = nisa.nc_transpose(normalized[:, k * tile_k:(k + 1) * tile_k])
            norm_t[:, k * tile_m:(k + 1) * tile_m] = nl.copy(block)

        for n in nl.affine_range(cols // tile_n):
            n0 = n * tile_n
            acc = nl.zeros((tile_m, tile_n), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_tiles):
                w_tile = nl.load(w[k * tile_k:(k + 1) * tile_k, n0:n0 + tile_n])
                acc += nisa.nc_matmul(norm_t[:, k * tile_m:(k + 1) * tile_m], w_tile)
            nl.store(out[m0:m0 + tile_m, n0:n0 + tile_n], value=nl.copy(acc, dtype=out.dtype))
    return out
