"""Triton tests run kernels on Triton's CPU interpreter; they need PyTorch and Triton (`make test` installs
both: the `triton` extra) and skip, saying so, only where they are absent."""

from __future__ import annotations

import os

import pytest

# Before Triton is imported (it reads the setting then): every kernel in these tests runs on the interpreter.
os.environ.setdefault("TRITON_INTERPRET", "1")  # TRITON_INTERPRET=0 only for tests/triton/test_cuda.py on a GPU

pytest.importorskip("torch", reason="the Triton tests need PyTorch (pip install -e '.[triton]')")
pytest.importorskip("triton", reason="the Triton tests need Triton (pip install -e '.[triton]')")
