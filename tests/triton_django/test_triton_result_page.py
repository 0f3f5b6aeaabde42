"""A Triton interpreter result reads as what it is (issue 32): correct, with no latency, never in red; its
per-workload numbers a table rather than a Python dict; no NKI wording ("simulating", "performance model")."""

from __future__ import annotations

import re

import pytest

from benchmark.models import Backend, Evaluation, EvaluationStatus
from optimizer.management.commands.optimize import _best

pytestmark = pytest.mark.django_db

WORKLOADS = [{"uuid": u, "latency_ms": None, "peak_fraction": None, "floor_ms": None, "spread": None}
             for u in ("axpy-b3", "axpy-b8")]


def _interpreter_result(problem, **fields) -> Evaluation:
    values = dict(
        kernel=problem.baseline_kernel, platform="h100", backend=Backend.TRITON_INTERPRETER,
        backend_version="triton-interpreter-2", status=EvaluationStatus.DONE, compiled=True, runnable=True,
        correct=True, seeds=[11, 22], correctness={"relative_l2_errors": [[0.0], [1e-7], [0.0], [2e-7]]},
        profile={"note": "correctness only: no GPU", "workloads": WORKLOADS},
    )
    values.update(fields)
    return Evaluation.objects.create(**values)


def _page(client, problem) -> str:
    return client.get(f"/kernels/{problem.baseline_kernel_id}/").content.decode()


def test_a_correct_interpreter_result_reads_correct_with_no_latency(client, triton_problem):
    _interpreter_result(triton_problem)
    html = _page(client, triton_problem)
    cell = re.search(r'id="evaluation-\d+-result">(.*?)</span></td>', html, re.S).group(1)
    assert "result-bad" not in cell and 'data-testid="correct-no-latency"' in cell
    assert 'data-testid="correctness-only"' in html
    # Every per-seed error is within tolerance (green), labelled with its workload and seed.
    assert 'class="bad"' not in html
    assert html.count("workload axpy-b3") == 2 and html.count("workload axpy-b8") == 2


def test_profile_counters_are_a_table_not_a_python_dict(client, triton_problem):
    _interpreter_result(triton_problem)
    html = _page(client, triton_problem)
    assert "{&#x27;" not in html and "[{" not in html and "None" not in html
    table = re.search(r'data-testid="profile-workloads">(.*?)</table>', html, re.S).group(1)
    assert "<th class=\"mono\">uuid</th>" in table and table.count("<tr>") == 3  # a header and two workloads


def test_triton_pages_use_no_nki_wording(client, triton_problem):
    _interpreter_result(triton_problem)
    for html in (_page(client, triton_problem), client.get(f"/problems/{triton_problem.pk}/").content.decode()):
        text = re.sub(r"<[^>]+>", " ", html).lower()
        assert "simulating" not in text and "performance model" not in text


def test_a_pending_triton_evaluation_does_not_say_simulating(client, triton_problem):
    _interpreter_result(triton_problem, status=EvaluationStatus.RUNNING, correct=None, correctness={}, profile={})
    text = re.sub(r"<[^>]+>", " ", _page(client, triton_problem))
    assert "simulating" not in text and "running the kernel on triton-interpreter" in text


def test_an_incorrect_interpreter_result_marks_only_the_failing_seed(client, triton_problem):
    _interpreter_result(triton_problem, correct=False, error_kind="incorrect", error_message="seed 22: off",
                        correctness={"relative_l2_errors": [[0.0], [0.4]]}, profile={})
    html = _page(client, triton_problem)
    assert html.count('<span class="ok">0.00e+00</span>') == 1 and html.count('<span class="bad">4.00e-01</span>') == 1


def test_a_correctness_only_iteration_prints_no_zero_speedup():
    assert "x0.000" not in _best(None, None, None) and "correctness only" in _best(None, None, None)
    assert _best(0.5, 2.0, 0.25) == "best 0.5 ms (x2.000, peak 25.00%)"
