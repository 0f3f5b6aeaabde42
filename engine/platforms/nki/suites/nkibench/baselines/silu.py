"""NKIBench baseline for silu: y = x * sigmoid(x), one Scalar Engine activation per tile.

Rows go to partitions (up to 128 per tile), columns are processed in chunks of up to 2048 elements;
each tile is loaded, activated and stored. Tile sizes divide the shape exactly, so there is no tail.
"""

import neuronxcc.nki as nki
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
def kernel(x):
    x = _as_matrix(x, 2)  # given as (128, M // 128, N)
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    tile_rows = _even_tile(rows, nl.tile_size.pmax)
    tile_cols = _even_tile(cols, 2048)

    for i in nl.affine_range(rows // tile_rows):
        for j in nl.affine_range(cols // tile_cols):
            r0 = i * tile_rows
            c0 = j * tile_cols
            tile = nl.load(x[r0:r0 + tile_rows, c0:c0 + tile_cols])
            nl.store(out[r0:r0 + tile_rows, c0:c0 + tile_cols], value=nl.silu(tile))
    return out
