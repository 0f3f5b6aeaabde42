"""The kernel's outputs are compared with its replay's, bit for bit, in the server process (issue 32). On a
full-size output a copy-and-compare of the whole array held the GIL for most of a second, and the soak saw
/healthz take 1.86 s while bmm's full baseline was checked: the comparison must let other threads run."""

from __future__ import annotations

import threading
import time

import numpy as np

from engine.platforms.nki.roles import first_difference, same_bits


def test_one_bit_anywhere_is_a_difference_and_equal_bits_are_not():
    a = np.linspace(-1, 1, 3 * (1 << 22), dtype=np.float32).reshape(3, -1)  # 48 MiB: several slices
    b = a.copy()
    assert same_bits(a, b) and first_difference([a], [b]) is None
    b[2, -1] = np.nextafter(b[2, -1], np.float32(2))  # one ulp in the last slice
    assert first_difference([a], [b]) == f"output 0: 1 of {a.size} elements differ"
    assert not same_bits(np.array(0.0), np.array(-0.0))  # equal values, different bits
    nan = np.array([np.nan], dtype=np.float32)
    assert same_bits(nan, nan.copy())


def test_other_threads_keep_running_while_a_large_output_is_compared():
    a = np.random.default_rng(0).random(1 << 26, dtype=np.float32).reshape(4096, -1)  # 256 MiB
    b = a.copy()
    comparer = time.pthread_getcpuclockid(threading.get_ident())
    finished, held = threading.Event(), []

    def heartbeat() -> None:  # what the server's event loop does between requests: wake up, need the GIL
        last_cpu = time.clock_gettime(comparer)
        while not finished.is_set():
            time.sleep(0.002)
            cpu = time.clock_gettime(comparer)
            # The comparing thread's CPU time between two beats: while it holds the GIL this beat cannot
            # happen, so one long stretch is one call that never let go. (Wall-clock gaps would also count
            # the time a busy machine gives this process no CPU at all.)
            held.append(cpu - last_cpu)
            last_cpu = cpu

    beating = threading.Thread(target=heartbeat)
    beating.start()
    time.sleep(0.05)
    try:
        assert first_difference([a], [b]) is None
    finally:
        finished.set()
        beating.join()
    # Before: two whole-array copies and a bytes comparison, each holding the GIL (230-320 ms per 128 MiB on
    # the idle 2-core VM); now 16 MiB slices compared by numpy, which releases it.
    assert max(held) < 0.15, f"the comparison ran {max(held) * 1000:.0f} ms of CPU without letting another thread run"
