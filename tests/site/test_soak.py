"""The soak (measurements/soak.py), short: a real daphne server, started as `make run` starts it, under two
clients uploading kernels, launching runs and watching them live, browsing and calling the API, with a
campaign and the mini baselines' background pass going, for a minute (the suite's time budget; the full
soak is measurements/soak.py). /healthz must answer (within 10 s: no hang) throughout, everything started
must end, and nothing may fail for the server's sake."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "measurements"))

from soak import soak  # noqa: E402

HANG_S = 10.0


def test_a_minute_of_ordinary_use_leaves_the_server_responsive_and_every_piece_of_work_ended(tmp_path) -> None:
    lines: list[str] = []
    # The 1 s /healthz goal is measured by the full soak (docs/benchmarks.md), not asserted here: a loaded
    # 2-core machine misses it now and then without anything being wrong. This test fails on what a user
    # would call a hang: /healthz unanswered for HANG_S, work that never ends, a failed request.
    reasons = soak(1, 2, tmp_path, drain_minutes=5, background="mini", out=lines.append,
                   healthz_limit_s=HANG_S)
    summary = "\n".join(line for line in lines if not line.startswith("--- end of the server's log"))
    assert reasons == [], "\n".join(reasons) + "\n" + summary
    assert any(line.startswith("runs: ") and "succeeded" in line for line in lines), summary
