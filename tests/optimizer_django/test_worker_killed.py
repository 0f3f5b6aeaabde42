"""SIGKILL a worker process in the middle of an iteration, start another: the run finishes, no evaluation
whose result was saved is run again, and the memory holds each rewrite exactly once (as an uninterrupted
run does).

An evaluation is finished when its result is committed to the database. One the kill interrupted (still
simulating, or computed but not yet saved) died with the process: its result exists nowhere, so the
resumed worker runs it once more. Evaluations run one at a time here, so at most one is interrupted.
"""

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
    """The lessons the run filed: one evidence row per source pair, on the entry that holds the lesson (a lesson
    another run learned first counts there: memory.learning)."""
    return sorted(query(var_dir, "SELECT m.title, m.polarity, round(e.speedup, 6) FROM memory_memoryevidence e "
                                 "JOIN memory_memoryentry m ON m.id = e.entry_id WHERE e.source_run_id = ?", run_id))


def evaluations_by_status(var_dir: Path, run_id: int) -> dict[str, set[str]]:
    """The run's evaluations as evaluations.log names them ("<reference> <kernel lineage>"), by status."""
    rows = query(var_dir, "SELECT e.status, p.reference_source, k.source FROM benchmark_evaluation e "
                          "JOIN benchmark_kernel k ON k.id = e.kernel_id JOIN benchmark_problem p ON p.id = k.problem_id "
                          "JOIN optimizer_run r ON r.problem_id = p.id WHERE r.id = ?", run_id)
    by_status: dict[str, set[str]] = {}
    for status, reference, source in rows:
        by_status.setdefault(status, set()).add(f"{reference} {source.splitlines()[1]}")
    return by_status


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
    computed_before_kill = (tmp_path / "evaluations.log").read_text().splitlines()
    at_kill = evaluations_by_status(tmp_path, run_id)
    saved_before_kill = at_kill.get("done", set())
    assert len(saved_before_kill) >= 2
    interrupted = set(computed_before_kill) - saved_before_kill
    assert len(interrupted) <= 1 and interrupted <= at_kill.get("running", set())

    finish(worker(tmp_path, "work"))
    (status, error), = query(tmp_path, "SELECT status, error_message FROM optimizer_run WHERE id = ?", run_id)
    assert status == "succeeded", error
    lines = (tmp_path / "evaluations.log").read_text().splitlines()
    assert len(lines) > len(computed_before_kill)
    repeated = {line: n for line, n in Counter(lines).items() if n > 1}
    # Nothing saved is evaluated again; only the evaluation the kill interrupted runs a second time.
    assert set(repeated) <= interrupted and all(n == 2 for n in repeated.values()), (repeated, interrupted)
    assert set(lines) == evaluations_by_status(tmp_path, run_id)["done"]

    finish(worker(tmp_path, "reference"))
    (reference_id,), = query(tmp_path, "SELECT id FROM optimizer_run WHERE id != ?", run_id)
    assert memory_of(tmp_path, run_id) == memory_of(tmp_path, reference_id) != []
    best = query(tmp_path, "SELECT best_latency_ms FROM optimizer_run ORDER BY id")
    assert best[0] == best[1]
    seqs = [s for (s,) in query(tmp_path, "SELECT seq FROM optimizer_runevent WHERE run_id = ? ORDER BY seq", run_id)]
    assert seqs == list(range(1, len(seqs) + 1))
