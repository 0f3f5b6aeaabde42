"""The simulator's outputs have the same bits whichever BLAS kernel and thread count numpy's OpenBLAS uses.

OpenBLAS picks its kernels by CPU at load time (`OPENBLAS_CORETYPE` overrides the pick); before
exact_matmul.py, matmul outputs differed in their last bits between the SkylakeX, Haswell and Sandybridge
kernels, so tests/versions failed on CPUs with AVX-512. Each setting runs in a child process (the variable is
read when the library loads) on the mini cases that use matmul, and must print the same output digests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Cases with matmuls, small enough for a few children: bmm and transpose_matmul (accumulating groups, masked
# tails), lora (chained products), gqa_full (softmax around two products).
PROBLEMS = "bmm,transpose_matmul,lora,gqa_full"
CHILD = """
import ctypes, hashlib, json, os
import numpy as np
from engine.platforms.nki.simulator.speed.blas import _openblas
from engine.platforms.nki.simulator.semantics.exact_matmul import matmul_tn
from tests.versions.digests import compute

core = ""
maps = {line.split()[-1] for line in open("/proc/self/maps") if "openblas" in line}
for path in sorted(p for p in maps if p.startswith("/")):
    lib = ctypes.CDLL(path)
    for name in ("scipy_openblas_get_corename64_", "openblas_get_corename64_", "openblas_get_corename"):
        if hasattr(lib, name):
            getattr(lib, name).restype = ctypes.c_char_p
            core = getattr(lib, name)().decode()
digests = {slug: r["outputs"] for slug, r in compute(only=set(PROBLEMS.split(",")))["problems"].items()}
# simulate() runs BLAS on one thread; the product itself must not care either: larger ones on THREADS threads.
found = _openblas()
if found is not None:
    found[0](int(os.environ["THREADS"]))
rng = np.random.default_rng(0)
products = hashlib.sha256()
for k, m, n in ((128, 128, 512), (512, 384, 640), (7, 3, 5)):
    a = rng.standard_normal((k, m), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    products.update(matmul_tn(a, b).tobytes())
print(json.dumps({"core": core, "digests": digests, "products": products.hexdigest()[:16]}))
""".replace("PROBLEMS", repr(PROBLEMS))
# SkylakeX needs AVX-512, Haswell AVX2, Sandybridge AVX, Prescott (run as Katmai) SSE only; OpenBLAS takes
# the next kernel down for one the CPU lacks, so on any x86-64 CPU at least two of these differ (measured on
# an AMD EPYC with AVX-512: SkylakeX, Haswell and Sandybridge/Katmai each give other float32 matmul bits).
CORES = ("SkylakeX", "Haswell", "Sandybridge", "Prescott")


def _run(core: str, threads: int) -> dict:
    env = {**os.environ, "OPENBLAS_CORETYPE": core, "OPENBLAS_NUM_THREADS": str(threads), "THREADS": str(threads),
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps to find OpenBLAS")
def test_outputs_do_not_depend_on_the_blas_kernel() -> None:
    runs = {(core, threads): _run(core, threads) for core, threads in
            [(core, 1) for core in CORES] + [("SkylakeX", 2), ("Haswell", 3)]}
    first = next(iter(runs.values()))
    assert set(first["digests"]) == set(PROBLEMS.split(","))
    differing = {f"{key[0]} ({run['core']}, {key[1]} threads)": run for key, run in runs.items()
                 if (run["digests"], run["products"]) != (first["digests"], first["products"])}
    assert not differing, f"first: {first}; differing: {differing}"
    # The digests are the recorded ones too (digests.json is recorded on whatever kernel its author had).
    recorded = json.loads((ROOT / "tests/versions/digests.json").read_text())["problems"]
    assert first["digests"] == {slug: recorded[slug]["outputs"] for slug in first["digests"]}
