"""Triton's own NVIDIA toolchain, for the tests that compile for a GPU target on this CPU machine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def bundled_ptxas() -> Path:
    """The ptxas Triton runs for sm_90 and newer; skips the test, saying why, where it cannot run."""
    triton = pytest.importorskip("triton")
    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas-blackwell"
    if not os.access(ptxas, os.X_OK):
        pytest.skip(f"Triton's NVIDIA backend has no runnable ptxas here ({ptxas}): nothing compiles for sm_90")
    return ptxas
