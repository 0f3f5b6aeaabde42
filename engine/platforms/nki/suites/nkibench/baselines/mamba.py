"""NKIBench baseline for mamba: the selective scan with the Vector Engine's tensor_tensor_scan.

Channels go to partitions (up to 128 per tile), time runs along the free axis in chunks of up to 2048
steps. For each state s the kernel forms exp(delta * A[:, s]) and delta * u * B[s], scans the
recurrence, and accumulates C[s] * h into the output. The state carries from one time chunk to the next.
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
def kernel(delta, u, a, b, c):
    channels, steps = delta.shape
    states = a.shape[1]
    out = nl.ndarray((channels, steps), dtype=delta.dtype, buffer=nl.shared_hbm)
    tile_ch = _even_tile(channels, nl.tile_size.pmax)
    tile_t = _even_tile(steps, 2048)

    for ct in nl.affine_range(channels // tile_ch):
        c0 = ct * tile_ch
        a_tile = nl.load(a[c0:c0 + tile_ch, 0:states])
        # Last state of every scan so far, one column per state: the carry between time chunks.
        carry = nl.zeros((tile_ch, states), dtype=nl.float32, buffer=nl.sbuf)

        for tt in nl.sequential_range(steps // tile_t):
            t0 = tt * tile_t
            delta_t = nl.load(delta[c0:c0 + tile_ch, t0:t0 + tile_t])
            u_t = nl.load(u[c0:c0 + tile_ch, t0:t0 + tile_t])
            delta_u = nl.multiply(delta_t, u_t)
            acc = nl.zeros((tile_ch, tile_t), dtype=nl.float32, buffer=nl.sbuf)

            for s in range(states):
                decay = nisa.activation(op=nl.exp, data=delta_t, scale=a_tile[:, s:s + 1])
                b_row = nl.load(b[s:s + 1, t0:t0 + tile_t])
                drive = nl.multiply(delta_u, b_row.broadcast_to((tile_ch, tile_t)))
                h = nisa.tensor_tensor_scan(
                    decay, drive, initial=carry[:, s:s + 1], op0=nl.multiply, op1=nl.add
                )
                carry[:, s:s + 1] = nl.copy(h[:, tile_t - 1:tile_t])
                c_row = nl.load(c[s:s + 1, t0:t0 + tile_t])
                acc = nl.add(acc, nl.multiply(h, c_row.broadcast_to((tile_ch, tile_t))))

            nl.store(out[c0:c0 + tile_ch, t0:t0 + tile_t], value=acc)
    return out
