"""The cuda backend's timing rules on made-up measurements (no GPU needed): spread and the wall-time checks."""

from __future__ import annotations

from engine.platforms.triton.timing import MAX_GPU_SPREAD, GpuTiming, group_spread, implausible_events


def _timing(samples_ms, wall_s, flush_ms=0.02):
    return GpuTiming(median_ms=sorted(samples_ms)[len(samples_ms) // 2], spread=group_spread(samples_ms),
                     samples_ms=list(samples_ms), wall_s=wall_s, flush_ms=flush_ms, reps=len(samples_ms),
                     stable=group_spread(samples_ms) <= MAX_GPU_SPREAD)


def test_a_slow_drift_across_the_repetitions_is_unstable_and_noise_within_groups_is_not():
    steady = [1.0, 1.2, 0.9, 1.1] * 25
    assert group_spread(steady) < MAX_GPU_SPREAD
    drifting = [1.0 + i / 100 for i in range(100)]  # 1.0 ms rising to 2.0 ms
    assert group_spread(drifting) > MAX_GPU_SPREAD


def test_honest_event_times_pass_both_wall_time_checks():
    honest = _timing([1.0] * 100, wall_s=0.105)  # 100 ms of kernels, 5 ms of flushes and launches
    assert implausible_events(honest) == ""
    assert implausible_events(honest, outside_wall_s=0.7) == ""  # warm-up and reply on top


def test_events_claiming_a_fraction_of_the_real_time_are_refused_inside_and_outside():
    # The kernel made its events read 0.01 ms while each call really took 10 ms (a patched elapsed_time).
    lying = _timing([0.01] * 100, wall_s=1.0)
    assert "timed loop took 1000.000 ms" in implausible_events(lying)
    # It patched the host clock too: its own wall time agrees with its events, but the parent's does not.
    lying_twice = _timing([0.01] * 100, wall_s=0.001)
    assert implausible_events(lying_twice) == ""
    assert "seen from outside the kernel's process" in implausible_events(lying_twice, outside_wall_s=1.6)


def test_events_adding_up_to_more_than_the_time_that_passed_are_impossible():
    assert "more than the" in implausible_events(_timing([5.0] * 100, wall_s=0.2))
