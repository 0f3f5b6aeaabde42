"""NKIBench baseline for add_rmsnorm_matmul: (x + z), RMSNorm with gain g and eps, then @ W.

Per block of 128 rows: load x and z rows, add, compute the mean square per row, scale by
1/sqrt(mean + eps) and by the gain (loaded once, broadcast across partitions), transpose the result
(K onto the partitions) and run the matmul over blocks of up to 512 output columns.
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
def kernel(x, w, eps, z, g):
    rows, depth = x.shape
    cols = w.shape[1]
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    tile_m = _even_tile(rows, nl.tile_size.gemm_stationary_fmax)
    tile_k = _even_tile(depth, nl.tile_size.pmax)
    tile_n = _even_tile(cols, nl.tile_size.gemm_moving_fmax)
    k_tiles = depth // tile_k

    gain = nl.load(g.reshape((1, depth)))

    for m in nl.affine_range(rows // tile_m):
        m0 = m * tile_m
        y = nl.add(nl.load(x[m0:m0 + tile_m, 0:depth]), nl.load(z[m0:m0 + tile_m, 0:depth]))
        mean_square = nl.multiply(nl.sum(nl.square(y), axis=1, keepdims=True), 1.0 / depth)
        scaled = nl.multiply(y, nl.rsqrt(nl.add(mean_square, eps)))
        normalized = nl.multiply(scaled, gain.broadcast_to((tile_m, depth)))

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
