"""The model rewards what real hardware rewards: the issue's direction list, on hand-built kernels."""

from __future__ import annotations

from engine.platforms.nki.perf import estimate
from engine.platforms.nki.simulator.trace import LoopKind
from tests.perf.builders import streaming_kernel


def test_half_the_hbm_traffic_is_predicted_faster():
    twice = estimate(streaming_kernel(32, 2048, loads_per_tile=2))
    once = estimate(streaming_kernel(32, 2048, loads_per_tile=1))
    assert once.profile["hbm_read_bytes"] * 2 == twice.profile["hbm_read_bytes"]
    assert once.latency_ms < 0.85 * twice.latency_ms


def test_dma_overlapped_with_compute_is_predicted_faster_than_serialized():
    overlapped = estimate(streaming_kernel(32, 2048, kind=LoopKind.AFFINE, ops_per_tile=3))
    serialized = estimate(streaming_kernel(32, 2048, kind=LoopKind.SEQUENTIAL, ops_per_tile=3))
    assert overlapped.latency_ms < serialized.latency_ms


def test_fewer_larger_instructions_are_predicted_faster():
    # Same data (64 KiB per partition), in 512-element tiles vs 32-element tiles.
    large = estimate(streaming_kernel(32, 512, ops_per_tile=4))
    small = estimate(streaming_kernel(512, 32, ops_per_tile=4))
    assert large.profile["hbm_read_bytes"] == small.profile["hbm_read_bytes"]
    assert large.latency_ms < 0.5 * small.latency_ms


def test_a_working_set_that_fits_sbuf_is_predicted_faster_than_one_that_spills():
    # 96 tiles of 8 KiB per partition kept resident = 768 KiB > 192 KiB per partition: it spills.
    spilling = estimate(streaming_kernel(96, 2048, resident=True))
    streaming = estimate(streaming_kernel(96, 2048, resident=False))
    assert spilling.profile["spill_save_bytes"] > 0
    assert streaming.profile["spill_save_bytes"] == 0
    assert streaming.latency_ms < spilling.latency_ms


def test_a_deliberately_redundant_kernel_is_predicted_slower():
    lean = estimate(streaming_kernel(32, 2048, ops_per_tile=2))
    redundant = estimate(streaming_kernel(32, 2048, ops_per_tile=6, loads_per_tile=2))
    assert redundant.latency_ms > 1.2 * lean.latency_ms


def test_an_input_tile_evicted_under_pressure_is_fetched_again_not_spilled():
    # Loaded tiles kept until the end: clean copies of HBM, so the model re-reads them instead of saving.
    from engine.platforms.nki.simulator.trace import Engine, Trace
    from tests.perf.builders import hbm, sbuf

    tr = Trace()
    tiles, tile_bytes = 64, 8192
    x = hbm(tr, "x", tiles * 128 * tile_bytes)
    big = sbuf(tr, "resident", tiles * tile_bytes)
    for t in range(tiles):
        tr.append(engine=Engine.DMA, op="load", dtype="float32", partitions=128, free_elems=2048,
                  hbm_read=128 * tile_bytes, sbuf_write=128 * tile_bytes,
                  accesses=((x, False, 0, 1, t * 128 * tile_bytes, (t + 1) * 128 * tile_bytes),
                            (big, True, 0, 128, t * tile_bytes, (t + 1) * tile_bytes)))
    for t in range(tiles):
        tr.append(engine=Engine.VECTOR, op="tensor_reduce", dtype="float32", partitions=128, free_elems=2048,
                  accesses=((big, False, 0, 128, t * tile_bytes, (t + 1) * tile_bytes),))
    profile = estimate(tr.freeze()).profile
    assert profile["spill_save_bytes"] == 0
    assert profile["hbm_read_bytes"] > tiles * 128 * tile_bytes


def test_a_repeated_load_of_the_same_region_is_elided_while_sbuf_can_keep_it():
    from engine.platforms.nki.simulator.trace import Engine, Trace
    from tests.perf.builders import hbm, sbuf

    tr = Trace()
    w = hbm(tr, "w", 128 * 2048)
    for k in range(4):  # the same weights loaded in every iteration of an outer loop
        dst = sbuf(tr, f"w{k}", 2048)
        tr.append(engine=Engine.DMA, op="load", dtype="float32", partitions=128, free_elems=512,
                  hbm_read=128 * 2048, sbuf_write=128 * 2048,
                  accesses=((w, False, 0, 1, 0, 128 * 2048), (dst, True, 0, 128, 0, 2048)))
        tr.append(engine=Engine.VECTOR, op="tensor_reduce", dtype="float32", partitions=128, free_elems=512,
                  accesses=((dst, False, 0, 128, 0, 2048),))
    assert estimate(tr.freeze()).profile["hbm_read_bytes"] == 128 * 2048
