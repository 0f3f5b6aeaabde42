"""Small NKI kernels (neuronxcc.nki style) for the performance model's direction tests.

Each pair computes the same thing two ways; the tests check the model ranks them the way hardware would.
They use the simulator's modules directly (the same objects `engine.platforms.nki.simulator.install()` exposes as
`neuronxcc.nki.language` / `neuronxcc.nki.isa`).
"""

from __future__ import annotations

import numpy as np

from engine.platforms.nki.simulator import jit
from engine.platforms.nki.simulator.semantics import isa as nisa
from engine.platforms.nki.simulator.semantics import language as nl

ROWS, COLS = 128, 16384  # 8 MiB of fp32: large enough that DMA and engine rates, not start-up, dominate


RESIDENT_COLS = 65536  # 32 tiles of 8 KiB per partition: 256 KiB, over trn1's 192 KiB SBUF partition


def _exp_kernel(tile: int, *, sequential: bool = False, round_trip: bool = False, extra_ops: int = 0,
                cols: int = COLS, store_repeats: int = 0):
    loop = nl.sequential_range if sequential else nl.affine_range

    @jit
    def kernel(x):
        out = nl.ndarray((ROWS, cols), dtype=np.float32, buffer=nl.shared_hbm)
        scratch = nl.ndarray((ROWS, cols), dtype=np.float32, buffer=nl.shared_hbm)
        for j in loop(cols // tile):
            t = nl.load(x[0:ROWS, j * tile:(j + 1) * tile])
            if round_trip:  # through HBM and back: twice the HBM traffic for the same result
                nl.store(scratch[0:ROWS, j * tile:(j + 1) * tile], value=t)
                t = nl.load(scratch[0:ROWS, j * tile:(j + 1) * tile])
            y = nisa.activation(op=nl.exp, data=t)
            for _ in range(extra_ops):  # multiply by one: redundant engine work
                y = nisa.tensor_scalar(data=y, op0=nl.multiply, operand0=1.0, engine=nisa.vector_engine)
            if store_repeats:  # the same store again and again, one after another
                for _ in nl.sequential_range(store_repeats):
                    nl.store(out[0:ROWS, j * tile:(j + 1) * tile], value=y)
            else:
                nl.store(out[0:ROWS, j * tile:(j + 1) * tile], value=y)
        return out

    return kernel


def exp_stores_repeated(repeats: int, tile: int = 2048):
    """exp_streaming with each tile's store inside a sequential_range of `repeats` (tests/scale's slow kernel)."""
    return _exp_kernel(tile, store_repeats=repeats)


def exp_streaming(tile: int = 2048, cols: int = COLS):
    return _exp_kernel(tile, cols=cols)


def exp_sequential(tile: int = 2048):
    return _exp_kernel(tile, sequential=True)


def exp_round_trip(tile: int = 2048):
    return _exp_kernel(tile, round_trip=True)


def exp_redundant(tile: int = 2048):
    return _exp_kernel(tile, round_trip=True, extra_ops=3)


def exp_resident(tile: int = 2048, cols: int = RESIDENT_COLS):
    """exp of every tile first, all kept in SBUF, stored at the end (a Python loop: unrolled, one scope)."""

    @jit
    def kernel(x):
        out = nl.ndarray((ROWS, cols), dtype=np.float32, buffer=nl.shared_hbm)
        results = []
        for j in range(cols // tile):
            t = nl.load(x[0:ROWS, j * tile:(j + 1) * tile])
            results.append(nisa.activation(op=nl.exp, data=t))
        for j in range(cols // tile):
            nl.store(out[0:ROWS, j * tile:(j + 1) * tile], value=results[j])
        return out

    return kernel


def inputs(cols: int = COLS) -> list[np.ndarray]:
    return [np.random.default_rng(0).standard_normal((ROWS, cols)).astype(np.float32)]
