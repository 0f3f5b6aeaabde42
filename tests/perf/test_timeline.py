"""The per-engine timeline is short enough to plot and covers the busy time."""

from __future__ import annotations

import numpy as np

from engine.platforms.nki.perf import estimate
from engine.platforms.nki.perf.profile import MAX_TIMELINE_INTERVALS, merged_intervals
from tests.perf.builders import streaming_kernel


def test_overlapping_intervals_merge_into_one():
    merged = merged_intervals(np.array([0.0, 1e-6, 5e-6]), np.array([2e-6, 3e-6, 6e-6]))
    assert merged == [(0.0, 3.0), (5.0, 6.0)]


def test_a_long_kernel_is_capped_at_a_few_hundred_intervals_per_engine():
    report = estimate(streaming_kernel(1000, 64, ops_per_tile=2))
    assert 0 < len(report.timeline["scalar"]) <= MAX_TIMELINE_INTERVALS
    ends = [b for _, b in report.timeline["scalar"]]
    assert max(ends) <= report.latency_ms * 1e3 + 1e-6
    starts = [a for a, _ in report.timeline["scalar"]]
    assert starts == sorted(starts)
