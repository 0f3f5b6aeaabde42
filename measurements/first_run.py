"""The first `make run` on a fresh database: how soon a page is served, and how the background evaluation of
the suite's baselines progresses (issue 20).

    .venv/bin/python measurements/first_run.py [--port 8766] [--minutes 60] [--compare]

Runs `make run` in this checkout (the virtualenv is reused: `-o` tells make to treat the install stamp as up to
date, so a shared venv is never reinstalled; setup_time.sh times a fresh clone's install) with
ACCELOPT_VAR_DIR and DATABASE_URL pointing at a new temporary directory, so the database is empty as on a
first start. Polls / until it answers 200 (time to a served page), then GET /api/baselines every 5 s and
prints a line whenever a count changes, until both cases are complete or --minutes pass. Stops the server's
process group at the end.

--compare first times the old first start: `make prepare`, then the mini baselines evaluated before serving
(what prepare did before issue 20: `load_suite --evaluate mini`), then `make serve`; time to a served page.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MAKE = "make --no-print-directory -o .venv/.accelopt-installed"


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read()
    except OSError:
        return 0, b""


def _start(command: str, port: int, var: Path, background: str) -> subprocess.Popen:
    env = {**os.environ, "ACCELOPT_VAR_DIR": str(var), "DATABASE_URL": f"sqlite:///{var / 'db.sqlite3'}",
           "ACCELOPT_BACKGROUND_BASELINES": background}
    log = (var / "server.log").open("w")
    return subprocess.Popen(["bash", "-c", command], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def _stop(process: subprocess.Popen) -> None:
    for signum, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(process.pid, signum)
            process.wait(timeout=wait)
            return
        except (ProcessLookupError, subprocess.TimeoutExpired):
            continue


def _until_served(process: subprocess.Popen, base: str, started: float) -> float:
    while _get(f"{base}/")[0] != 200:
        if process.poll() is not None:
            raise SystemExit(f"the server exited ({process.returncode}) before serving /")
        time.sleep(0.25)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument("--minutes", type=float, default=60.0, help="stop watching the baselines after this")
    parser.add_argument("--compare", action="store_true", help="also time the old first start (mini evaluated first)")
    args = parser.parse_args()
    base = f"http://127.0.0.1:{args.port}"

    if args.compare:
        with tempfile.TemporaryDirectory(prefix="accelopt-first-old-") as directory:
            old = (f"{MAKE} sandbox prepare >/dev/null && .venv/bin/python manage.py load_suite "
                   f"nkibench --evaluate mini && {MAKE} serve PORT={args.port}")
            started = time.monotonic()
            process = _start(old, args.port, Path(directory), "none")
            try:
                print(f"old first start (mini baselines evaluated before serving): / served after "
                      f"{_until_served(process, base, started):.1f} s", flush=True)
            finally:
                _stop(process)

    with tempfile.TemporaryDirectory(prefix="accelopt-first-run-") as directory:
        started = time.monotonic()
        process = _start(f"{MAKE} run PORT={args.port}", args.port, Path(directory), "mini,full")
        try:
            served = _until_served(process, base, started)
            status, _ = _get(f"{base}/leaderboard/")
            print(f"make run: / served after {served:.1f} s; /leaderboard/ answers {status}", flush=True)
            last: tuple | None = None
            deadline = started + args.minutes * 60
            while time.monotonic() < deadline:
                status, body = _get(f"{base}/api/baselines")
                if status == 200:
                    progress = {entry["case"]: entry for entry in json.loads(body)}
                    state = tuple((p["done"], p["running"], len(p["failed"])) for p in progress.values())
                    if state != last:
                        last = state
                        print(f"{time.monotonic() - started:8.1f} s  " + "  ".join(
                            f"{case}: {p['done']}/{p['total']} done ({p['correct']} correct, {p['running']} running)"
                            for case, p in progress.items()), flush=True)
                    if all(p["complete"] for p in progress.values()):
                        print(f"every baseline evaluated after {time.monotonic() - started:.1f} s")
                        break
                time.sleep(5)
            else:
                print(f"stopped watching after {args.minutes:g} min")
        finally:
            _stop(process)
    return None


if __name__ == "__main__":
    sys.exit(main())
