"""NKIBench baseline for swiglu: out = (silu(x @ W_gate) * (x @ W_up)) @ W_down.

Per block of 128 rows: load and transpose the x rows (K onto the partitions); for each block of up to
512 hidden columns compute the gate and up projections in PSUM and write silu(gate) * up into a full
hidden row in SBUF; transpose the hidden row in 128-column blocks (N onto the partitions) and run the
down projection over blocks of up to 512 output columns. Weights are read again for every row block.
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
def kernel(x, w_up, w_down, w_gate):
    x = _as_matrix(x, 3)  # given as (M // 512, 4, 128, K // 128, 128)
    w_up = _as_matrix(w_up, 2)  # given as (K // 128, 128, N)
    w_down = _as_matrix(w_down, 2)  # given as (N // 128, 128, K)
    w_gate = _as_matrix(w_gate, 2)  # given as (K // 128, 128, N)
    rows, depth = x.shape
    hidden = w_up.shape[1]
    out = nl.ndarray((rows, depth), dtype=x.dtype, buffer=nl.shared_hbm)
    tile_m = _even_tile(rows, nl.tile_size.gemm_stationary_fmax)
    tile_k = _even_tile(depth, nl.tile_size.pmax)  # contraction over K (up and gate)
    tile_h = _even_tile(hidden, nl.tile_size.pmax)  # contraction over N (down)
    tile_n = _even_tile(hidden, nl.tile_size.gemm_moving_fmax)  # hidden columns per PSUM tile
    tile_o = _even_tile(depth, nl.tile_size.gemm_moving_fmax)  # output columns per PSUM tile
    k_tiles = depth // tile_k
    h_tiles = hidden // tile_h

    for m in nl.affine_range(rows // tile_m):
        m0 = m * tile_m
        x_rows = nl.load(x[m0:m0 + tile_m, 0:depth])
        x_t = nl.ndarray((tile_k, k_tiles * tile_m), dtype=x.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(k_tiles):
            block = nisa.nc_transpose(x_rows[:, k * tile_k:(k + 1) * tile_k])
            x_t[:, k * tile_m:(k + 1) * tile_m] = nl.copy(block)

        act = nl.ndarray((tile_m, hidden), dtype=nl.float32, buffer=nl.sbuf)
        for n in nl.affine_range(hidden // tile_n):
            n0 = n * tile_n
            gate = nl.zeros((tile_m, tile_n), dtype=nl.float32, buffer=nl.psum)
            up = nl.zeros((tile_m, tile_n), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_tiles):
                stationary = x_t[:, k * tile_m:(k + 1) * tile_m]
                gate += nisa.nc_matmul(stationary, nl.load(w_gate[k * tile_k:(k + 1) * tile_k, n0:n0 + tile_n]))
                up += nisa.nc_matmul(stationary, nl.load(w_up[k * tile_k:(k + 1) * tile_k, n0:n0 + tile_n]))
            act[:, n0:n0 + tile_n] = nl.multiply(nl.silu(gate), up)

        act_t = nl.ndarray((tile_h, h_tiles * tile_m), dtype=nl.float32, buffer=nl.sbuf)
        for h in nl.affine_range(h_tiles):
            block = nisa.nc_transpose(act[:, h * tile_h:(h + 1) * tile_h])
            act_t[:, h * tile_m:(h + 1) * tile_m] = nl.copy(block)

        for o in nl.affine_range(depth // tile_o):
            o0 = o * tile_o
            acc = nl.zeros((tile_m, tile_o), dtype=nl.float32, buffer=nl.psum)
            for h in nl.affine_range(h_tiles):
                w_tile = nl.load(w_down[h * tile_h:(h + 1) * tile_h, o0:o0 + tile_o])
                acc += nisa.nc_matmul(act_t[:, h * tile_m:(h + 1) * tile_m], w_tile)
            nl.store(out[m0:m0 + tile_m, o0:o0 + tile_o], value=nl.copy(acc, dtype=out.dtype))
    return out
