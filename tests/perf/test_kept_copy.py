"""A repeated load the compiler skips (issue 19, spills.py): the SBUF copy an earlier load of the same HBM
region left there and the tile the repeat would write are the same bytes, counted once. Two kernels that differ
only in whether the third load repeats the first one's region: the repeat fits beside the other tile and is
skipped, so its kernel reads one tile less from HBM and is faster by about one tile of DMA."""

from __future__ import annotations

import pytest

from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf import estimate
from engine.platforms.nki.perf.costs import dma_engine_seconds
from engine.platforms.nki.simulator.trace import Engine, Trace
from tests.perf.builders import hbm, sbuf

TILE = 80 * 1024  # bytes per partition: two fit in the usable 172.8 KiB, three do not


def kernel(repeat: bool) -> Trace:
    """load x <- R; a = f(x); load y <- Q; load z <- R (repeat) or R2; b = g(z, y)."""
    tr = Trace()
    size = 128 * TILE
    regions = {name: hbm(tr, name, size) for name in ("R", "Q", "R2")}
    tiles = {name: sbuf(tr, name, TILE) for name in ("x", "y", "z")}
    small = {name: sbuf(tr, name, 1024) for name in ("a", "b")}

    def load(src: str, dst: str) -> None:
        tr.append(engine=Engine.DMA, op="load", dtype="float32", partitions=128, free_elems=TILE // 4,
                  hbm_read=size, sbuf_write=size,
                  accesses=((regions[src], False, 0, 1, 0, size), (tiles[dst], True, 0, 128, 0, TILE)))

    load("R", "x")
    tr.append(engine=Engine.VECTOR, op="tensor_reduce", dtype="float32", partitions=128, free_elems=TILE // 4,
              accesses=((tiles["x"], False, 0, 128, 0, TILE), (small["a"], True, 0, 128, 0, 1024)))
    load("Q", "y")
    load("R" if repeat else "R2", "z")
    tr.append(engine=Engine.VECTOR, op="tensor_tensor", dtype="float32", partitions=128, free_elems=TILE // 4,
              accesses=((tiles["z"], False, 0, 128, 0, TILE), (tiles["y"], False, 0, 128, 0, TILE),
                        (small["b"], True, 0, 128, 0, 1024)))
    return tr.freeze()


def test_a_skipped_repeat_load_is_one_copy_of_the_tile_not_two():
    capacity = TRN1.sbuf_bytes_per_partition * TRN1.sbuf_usable_fraction
    assert 2 * TILE < capacity < 3 * TILE
    fresh, repeated = estimate(kernel(repeat=False)), estimate(kernel(repeat=True))
    size = 128 * TILE
    assert fresh.profile["hbm_read_bytes"] == 3 * size
    # x's copy is z: with y that is two tiles, which fit; nothing is evicted and the repeat is skipped.
    assert repeated.profile["hbm_read_bytes"] == 2 * size
    assert repeated.profile["spill_save_bytes"] == 0
    one_tile_ms = dma_engine_seconds(size, 128, TRN1) / TRN1.dma_queues * 1e3
    assert fresh.latency_ms - repeated.latency_ms == pytest.approx(one_tile_ms, rel=0.25)
