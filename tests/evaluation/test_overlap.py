"""An evaluation overlaps its children's work (issue 38): the reference renders the next seed while the kernel
records or the verifier replays, and the verifier prices the trace it checked while the parent compares the last
seed. What is judged, and in which order failures are reported, stays as it was."""

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
    send, receive, init = process.ChildProcess.send, process.ChildProcess.receive, process.ChildProcess.__init__

    def logged_init(child: Any, role: str, *args: Any, **kwargs: Any) -> None:
        init(child, role, *args, **kwargs)
        seen.append((child.role, "start", None))

    def logged_send(child: Any, header: dict[str, Any], arrays: Any = None) -> None:
        seen.append((child.role, "send", (header.get("op"), header.get("index"), bool(header.get("record")))))
        if header.get("op") == "profile":
            seen.append((child.role, "profile arrays", sorted(arrays or {})))
        return send(child, header, arrays)

    def logged_receive(child: Any, **kwargs: Any) -> Any:
        reply = receive(child, **kwargs)
        seen.append((child.role, "receive", None))
        return reply

    monkeypatch.setattr(process.ChildProcess, "__init__", logged_init)
    monkeypatch.setattr(process.ChildProcess, "send", logged_send)
    monkeypatch.setattr(process.ChildProcess, "receive", logged_receive)
    return seen


def test_the_next_seed_is_rendered_while_the_kernel_records_and_the_verifier_prices_after_its_last_replay(
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
    # The verifier prices the trace it checked: asked right behind the last replay, answered last.
    priced = messages.index(("verify", "send", ("profile", None, False)))
    assert priced == replays[-1] + 1, "the pricing was not queued behind the last replay"
    assert messages[priced + 1] == ("verify", "profile arrays", []), "the parent sent a trace to be priced"
    assert messages[-1] == ("verify", "receive", None)
    assert len(result.relative_l2_errors) == len(SEEDS)
    assert result.latency_ms and result.latency_ms > 0 and result.profile


def test_a_simulated_evaluation_starts_three_children(messages: list[tuple[str, str, Any]]) -> None:
    # No profile child: a fourth interpreter start-up (0.34 s of CPU per mini evaluation) and a copy of the trace.
    result = evaluate(KERNEL, ADD_REFERENCE, limits=FAST_LIMITS, seeds=SEEDS)
    assert result.correct, result.error_message
    assert sorted(role for role, what, _ in messages if what == "start") == ["kernel", "reference", "verify"]


def test_the_verifier_prices_only_a_trace_it_has_checked() -> None:
    # The pricing request carries no trace; before a program and trace were loaded and checked there is
    # nothing to price, and the verifier says so rather than pricing an empty trace.
    from engine.platforms.nki.roles import VerifyRole

    reply, arrays = VerifyRole({"platform": "trn1", "backend": "simulator"}).profile({}, {})
    assert not reply["ok"] and reply["kind"] == "infrastructure_error" and arrays == {}
    assert "no checked trace was loaded" in reply["message"]
