"""Differential pairs: the shipped ground truth, kernel sources by path or git commit, predicted speedups."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from engine.platforms.nki.hardware import TRN1
from engine.platforms.nki.perf import pairs
from engine.platforms.nki.perf.pairs import (
    INPUT_BUILDERS,
    SIMULATED,
    KernelRef,
    PairResult,
    PairTraces,
    format_pairs,
    kernel_source,
    load_pairs,
    predict_pairs,
    summarize_pairs,
)

SLOW = """
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

@nki.jit
def copy(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range(x.shape[1] // 128):
        tile = nl.load(x[:, t * 128:(t + 1) * 128])
        nl.store(out[:, t * 128:(t + 1) * 128], value=nl.exp(nl.exp(tile)))
    return out

@nki.jit
def copy_large(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for t in nl.affine_range(x.shape[1] // 2048):
        tile = nl.load(x[:, t * 2048:(t + 1) * 2048])
        nl.store(out[:, t * 2048:(t + 1) * 2048], value=nl.exp(nl.exp(tile)))
    return out
"""


def test_kernel_refs_read_back_as_written():
    ref = KernelRef.parse("neuron-sdk:a/b.py@0123456789abcdef#nki_matmul_tiled_")
    assert (ref.source, ref.path, ref.commit, ref.function) == ("neuron-sdk", "a/b.py", "0123456789abcdef",
                                                                 "nki_matmul_tiled_")
    assert KernelRef.parse("") is None
    assert KernelRef.parse("accelopt:x.py@c").function == "kernel"


def test_the_shipped_ground_truth_names_its_sources():
    rows = load_pairs()
    simulated = [p for p in rows if p.status == SIMULATED]
    assert len(simulated) >= 15
    for p in rows:
        assert p.source and p.hardware and p.slow_ms > 0 and p.fast_ms > 0
        assert p.slow is not None
        if p.status == SIMULATED:
            assert p.fast is not None and p.fast.commit and p.slow.commit
    tutorial = {p.name: p for p in rows}["matmul_tutorial_block_free"]
    assert tutorial.measured_speedup == pytest.approx(42.96 / 22.07)


def test_a_source_is_read_at_its_commit_from_a_git_directory(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "k.py").write_text("VERSION = 1\n")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                              env={**env, "PATH": "/usr/bin:/bin"}).stdout.strip()
    git("init", "-q")
    git("add", "k.py")
    git("commit", "-q", "-m", "one")
    commit = git("rev-parse", "HEAD")
    (repo / "k.py").write_text("VERSION = 2\n")  # the work tree moved on; the pair names the commit
    assert kernel_source(KernelRef("src", "k.py", commit, "f"), {"src": repo}) == b"VERSION = 1\n"
    assert kernel_source(KernelRef("src", "k.py", "", "f"), {"src": repo}) == b"VERSION = 2\n"
    with pytest.raises(FileNotFoundError, match="no path given"):
        kernel_source(KernelRef("other", "k.py", commit, "f"), {"src": repo})


def test_predicted_speedup_of_a_simulated_pair(tmp_path, monkeypatch):
    (tmp_path / "kernels.py").write_text(SLOW)
    monkeypatch.setitem(INPUT_BUILDERS, "toy", lambda shape, rng: [0.1 * rng.standard_normal((128, shape["N"]),
                                                                                           dtype=np.float32)])
    pair = pairs.Pair(name="toy_tiles", slow=KernelRef("toy", "kernels.py", "", "copy"),
                      fast=KernelRef("toy", "kernels.py", "", "copy_large"), inputs="toy", shape={"N": 8192},
                      slow_ms=2.0, fast_ms=1.0, hardware="trn1", source="test", status=SIMULATED, notes="")
    broken = pairs.Pair(name="broken", slow=KernelRef("toy", "kernels.py", "", "missing"),
                        fast=KernelRef("toy", "kernels.py", "", "copy"), inputs="toy", shape={"N": 8192},
                        slow_ms=2.0, fast_ms=1.0, hardware="trn1", source="test", status=SIMULATED, notes="")
    unsourced = pairs.Pair(name="unsourced", slow=None, fast=None, inputs="", shape={}, slow_ms=3.0, fast_ms=2.0,
                           hardware="trn1", source="test", status="no public source", notes="")
    traces = PairTraces([pair, broken, unsourced], {"toy": tmp_path}, "trn1", tmp_path / "cache")
    results = predict_pairs(traces, TRN1)
    toy, bad, none = results
    assert toy.predicted is not None and toy.predicted > 1.0  # 128-element tiles lose to 2048-element ones
    assert toy.slow_ms > toy.fast_ms
    assert bad.predicted is None and "AttributeError" in bad.error
    assert none.predicted is None and none.status == "no public source"
    assert list((tmp_path / "cache").glob("kernels_copy_*.pkl"))  # cached for the next run
    text = format_pairs(results)
    assert "toy_tiles" in text and "no public source" in text and "differential pairs: " in text


def test_pair_summary_counts_the_band_and_the_sign():
    rows = [PairResult("a", 1.2, 1.25), PairResult("b", 2.0, 1.5), PairResult("c", 1.3, 0.9),
            PairResult("d", 1.0, 1.01), PairResult("e", 1.5)]
    assert [r.sign_right for r in rows] == [True, True, False, True, None]
    s = summarize_pairs(rows)
    assert s["pairs"] == 4 and s["within_15pct"] == 2 and s["sign_right"] == 3
