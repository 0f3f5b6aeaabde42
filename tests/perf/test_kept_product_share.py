"""A kept product that does not fit keeps part of SBUF (perf-10 candidate; NeuronCoreSpec.kept_product_share, off).
trn1's bmm counters decode to its transposed input keeping 84 KiB of the 192 KiB partition, the rest saved once
and reloaded block by block in each later pass, where perf-8's rule spills the whole product. One kernel (the loop
interchange test's nest: the whole product kept across an outer block loop), the share off and on."""

from __future__ import annotations

from dataclasses import replace

from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf import estimate
from tests.perf.test_loop_interchange import BATCHES, WIDTH, kernel

WHOLE = replace(TRN1, loop_interchange=True)
SHARE = replace(WHOLE, kept_product_share=0.5)
BLOCK = 64 * 2 * WIDTH  # one batch's transposed input, bytes (64 partitions)


def test_the_product_keeps_its_share_and_reloads_less():
    whole, share = estimate(kernel(halves=True), WHOLE), estimate(kernel(halves=True), SHARE)
    # perf-8's rule: every batch's block leaves once and comes back in the second block pass.
    assert whole.profile["spill_save_bytes"] == BATCHES * BLOCK
    assert whole.profile["spill_reload_bytes"] == BATCHES * BLOCK
    # With half the partition the product keeps room for at most 3 of its 32 KiB-per-partition blocks (96 KiB,
    # less the other live tiles): at least 3 of the 6 leave and come back, fewer than all.
    room_blocks = int(SHARE.kept_product_share * SHARE.sbuf_bytes_per_partition // (2 * WIDTH))
    assert room_blocks == 3
    assert (BATCHES - room_blocks) * BLOCK <= share.profile["spill_reload_bytes"] < whole.profile["spill_reload_bytes"]
    assert share.profile["spill_save_bytes"] < whole.profile["spill_save_bytes"]
    assert share.profile["hbm_read_bytes"] < whole.profile["hbm_read_bytes"]
    assert share.profile["hbm_write_bytes"] < whole.profile["hbm_write_bytes"]


def test_off_by_default():
    assert TRN1.kept_product_share == 0.0
