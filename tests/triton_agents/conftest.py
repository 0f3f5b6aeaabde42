"""The Triton agent tests run kernels on Triton's CPU interpreter (`interpret.py`)."""

from __future__ import annotations

import os

import pytest

# Before Triton is first imported (it decides then whether its own library functions are interpreted): every
# kernel these tests run, run on the interpreter.
os.environ["TRITON_INTERPRET"] = "1"


@pytest.fixture
def interpreter(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from triton.runtime.autotuner import Autotuner

    def bench_every_config(kernel_call, quantiles=None):
        kernel_call()  # each configuration runs once, so a broken one fails the check
        return [0.0, 0.0, 0.0]

    monkeypatch.setattr(Autotuner, "do_bench", property(lambda self: bench_every_config), raising=False)
    return None
