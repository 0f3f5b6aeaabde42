"""`make test` really is the whole suite: with chromium missing it installs it (as root) or stops saying how,
instead of letting pytest skip the browser tests; NO_BROWSER=1 leaves them out on purpose."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# -o: treat the install stamps as up to date, so make never reinstalls the venv while we look at its plan.
MAKE = ["make", "-s", "-o", ".venv/.accelopt-installed", "-o", ".venv/.accelopt-dev-installed"]


def test_a_missing_chromium_stops_make_test_saying_how_to_get_it():
    done = subprocess.run([*MAKE, "chromium", "CHROMIUM=/nonexistent/chromium", "CAN_INSTALL=0"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "apt-get install chromium" in done.stderr and "NO_BROWSER=1" in done.stderr


def test_make_test_checks_chromium_first_and_no_browser_ignores_the_browser_tests():
    plan = subprocess.run([*MAKE, "-n", "test"], cwd=REPO, capture_output=True, text=True, timeout=60).stdout
    assert "chromium" in plan and "--ignore=tests/browser" not in plan
    plan = subprocess.run([*MAKE, "-n", "test", "NO_BROWSER=1"], cwd=REPO, capture_output=True, text=True,
                          timeout=60).stdout
    assert "--ignore=tests/browser" in plan and "apt-get" not in plan
