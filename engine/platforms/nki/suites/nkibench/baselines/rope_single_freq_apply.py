"""NKIBench baseline for rope_single_freq_apply: rotate the two halves of x by the cos/sin tables.

x is D x T (feature-major), the tables D/2 x T. Each half of the features sits on D/2 partitions (64 of
the 128 for D=128); columns are processed in chunks of up to 2048.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


def _even_tile(extent, limit):
    # The largest tile size <= limit that divides extent: every tile is full, no tail handling.
    for size in range(min(extent, limit), 0, -1):
        if extent % size == 0:
            return size
    return 1


@nki.jit
def kernel(x, freqs_cos, freqs_sin):
    dim, cols = x.shape
    half = dim // 2
    assert half <= nl.tile_size.pmax, f"rope: D/2={half} features must fit the 128 partitions"
    out = nl.ndarray((dim, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    tile_cols = _even_tile(cols, 2048)

    for j in nl.affine_range(cols // tile_cols):
        c0 = j * tile_cols
        first = nl.load(x[0:half, c0:c0 + tile_cols])
        second = nl.load(x[half:dim, c0:c0 + tile_cols])
        cos = nl.load(freqs_cos[0:half, c0:c0 + tile_cols])
        sin = nl.load(freqs_sin[0:half, c0:c0 + tile_cols])
        rotated_first = nl.subtract(nl.multiply(first, cos), nl.multiply(second, sin))
        rotated_second = nl.add(nl.multiply(first, sin), nl.multiply(second, cos))
        nl.store(out[0:half, c0:c0 + tile_cols], value=rotated_first)
        nl.store(out[half:dim, c0:c0 + tile_cols], value=rotated_second)
    return out
