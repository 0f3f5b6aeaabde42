"""Where the predicted time goes (engine/platforms/nki/perf/explain.py): the verdict names the real bottleneck, the critical
path accounts for the whole latency, and a dependency chain across engines shows up as stall time."""

from __future__ import annotations

import json

import pytest

from engine.platforms.nki.perf import estimate
from engine.platforms.nki.perf.explain import PATH_CATEGORIES, verdict_line
from tests.perf.builders import chain_kernel, ping_pong_kernel, streaming_kernel


def test_a_streaming_copy_is_bound_by_dma():
    """One cheap op per 512 KiB tile: the loads and stores take the time, the Scalar Engine mostly waits."""
    b = estimate(streaming_kernel(32, 1024)).breakdown
    assert b.bound == "dma"
    assert b.verdict.startswith("bound by: DMA (")
    # > 0.85: on its trigger queue each store waits for the Scalar op that makes its data (perf-5)
    assert b.path_share["dma"] > 0.85
    assert b.busy_share["dma"] > 0.95
    # The Scalar Engine sat idle waiting for loads (another engine): that idle time is a dependency stall.
    assert b.stall_s["scalar"] > 0.5 * b.latency_s


def test_sixteen_ops_per_tile_are_bound_by_the_engine_that_runs_them():
    b = estimate(streaming_kernel(32, 1024, ops_per_tile=16)).breakdown
    assert b.bound == "scalar"
    assert "bound by: Scalar Engine" in b.verdict
    assert b.path_share["scalar"] > 0.8  # the first load and the last store are on the path too


@pytest.mark.parametrize("trace", [streaming_kernel(32, 1024), streaming_kernel(32, 1024, ops_per_tile=16),
                                   ping_pong_kernel(16, 1024, pipelined=False),
                                   streaming_kernel(64, 8192, resident=True)],
                         ids=["dma-bound", "compute-bound", "ping-pong", "spilling"])
def test_the_critical_path_covers_the_latency_and_its_shares_sum_to_one(trace):
    report = estimate(trace)
    b = report.breakdown
    assert set(b.path_share) == set(PATH_CATEGORIES)
    assert sum(b.path_share.values()) == pytest.approx(1.0, abs=1e-9)
    assert sum(b.path_s.values()) == pytest.approx(report.latency_ms / 1e3, rel=1e-9)
    assert b.latency_s == pytest.approx(report.latency_ms / 1e3)
    assert 0 < b.path_length <= len(trace)


def test_a_chain_across_engines_stalls_and_a_chain_on_one_engine_does_not():
    """Vector -> Scalar -> Vector per tile in program order: each engine idles while the other computes what it
    needs next. A dependent chain on the Vector Engine alone never waits for another engine."""
    crossing = estimate(ping_pong_kernel(16, 1024, pipelined=False)).breakdown
    assert crossing.stall_s["vector"] > 0.2 * crossing.latency_s
    assert crossing.stall_s["scalar"] > 0.2 * crossing.latency_s
    # The critical path alternates between the two engines: both carry a large share of it.
    assert min(crossing.path_share["vector"], crossing.path_share["scalar"]) > 0.3
    alone = estimate(chain_kernel(32, 1024, dependent=True)).breakdown
    assert sum(alone.stall_s.values()) == 0.0
    assert alone.bound == "vector" and alone.path_share["vector"] == pytest.approx(1.0)


def test_software_pipelining_removes_most_of_the_stall():
    plain = estimate(ping_pong_kernel(16, 1024, pipelined=False)).breakdown
    pipelined = estimate(ping_pong_kernel(16, 1024, pipelined=True)).breakdown
    assert pipelined.stall_s["vector"] < 0.5 * plain.stall_s["vector"]


def test_spill_traffic_matches_the_counters_and_shows_on_the_critical_path():
    report = estimate(streaming_kernel(64, 8192, resident=True))
    b = report.breakdown
    assert b.spill["reload_bytes"] == report.profile["spill_reload_bytes"] > 0
    assert b.spill["save_bytes"] == report.profile["spill_save_bytes"] > 0
    assert b.spill["seconds"] > 0
    assert b.path_share["spill"] > 0.05


def test_busy_time_agrees_with_the_profile_counters_and_dma_time_is_split_by_queue():
    report = estimate(streaming_kernel(32, 1024, ops_per_tile=4))
    b = report.breakdown
    assert b.busy_share["scalar"] == pytest.approx(report.profile["scalar_engine_active_time_percent"])
    assert len(b.dma_queue_s) == 16
    assert sum(b.dma_queue_s) == pytest.approx(b.dma_s["load"] + b.dma_s["store"] + b.dma_s["onchip"])
    assert b.dma_s["load"] > 0 and b.dma_s["store"] > 0
    assert b.busy_s["dma"] <= sum(b.dma_queue_s) + 1e-12  # concurrent DMAs overlap


def test_the_breakdown_is_plain_json_in_the_report():
    data = estimate(streaming_kernel(8, 1024)).to_dict()
    again = json.loads(json.dumps(data))
    assert again["breakdown"]["verdict"].startswith("bound by: ")
    assert again["breakdown"]["bound"] in PATH_CATEGORIES


def test_an_empty_path_has_no_verdict():
    assert verdict_line({}) == ("", "")
    assert verdict_line({"dma": 0.62, "tensor": 0.38}) == ("dma", "bound by: DMA (62% of the critical path)")
