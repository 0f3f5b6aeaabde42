"""Problem suites: the built-in NKIBench suite and a reader for AccelOpt's NKIBench directory layout.

Pure Python (no Django). The `load_suite` and `import_nkibench` management commands build rows from:

    load_suite(name="nkibench") -> Suite             # Suite.problems: list[ProblemSpec]
    read_nkibench_dir(path) -> list[ProblemSpec]     # summary.json, seeds/, reference/, kernels/

    spec.slug, spec.family, spec.title, spec.description, spec.parameters
    spec.cases                     # {"full": {"M": 4096, ...}, "mini": {...}} (NKIBench ids when imported)
    spec.reference_source(case)    # the reference file with that case's shape constants
    spec.baseline_for(case)        # the baseline kernel source (spec.baseline_source when shared)
    spec.peak_counts(case)         # PeakCounts(vector_flops, matmul_flops, hbm_bytes) or None
    spec.tolerance                 # relative L2 bound per output (NKIBench: 2e-5)
"""

from __future__ import annotations

from engine.platforms.nki.suites.loader import available_suites, load_suite
from engine.platforms.nki.suites.nkibench_dir import read_nkibench_dir
from engine.platforms.nki.suites.specs import TOLERANCE, PeakCounts, ProblemSpec, Suite, SuiteError

__all__ = [
    "TOLERANCE",
    "PeakCounts",
    "ProblemSpec",
    "Suite",
    "SuiteError",
    "available_suites",
    "load_suite",
    "read_nkibench_dir",
]
