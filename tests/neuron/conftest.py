"""A Trainium host made of test doubles, for the neuron backend's contract tests.

What cannot exist here is doubled, and only that: the device nodes (empty files named neuron0, neuron1, ...),
the `neuronxcc` package (tests/neuron/doubles/sdk) and the `neuron-profile` and `neuron-bench` programs
(tests/neuron/doubles/tools/bin). Everything else is the product as deployed: the pipeline, the sandboxed
children in their namespaces, the NeuronCore pool, the parsing. The doubles record every call in the
attempt's artefact directory, which these tests keep (ACCELOPT_NEURON_KEEP_ARTEFACTS) and read back.

These tests prove the calls we make, the parsing, the pinning and the failure mapping. They are not a
measurement: every latency and counter in them is a recorded trn1 number or a test setting.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from engine.evaluator import Limits
from engine.evaluator.sandbox.user import ALLOW_ROOT_VARIABLE

DOUBLES = Path(__file__).resolve().parent / "doubles"
SDK = DOUBLES / "sdk"
TOOLS = DOUBLES / "tools"
# The compile options and compiler flags AccelOpt uses (accelopt/kernel_wrapper.py), which we keep.
ACCELOPT_COMPILE_OPTIONS = "--disable-dge --logical-nc-config=1"

LIMITS = Limits(wall_seconds=60, cpu_seconds=60, memory_bytes=2 * 1024**3)


@dataclass
class DoubleHost:
    """The doubled Trainium host of one test: where its device nodes, artefacts and locks are."""

    base: Path
    dev: Path
    artefacts: Path
    locks: Path

    def attempts(self) -> list[Path]:
        """The artefact directory of every attempt, oldest first."""
        if not self.artefacts.is_dir():
            return []
        return sorted(self.artefacts.iterdir(), key=lambda p: p.stat().st_mtime)

    def calls(self, attempt: Path | None = None) -> list[dict[str, Any]]:
        """What the doubles recorded: the neuronxcc calls, then neuron-profile's."""
        directories = [attempt] if attempt is not None else self.attempts()
        found = []
        for directory in directories:
            for name in ("calls.jsonl", "profiler-calls.jsonl"):
                path = directory / name
                if path.exists():
                    found += [dict(json.loads(line), attempt=directory.name) for line in path.read_text().splitlines()]
        return found


def _world_traversable_dir(prefix: str) -> Path:
    # The children run as uids of their own: the doubled /dev and the artefacts must be reachable for them.
    path = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(path, 0o755)
    return path


@pytest.fixture(autouse=True)
def _no_root_opt_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sandbox as deployed: a developer's ACCELOPT_SANDBOX_ALLOW_ROOT=1 must not weaken it here."""
    monkeypatch.delenv(ALLOW_ROOT_VARIABLE, raising=False)


def make_host(monkeypatch: pytest.MonkeyPatch, devices: int = 1) -> tuple[DoubleHost, Path]:
    base = _world_traversable_dir("accelopt-neuron-test-")
    dev = base / "dev"
    dev.mkdir()
    os.chmod(dev, 0o755)
    for number in range(devices):
        node = dev / f"neuron{number}"
        node.write_bytes(b"")
        os.chmod(node, 0o666)
    host = DoubleHost(base=base, dev=dev, artefacts=base / "artefacts", locks=base / "locks")
    for name in [n for n in os.environ if n.startswith("ACCELOPT_NEURON_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("ACCELOPT_NEURON_DEV_DIR", str(dev))
    monkeypatch.setenv("ACCELOPT_NEURON_SDK_PATH", str(SDK))
    monkeypatch.setenv("ACCELOPT_NEURON_TOOLS_DIR", str(TOOLS))
    monkeypatch.setenv("ACCELOPT_NEURON_ARTEFACT_DIR", str(host.artefacts))
    monkeypatch.setenv("ACCELOPT_NEURON_KEEP_ARTEFACTS", "1")
    monkeypatch.setenv("ACCELOPT_NEURON_LOCK_DIR", str(host.locks))
    return host, base


@pytest.fixture
def neuron_host(monkeypatch: pytest.MonkeyPatch) -> Iterator[DoubleHost]:
    """One doubled trn1 device: NeuronCores 0 and 1."""
    host, base = make_host(monkeypatch)
    yield host
    shutil.rmtree(base, ignore_errors=True)


def add_kernel(steering: dict[str, Any] | None = None, body: str = "") -> str:
    """An NKI kernel adding two 128x512 tiles; `steering` tells the device double what to do (NEURON_DOUBLE)."""
    header = f"NEURON_DOUBLE = {steering!r}\n" if steering is not None else ""
    return header + textwrap.dedent(f'''
        import neuronxcc.nki as nki
        import neuronxcc.nki.language as nl


        @nki.jit
        def kernel(a, b):
            out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
            {body or "nl.store(out, value=nl.add(nl.load(a), nl.load(b)))"}
            return out
    ''')


def line_of(source: str, text: str) -> int:
    return next(n for n, line in enumerate(source.splitlines(), start=1) if text in line)
