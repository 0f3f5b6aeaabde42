"""Every kind of bad input, uploaded through the API, gets its own clear failure and disturbs nothing else."""

from __future__ import annotations

import pytest

from benchmark.models import Evaluation, Kernel, Problem
from tests.benchmark.bad_inputs import BAD_INPUTS, BadInput


@pytest.mark.parametrize("case", BAD_INPUTS, ids=lambda case: case.name)
def test_a_bad_upload_is_stored_with_its_failure_kind_message_and_line(
    client, engineer, bearer, silu_mini, settings, case: BadInput
):
    for name, value in case.limits:
        setattr(settings, name, value)
    baseline_evaluations = Evaluation.objects.filter(kernel=silu_mini.baseline_kernel).count()
    payload = {"source": case.kernel, "name": f"{case.name}.py"}
    payload.update({"reference_source": case.reference} if case.reference else {"problem": "silu:mini"})
    problems, kernels = Problem.objects.count(), Kernel.objects.count()
    response = client.post("/api/kernels", payload, content_type="application/json", headers=bearer(engineer))
    if case.name == "broken_reference":  # the user's reference is checked at upload: refused, nothing kept
        assert response.status_code == 400, response.content
        assert "line 12 of the reference" in response.json()["detail"] and "undefined_scale" in response.json()["detail"]
        assert (Problem.objects.count(), Kernel.objects.count()) == (problems, kernels)
        return
    assert response.status_code == 201, response.content
    evaluation = response.json()["evaluation"]
    assert evaluation["status"] == "done"
    assert evaluation["correct"] is False
    assert evaluation["error_kind"] == case.kind, evaluation["error_message"]
    for word in case.words:
        assert word.lower() in evaluation["error_message"].lower()
    if case.line is not None:
        assert evaluation["error_line"] == case.line
    assert evaluation["latency_ms"] is None
    # The kernel is kept (so its author can read what went wrong) and nothing else changed.
    assert Kernel.objects.get(pk=response.json()["kernel"]["id"]).source == case.kernel
    assert Evaluation.objects.filter(kernel=silu_mini.baseline_kernel).count() == baseline_evaluations
