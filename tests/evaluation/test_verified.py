"""Record, then verify (issue 18): attack kernels against the simulator backend's verified evaluation.

The kernel child runs the kernel once and records its program; the verifier child (our code only) replays
that program on every seed, and only the verifier's outputs, and the performance model's price for the
verified trace, are judged and stored. The attacks below run with every Python guard off where they need
real imports, as an attacker past the static check and the audit hook would.
"""

from __future__ import annotations

import textwrap

from engine.evaluator import ErrorKind, evaluate
from tests.evaluation.conftest import ADD_REFERENCE, FAST_LIMITS, needs_simulator

pytestmark = needs_simulator

NO_GUARDS = {"static": False, "imports": False, "audit": False}
SEEDS = (11, 12, 13)

HONEST_BODY = '''
@nki.jit
def kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.add(nl.load(a), nl.load(b)))
    return out
'''
IMPORTS = '''
import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
'''


def run(kernel: str, guards: dict | None = None):
    return evaluate(textwrap.dedent(kernel), ADD_REFERENCE, backend="simulator", limits=FAST_LIMITS, seeds=SEEDS,
                    _guards=guards)


def test_the_honest_kernel_is_correct_with_a_simulated_latency() -> None:
    result = run(IMPORTS + HONEST_BODY)
    assert result.correct and result.error_kind is None, result.error_message
    assert result.latency_ms and result.latency_ms > 0


PATCHES_THE_MODEL_AND_THE_RESULT = IMPORTS + '''
import types

import engine.evaluator.backends as backends
import engine.evaluator.child as child
import engine.platforms.nki.backend as simulator_backend
import engine.platforms.nki.perf as perf

fake = types.SimpleNamespace(latency_ms=1e-9, profile={}, timeline=None, version="x", to_dict=lambda: {})
perf.estimate = lambda *a, **k: fake
simulator_backend.SimulatorBackend.profile = lambda self, trace, platform: backends.ProfileReport(1e-9, {}, None, "x")
honest_run = child.KernelRole.run


def lying_run(self, header, arrays):
    reply, out = honest_run(self, header, arrays)
    reply["latency_ms"] = 1e-9  # what a measured backend would report
    return reply, out


child.KernelRole.run = lying_run
''' + HONEST_BODY


def test_patching_the_model_the_backend_or_the_reply_in_the_kernels_process_changes_no_stored_number() -> None:
    honest = run(IMPORTS + HONEST_BODY)
    patched = run(PATCHES_THE_MODEL_AND_THE_RESULT, NO_GUARDS)
    assert patched.correct and patched.error_kind is None, patched.error_message
    assert patched.latency_ms == honest.latency_ms > 1e-3  # the verifier priced the trace it checked
    assert patched.profile == honest.profile


FORGES_ITS_TRACE = IMPORTS + '''
import engine.platforms.nki.simulator.semantics.runtime as runtime

honest_emit = runtime.Simulator.emit


def cheap_emit(self, op, engine, dtype, partitions, free, flops, *rest):
    honest_emit(self, op, engine, dtype, partitions, max(1, free // 64), flops // 64, *rest)


runtime.Simulator.emit = cheap_emit
''' + HONEST_BODY


def test_a_kernel_that_makes_the_simulator_under_report_its_cost_fails_verification() -> None:
    result = run(FORGES_ITS_TRACE, NO_GUARDS)
    assert result.error_kind is ErrorKind.INCORRECT and not result.correct
    assert "failed verification" in result.error_message and "free elements" in result.error_message
    assert result.latency_ms is None


WRITES_THE_HOST_ANSWER_INTO_ITS_OUTPUT = IMPORTS + '''
import sys


@nki.jit
def kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    frame = sys._getframe()
    while "inputs" not in frame.f_locals:  # up to the kernel child's own frame, which holds the arrays it got
        frame = frame.f_back
    x, y = frame.f_locals["inputs"][:2]
    nl.store(out, value=nl.load(a))  # a real store of every element, so the output counts as written (issue 35)
    out.data[...] = x + y  # then the answer, computed on the host, straight into the output's storage
    return out
'''


def test_an_answer_written_outside_the_instructions_is_not_what_the_program_computes() -> None:
    result = run(WRITES_THE_HOST_ANSWER_INTO_ITS_OUTPUT, NO_GUARDS)
    assert result.error_kind is ErrorKind.INCORRECT and not result.correct
    assert "not what its recorded instructions compute" in result.error_message
    assert f"seed {SEEDS[0]}" in result.error_message


STORES_THE_HOST_ANSWER = IMPORTS + '''
import sys


@nki.jit
def kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    frame = sys._getframe()
    while "inputs" not in frame.f_locals:
        frame = frame.f_back
    x, y = frame.f_locals["inputs"][:2]
    nl.store(out, value=nl.load(nl.shared_constant(x + y)))  # real instructions, moving a host constant
    return out
'''


def test_an_answer_computed_on_the_host_fails_on_the_seeds_it_never_saw() -> None:
    result = run(STORES_THE_HOST_ANSWER, NO_GUARDS)
    assert result.error_kind is ErrorKind.INCORRECT and not result.correct
    assert result.relative_l2_errors[0] == (0.0,)  # right where it was recorded
    assert f"seed {SEEDS[1]}" in result.error_message and "differs from the reference" in result.error_message


BRANCHES_ON_VALUES = IMPORTS + '''
@nki.jit
def kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.load(a)
    if t:  # line 10: a branch on the data
        t = nl.add(t, nl.load(b))
    nl.store(out, value=t)
    return out
'''


def test_a_kernel_that_branches_on_tensor_values_gets_a_compile_error_naming_the_line() -> None:
    result = run(BRANCHES_ON_VALUES)
    assert result.error_kind is ErrorKind.COMPILE_ERROR and not result.compiled
    assert result.error_line == 10
    assert "bool at line 10" in result.error_message and "truth value" in result.error_message


RUNS_ONCE = IMPORTS + '''
calls = []
''' + HONEST_BODY.replace('''    out = nl.ndarray''', '''    calls.append(1)
    assert len(calls) == 1, "called again"
    out = nl.ndarray''')


def test_the_kernel_runs_only_on_the_first_seed_and_every_seed_is_judged_on_the_replay() -> None:
    result = run(RUNS_ONCE)
    assert result.correct and result.error_kind is None, result.error_message
    assert len(result.relative_l2_errors) == len(SEEDS)
