"""An evaluation overlaps its children's work (issue 38): the reference renders the next seed while the kernel
records or the verifier replays, and the performance model prices the verified trace while later seeds are
checked. What is judged, and in which order failures are reported, stays as it was."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from engine.evaluator import evaluate
from engine.evaluator.sandbox import process
from tests.evaluation.conftest import ADD_REFERENCE, FAST_LIMITS, needs_simulator

pytestmark = needs_simulator

SEEDS = (11, 12, 13)
KERNEL = textwrap.dedent('''
    import numpy as np
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl

    @nki.jit
    def kernel(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.add(nl.load(a), nl.load(b)))
        return out
''')


@pytest.fixture
def messages(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, Any]]:
    """Every request the parent sends and every reply it reads, in order: (role, "send" or "receive", op)."""
    seen: list[tuple[str, str, Any]] = []
    send, receive = process.ChildProcess.send, process.ChildProcess.receive

    def logged_send(child: Any, header: dict[str, Any], arrays: Any = None) -> None:
        seen.append((child.role, "send", (header.get("op"), header.get("index"), bool(header.get("record")))))
        return send(child, header, arrays)

    def logged_receive(child: Any, **kwargs: Any) -> Any:
        reply = receive(child, **kwargs)
        seen.append((child.role, "receive", None))
        return reply

    monkeypatch.setattr(process.ChildProcess, "send", logged_send)
    monkeypatch.setattr(process.ChildProcess, "receive", logged_receive)
    return seen


def test_the_next_seed_is_rendered_while_the_kernel_records_and_the_model_prices_while_seeds_are_replayed(
        messages: list[tuple[str, str, Any]]) -> None:
    result = evaluate(KERNEL, ADD_REFERENCE, limits=FAST_LIMITS, seeds=SEEDS)
    assert result.correct, result.error_message
    record = messages.index(("kernel", "send", ("run", None, True)))
    recorded = messages.index(("kernel", "receive", None), record)
    second_seed = messages.index(("reference", "send", ("render", 1, False)))
    assert record < second_seed < recorded, "the second seed was not rendered while the kernel recorded"
    third_seed = messages.index(("reference", "send", ("render", 2, False)))
    replays = [i for i, m in enumerate(messages) if m[:2] == ("verify", "send") and m[2][0] == "replay"]
    assert replays[1] < third_seed < messages.index(("verify", "receive", None), replays[1])
    priced = messages.index(("profile", "send", ("profile", None, False)))
    assert priced < replays[-1], "the model priced the trace only after the last seed"
    assert messages[-1] == ("profile", "receive", None)
    assert len(result.relative_l2_errors) == len(SEEDS)
