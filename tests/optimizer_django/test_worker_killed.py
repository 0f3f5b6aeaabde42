"""SIGKILL a worker process in the middle of an iteration, start another: the run finishes, no finished
evaluation is run again, and the memory holds each rewrite exactly once (as an uninterrupted run does)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def worker(var_dir: Path, mode: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")}
    return subprocess.Popen([sys.executable, "-m", "tests.optimizer_django.worker_process", str(var_dir), mode],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen, timeout: float = 180) -> str:
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, err[-3000:]
    return out


def query(var_dir: Path, sql: str, *params) -> list[tuple]:
    with sqlite3.connect(var_dir / "db.sqlite3", timeout=20) as db:
        return db.execute(sql, params).fetchall()


def memory_of(var_dir: Path, run_id: int) -> list[tuple]:
    return sorted(query(var_dir, "SELECT title, polarity, round(speedup, 6) FROM memory_memoryentry "
                                 "WHERE source_run_id = ?", run_id))


def test_a_killed_worker_process_loses_and_repeats_nothing(tmp_path):
    run_id = int(finish(worker(tmp_path, "setup")).strip())
    victim = worker(tmp_path, "work")
    deadline = time.monotonic() + 120
    # Kill once iteration 1 has evaluated some kernels but not finished.
    while time.monotonic() < deadline:
        log = tmp_path / "evaluations.log"
        if log.exists() and len(log.read_text().splitlines()) >= 3:
            break
        assert victim.poll() is None, victim.communicate()[1][-3000:]
        time.sleep(0.05)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    (status, iteration), = query(tmp_path, "SELECT status, current_iteration FROM optimizer_run WHERE id = ?", run_id)
    assert (status, iteration) == ("running", 1)
    finished_before_kill = len((tmp_path / "evaluations.log").read_text().splitlines())

    finish(worker(tmp_path, "work"))
    (status, error), = query(tmp_path, "SELECT status, error_message FROM optimizer_run WHERE id = ?", run_id)
    assert status == "succeeded", error
    lines = (tmp_path / "evaluations.log").read_text().splitlines()
    assert len(lines) > finished_before_kill
    assert [line for line, n in Counter(lines).items() if n > 1] == []  # nothing evaluated twice

    finish(worker(tmp_path, "reference"))
    (reference_id,), = query(tmp_path, "SELECT id FROM optimizer_run WHERE id != ?", run_id)
    assert memory_of(tmp_path, run_id) == memory_of(tmp_path, reference_id) != []
    best = query(tmp_path, "SELECT best_latency_ms FROM optimizer_run ORDER BY id")
    assert best[0] == best[1]
    seqs = [s for (s,) in query(tmp_path, "SELECT seq FROM optimizer_runevent WHERE run_id = ? ORDER BY seq", run_id)]
    assert seqs == list(range(1, len(seqs) + 1))
