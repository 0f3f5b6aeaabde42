"""First visit of a page in Chromium, as a newcomer meets it right after `make run` (issue 32).

For each checkout measured (this one, and with --compare REF a git worktree of REF beside it, in the same run):
a fresh database and var/ directory, the checkout's own `make prepare` step (so whatever it prepares, such as
collected and compressed static files, is what gets served), then daphne as `make serve` starts it, on a free
port, with the background baseline pass off so the machine stays idle. Optionally (--evaluated N) the first N
mini baselines get a simulator result, so the leaderboard draws its chart and loads Plotly.

Each visit is a new browser context (an empty cache, no cookies): the time from navigation start to the load
event (PerformanceNavigationTiming.loadEventEnd) and the bytes transferred (the document's and every
resource's transferSize). One visit warms the server first and is reported apart; the median is over --visits.

    .venv/bin/python measurements/first_visit.py --compare HEAD~3 --evaluated 4 --visits 7

Needs /usr/bin/chromium and Playwright (the dev extra).
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
PYTHON = Path(sys.executable)

# Gives the first N mini baselines a result without running the simulator: the page's cost, not the
# evaluation's, is what is measured.
EVALUATE = """
from benchmark.models import Evaluation, EvaluationStatus, Problem
from benchmark.services import backend_version
version = backend_version("simulator")  # the board shows the current model's numbers only
for i, p in enumerate(Problem.objects.filter(case="mini", language="nki").exclude(baseline_kernel=None)[:{n}]):
    Evaluation.objects.create(kernel=p.baseline_kernel, platform="trn1", backend="simulator",
        backend_version=version, status=EvaluationStatus.DONE, compiled=True, runnable=True, correct=True,
        latency_ms=0.05 * (i + 1), peak_fraction=0.3)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_up(url: str, process: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"no answer from {url} within {timeout:.0f} s")


@contextmanager
def serving(checkout: Path, evaluated: int) -> Iterator[str]:
    """A prepared server from `checkout`, on a free port, with its own database; yields its base URL."""
    with tempfile.TemporaryDirectory(prefix="first-visit-") as var:
        env = {**os.environ, "ACCELOPT_VAR_DIR": var, "DATABASE_URL": f"sqlite:///{var}/db.sqlite3",
               "ACCELOPT_BACKGROUND_BASELINES": "none", "DJANGO_SETTINGS_MODULE": "accelopt_site.settings"}
        env.pop("REDIS_URL", None)
        venv = PYTHON.parent.parent
        # The checkout's own prepare recipe; -o install: this venv already has the dependencies.
        prepared = subprocess.run(["make", "-s", "-o", "install", "prepare", f"VENV={venv}"], cwd=checkout,
                                  env=env, capture_output=True, text=True, timeout=900)
        if prepared.returncode:
            raise RuntimeError(f"make prepare failed in {checkout}:\n{prepared.stdout}\n{prepared.stderr}")
        if evaluated:
            subprocess.run([str(PYTHON), "manage.py", "shell", "-c", EVALUATE.format(n=evaluated)], cwd=checkout,
                           env=env, check=True, capture_output=True, timeout=300)
        port = free_port()
        log = open(Path(var) / "daphne.log", "w")  # noqa: SIM115 - closed below
        server = subprocess.Popen([str(venv / "bin" / "daphne"), "-b", "127.0.0.1", "-p", str(port),
                                   "accelopt_site.asgi:application"], cwd=checkout, env=env, stdout=log,
                                  stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        try:
            wait_until_up(f"{base}/healthz", server)
            yield base
        finally:
            server.terminate()
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
            log.close()


def visit(browser: Any, url: str) -> dict[str, float]:
    """One cold visit: a new context has an empty cache."""
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(url, wait_until="load", timeout=120_000)
        return page.evaluate("""() => {
            const nav = performance.getEntriesByType("navigation")[0];
            const resources = performance.getEntriesByType("resource");
            return {
                load_ms: nav.loadEventEnd - nav.startTime,
                bytes: nav.transferSize + resources.reduce((sum, r) => sum + r.transferSize, 0),
                decoded_bytes: nav.decodedBodySize + resources.reduce((sum, r) => sum + r.decodedBodySize, 0),
                requests: 1 + resources.length,
            };
        }""")
    finally:
        context.close()


def measure(browser: Any, checkout: Path, path: str, visits: int, evaluated: int) -> dict[str, Any]:
    with serving(checkout, evaluated) as base:
        first = visit(browser, base + path)
        runs = [visit(browser, base + path) for _ in range(visits)]
    return {
        "first_ms": first["load_ms"],
        "median_ms": statistics.median(r["load_ms"] for r in runs),
        "min_ms": min(r["load_ms"] for r in runs),
        "max_ms": max(r["load_ms"] for r in runs),
        "bytes": statistics.median(r["bytes"] for r in runs),
        "decoded_bytes": statistics.median(r["decoded_bytes"] for r in runs),
        "requests": runs[0]["requests"],
    }


@contextmanager
def worktree(ref: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="first-visit-ref-") as parent:
        path = Path(parent) / "checkout"
        subprocess.run(["git", "worktree", "add", "--detach", str(path), ref], cwd=REPO, check=True,
                       capture_output=True)
        try:
            yield path
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=REPO, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", default="/leaderboard/")
    parser.add_argument("--visits", type=int, default=7)
    parser.add_argument("--evaluated", type=int, default=4, help="mini baselines given a result (0: none)")
    parser.add_argument("--compare", metavar="REF", help="also measure this git ref (a worktree), first")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    targets = ([(f"{args.compare}", None)] if args.compare else []) + [("this checkout", REPO)]
    results = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], headless=True)
        try:
            for label, checkout in targets:
                if checkout is None:
                    with worktree(args.compare) as tree:
                        results.append((label, measure(browser, tree, args.path, args.visits, args.evaluated)))
                else:
                    results.append((label, measure(browser, checkout, args.path, args.visits, args.evaluated)))
        finally:
            browser.close()
    print(f"{args.path}, {args.visits} cold visits each (median; first visit after start apart), "
          f"{args.evaluated} baselines evaluated; {date.today()}, {os.cpu_count()} cores, {platform.machine()}, "
          f"Python {platform.python_version()}")
    print(f"{'checkout':<16} {'median':>9} {'min':>8} {'max':>8} {'first':>8} {'transferred':>13} {'decoded':>11} "
          f"{'requests':>8}")
    for label, r in results:
        print(f"{label:<16} {r['median_ms']:>7.0f}ms {r['min_ms']:>6.0f}ms {r['max_ms']:>6.0f}ms "
              f"{r['first_ms']:>6.0f}ms {r['bytes'] / 1024:>10.0f} KiB {r['decoded_bytes'] / 1024:>8.0f} KiB "
              f"{r['requests']:>8}")


if __name__ == "__main__":
    main()
