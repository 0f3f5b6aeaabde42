"""A spill transfer costed as a DMA of its shape (NeuronCoreSpec.spill_descriptors_per_row, on since perf-10):
one descriptor per SBUF partition row its chunks span, where perf-9 counts 128 for every spill transfer. trn1's bmm
reloads chunks on 64 partitions; at 128 descriptors each pays twice the per-packet floor. One kernel (the loop
interchange test's nest, whose kept product lives on 64 partitions and spills), the flag off and on."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

import engine.platforms.nki.perf as perf
from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf import estimate
from tests.perf.test_loop_interchange import kernel

ON = replace(TRN1, loop_interchange=True, spill_descriptors_per_row=True)
OFF = replace(ON, spill_descriptors_per_row=False)


def test_a_spill_counts_the_rows_it_spans(monkeypatch):
    plans = []
    plan_spills = perf.plan_spills
    monkeypatch.setattr(perf, "plan_spills", lambda *a, **k: plans.append(plan_spills(*a, **k)) or plans[-1])
    estimate(kernel(halves=True), ON)
    plan = plans[-1]
    reloads, saves = plan.reload_bytes > 0, plan.save_bytes > 0
    assert reloads.any() and saves.any()
    # The product (the transposed input) lives on 64 partitions: one descriptor per row, not 128.
    assert np.all(plan.reload_rows[reloads] % 64 == 0) and np.all(plan.reload_rows[reloads] < 128)
    assert np.all(plan.save_rows[saves] == 64)


def test_fewer_descriptors_cost_less_and_move_no_bytes():
    off, on = estimate(kernel(halves=True), OFF), estimate(kernel(halves=True), ON)
    for counter in ("hbm_read_bytes", "hbm_write_bytes", "spill_save_bytes", "spill_reload_bytes"):
        assert on.profile[counter] == off.profile[counter] > 0
    # 64 fewer descriptors per spill transfer: at least their descriptor bytes of engine time less each.
    assert on.latency_ms < off.latency_ms


def test_on_for_trn1():
    assert TRN1.spill_descriptors_per_row is True
