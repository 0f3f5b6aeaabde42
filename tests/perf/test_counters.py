"""The profile has the calibration CSV's counter names and their meanings."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from engine.platforms.nki.perf import COUNTER_NAMES, PERF_MODEL_VERSION, estimate
from engine.platforms.nki.simulator.trace import Engine, Trace
from tests.perf.builders import sbuf, streaming_kernel

CSV = Path("/work/shared/calibration/trn1_nkibench_baselines.csv")


def test_profile_keys_are_exactly_the_calibration_counters():
    report = estimate(streaming_kernel(4, 512))
    assert set(report.profile) == set(COUNTER_NAMES)
    if CSV.exists():
        with CSV.open() as f:
            header = next(csv.reader(f))
        measured = set(header) - {"problem", "shape", "latency_ms"}
        assert measured <= set(report.profile)


def test_hbm_bytes_are_the_bytes_the_kernel_moves():
    report = estimate(streaming_kernel(8, 1024))
    assert report.profile["hbm_read_bytes"] == 8 * 128 * 1024 * 4
    assert report.profile["hbm_write_bytes"] == 8 * 128 * 1024 * 4


def test_matmul_flops_count_like_neuron_profile_and_transposes_separately():
    tr = Trace()
    a, b, p = sbuf(tr, "a", 512), sbuf(tr, "b", 2048), sbuf(tr, "p", 2048)
    mm = 2 * 128 * 128 * 512
    tr.append(engine=Engine.TENSOR, op="nc_matmul", dtype="float32", partitions=128, free_elems=512, flops=mm,
              accesses=((a, False, 0, 128, 0, 512), (b, False, 0, 128, 0, 2048), (p, True, 0, 128, 0, 2048)))
    tr.append(engine=Engine.TENSOR, op="nc_matmul", dtype="float32", partitions=128, free_elems=128,
              flops=2 * 128 * 128 * 128, is_transpose=True,
              accesses=((a, False, 0, 128, 0, 512), (p, True, 0, 128, 0, 512)))
    profile = estimate(tr.freeze()).profile
    assert profile["transpose_flops"] == 2 * (2 * 128 * 128 * 128)
    assert profile["hardware_flops"] == 2 * mm + profile["transpose_flops"]


def test_engine_active_time_is_a_fraction_of_the_latency():
    profile = estimate(streaming_kernel(16, 2048, ops_per_tile=3)).profile
    assert 0 < profile["scalar_engine_active_time_percent"] <= 1
    assert profile["vector_engine_active_time_percent"] == 0


def test_the_report_serialises_to_json_with_its_version():
    report = estimate(streaming_kernel(4, 512))
    data = json.loads(json.dumps(report.to_dict()))
    assert data["version"] == PERF_MODEL_VERSION
    assert data["latency_ms"] == report.latency_ms
