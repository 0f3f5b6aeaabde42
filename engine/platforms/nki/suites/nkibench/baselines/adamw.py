"""NKIBench baseline for adamw: one AdamW step (t=1) on theta, elementwise on the Vector Engine.

Rows go to partitions (the largest tile <= 128 that divides M: 96 for M=10944), columns in chunks of up
to 1024. Each step of the update is its own instruction; nothing is fused.
"""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

LEARNING_RATE = 1e-3
BETA1 = 0.9
BETA2 = 0.999
EPSILON = 1e-8
WEIGHT_DECAY = 0.01
STEP = 1


def _even_tile(extent, limit):
    # The largest tile size <= limit that divides extent: every tile is full, no tail handling.
    for size in range(min(extent, limit), 0, -1):
        if extent % size == 0:
            return size
    return 1


@nki.jit
def kernel(theta, g, m, v):
    rows, cols = theta.shape
    out = nl.ndarray((rows, cols), dtype=theta.dtype, buffer=nl.shared_hbm)
    tile_rows = _even_tile(rows, nl.tile_size.pmax)
    tile_cols = _even_tile(cols, 1024)
    # Bias corrections for step t, folded into the constant factors.
    m_scale = LEARNING_RATE / (1.0 - BETA1**STEP)
    v_scale = 1.0 / (1.0 - BETA2**STEP)

    for i in nl.affine_range(rows // tile_rows):
        for j in nl.affine_range(cols // tile_cols):
            r0 = i * tile_rows
            c0 = j * tile_cols
            theta_t = nl.load(theta[r0:r0 + tile_rows, c0:c0 + tile_cols])
            g_t = nl.load(g[r0:r0 + tile_rows, c0:c0 + tile_cols])
            m_t = nl.load(m[r0:r0 + tile_rows, c0:c0 + tile_cols])
            v_t = nl.load(v[r0:r0 + tile_rows, c0:c0 + tile_cols])

            decayed = nl.multiply(theta_t, 1.0 - LEARNING_RATE * WEIGHT_DECAY)
            m_new = nl.add(nl.multiply(m_t, BETA1), nl.multiply(g_t, 1.0 - BETA1))
            g_sq = nl.multiply(g_t, g_t)
            v_new = nl.add(nl.multiply(v_t, BETA2), nl.multiply(g_sq, 1.0 - BETA2))
            denom = nl.add(nl.sqrt(nl.multiply(v_new, v_scale)), EPSILON)
            update = nl.divide(nl.multiply(m_new, m_scale), denom)
            nl.store(out[r0:r0 + tile_rows, c0:c0 + tile_cols], value=nl.subtract(decayed, update))
    return out
