"""Theoretical peak latency: the floor every kernel's fraction of peak divides."""

from __future__ import annotations

import pytest

from engine.platforms.nki.perf.peak import theoretical_peak_ms


def test_a_bandwidth_bound_problem_peaks_at_bytes_over_hbm_bandwidth():
    # silu at M=4096, N=7168: read x once, write y once.
    nbytes = 2 * 4096 * 7168 * 4
    assert theoretical_peak_ms("trn1", vector_flops=4096 * 7168, matmul_flops=0, hbm_bytes=nbytes) == \
        pytest.approx(nbytes / (410 * 2**30) * 1e3)


def test_a_compute_bound_problem_peaks_at_matmul_flops_over_the_tensor_peak():
    flops = 2 * 4096 * 12288 * 5120
    assert theoretical_peak_ms("trn1", vector_flops=0, matmul_flops=flops, hbm_bytes=1) == \
        pytest.approx(flops / 23.75e12 * 1e3)


def test_trn2_has_its_own_constants():
    args = dict(vector_flops=0, matmul_flops=1e12, hbm_bytes=0)
    assert theoretical_peak_ms("trn2", **args) != theoretical_peak_ms("trn1", **args)


def test_it_rejects_negative_counts_and_unknown_platforms():
    with pytest.raises(ValueError, match="hbm_bytes"):
        theoretical_peak_ms("trn1", vector_flops=0, matmul_flops=0, hbm_bytes=-1)
    with pytest.raises(ValueError, match="trn9"):
        theoretical_peak_ms("trn9", vector_flops=0, matmul_flops=0, hbm_bytes=0)
