from __future__ import annotations

import dataclasses

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@pytest.fixture(autouse=True)
def every_simulation_replays(monkeypatch):
    """Every kernel these tests simulate successfully is also recorded as a program (program.py) and replayed
    (replay.py) on the same inputs: the replay's outputs and inputs-after must be bit-identical to the
    simulation's. Tests that split loops across processes (workers=2) record nothing."""
    import importlib

    from engine.platforms.nki.simulator.verification.replay import replay

    simulate_module = importlib.import_module("engine.platforms.nki.simulator.simulate")  # the package exports a function of that name

    real_run, real_simulation = simulate_module._run, simulate_module.Simulation
    seen: dict[str, list] = {}

    def run(func, code, inputs, *args, parallel=None, record_program=False, **kwargs):
        seen["inputs"] = list(inputs)
        seen["asked"] = record_program
        return real_run(func, code, inputs, *args, parallel=parallel, record_program=record_program or not parallel,
                        **kwargs)

    def simulation(**fields):
        result = real_simulation(**fields)
        if result.program is not None and not result.program.indirect:  # indirect ones cannot replay (indirect.py)
            replayed = replay(result.program, seen["inputs"], trace=result.trace if len(result.trace) else None)
            assert_same_arrays(result.outputs, replayed.outputs, "output")
            assert_same_arrays([a for a in result.inputs_after if isinstance(a, np.ndarray)],
                               [a for a in replayed.inputs_after if isinstance(a, np.ndarray)], "input after the run")
            if not seen["asked"]:
                result = dataclasses.replace(result, program=None)
        return result

    monkeypatch.setattr(simulate_module, "_run", run)
    monkeypatch.setattr(simulate_module, "Simulation", simulation)


def assert_same_arrays(expected, got, what: str) -> None:
    assert len(expected) == len(got), f"{len(got)} {what}s replayed, {len(expected)} simulated"
    for k, (a, b) in enumerate(zip(expected, got, strict=True)):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, f"{what} {k}: {b.dtype}{b.shape} != {a.dtype}{a.shape}"
        assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes(), f"{what} {k} differs bitwise"


def with_instruction(program, index, **changes):
    """A recorded program with one instruction's fields changed: how the tests forge programs."""
    fields = dict(zip(("kind", "params", "operands", "stores", "row", "line"), program.instructions[index],
                      strict=True))
    fields.update(changes)
    instructions = list(program.instructions)
    instructions[index] = tuple(fields.values())
    return dataclasses.replace(program, instructions=instructions)
