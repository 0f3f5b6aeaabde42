"""What cannot work here is shown disabled with the reason, and refused with the same reason (issue 20): the
hardware backend without a Neuron device, and the LLM agent without an endpoint. (The test machine has neither.)"""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from benchmark.services import request_evaluation
from benchmark.services.evaluations import backend_unavailable
from optimizer.models import Run
from optimizer.services import llm_unavailable


@pytest.fixture
def no_endpoint(settings):
    settings.ACCELOPT_LLM_ROLES = {}


@pytest.fixture
def no_device(monkeypatch):
    monkeypatch.setenv("ACCELOPT_NEURON_DEV_DIR", "/nonexistent-dev")


def test_the_run_form_shows_both_disabled_with_their_reasons(client, owner, problem, no_endpoint, no_device):
    client.force_login(owner)
    html = client.get("/runs/new/").content.decode()
    device = backend_unavailable("neuron", "trn1")
    assert device and "no Neuron device" in device
    assert '<option value="neuron" disabled' in html and "(unavailable here)" in html
    assert '<option value="llm" disabled' in html
    assert "the LLM agent needs a model for every role" in html


def test_the_form_and_the_api_refuse_the_hardware_backend_with_the_same_reason(client, owner, problem, no_device):
    client.force_login(owner)
    reason = backend_unavailable("neuron", "trn1")
    form = {"problem": str(problem.pk), "start": "baseline", "platform": "trn1", "backend": "neuron",
            "agent": "offline", "iterations": "1", "beam_width": "1", "plans_per_candidate": "1",
            "samples_per_plan": "1", "memory_size": "0", "seed": "0"}
    page = client.post("/runs/new/", form).content.decode()
    assert "no Neuron device" in page and not Run.objects.exists()
    response = client.post("/api/runs", {"problem": "double:mini", "backend": "neuron"}, content_type="application/json")
    assert response.status_code == 400 and response.json()["detail"] == reason


def test_the_api_refuses_the_llm_agent_with_the_forms_reason(client, owner, problem, no_endpoint):
    client.force_login(owner)
    response = client.post("/api/runs", {"problem": "double:mini", "agent": "llm"}, content_type="application/json")
    assert response.status_code == 400 and response.json()["detail"] == llm_unavailable()


def test_no_hardware_evaluation_is_queued_to_fail_later(problem, no_device):
    with pytest.raises(ValidationError, match="no Neuron device"):
        request_evaluation(problem.baseline_kernel, "trn1", "neuron")
