"""Every platform works after `make run`, or says what to install (issue 32): with PyTorch or Triton missing, the
Triton pages say so before anything is queued, nothing is queued, and an evaluation that meets a missing package
is a configuration error naming it and the install command, tried once, never "ours, retried"."""

from __future__ import annotations

import html
import importlib.util
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from benchmark import services
from benchmark.models import ErrorKind, Evaluation, Kernel, Problem
from engine.evaluator.requirements import (
    CONFIGURATION_LABEL,
    TRITON_INSTALL,
    missing_module,
    missing_triton_packages,
)
from engine.platforms.triton.pipeline import evaluate_triton
from tests.conftest import TEST_PASSWORD

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).resolve().parent / "fixtures"
REAL_FIND_SPEC = importlib.util.find_spec


@pytest.fixture
def no_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """This interpreter as if the `triton` extra had not installed: torch cannot be found (nothing is unloaded)."""
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a, **k: None if name == "torch" else REAL_FIND_SPEC(name, *a, **k))


def test_with_the_extra_installed_nothing_is_missing():
    assert missing_triton_packages() == []


def test_the_import_page_says_what_to_install_before_anything_is_queued(client, engineer, no_torch):
    assert client.login(username=engineer.username, password=TEST_PASSWORD)
    html = client.get("/problems/import-flashinfer/").content.decode()
    assert 'data-testid="evaluation-unavailable"' in html
    assert "PyTorch (`torch`)" in html and "pip install -e &#x27;.[triton]&#x27;" in html
    with (FIXTURES / "studio_axpy_h16.json").open("rb") as d, (FIXTURES / "studio_axpy_blocked.solution.json").open("rb") as s:
        response = client.post("/problems/import-flashinfer/", {"files": [d, s], "platform": "h100", "evaluate": "on"})
    assert "nothing was imported" in response.content.decode()
    assert Problem.objects.count() == 0 and Evaluation.objects.count() == 0


def test_a_triton_problem_page_says_it_and_an_evaluation_is_refused(client, engineer, triton_problem, no_torch):
    assert client.login(username=engineer.username, password=TEST_PASSWORD)
    html = client.get(triton_problem.get_absolute_url()).content.decode()
    assert "Triton kernels cannot be evaluated on this server" in html and TRITON_INSTALL.replace("'", "&#x27;") in html
    with pytest.raises(ValidationError, match=r"PyTorch \(`torch`\).*pip install -e '\.\[triton\]'"):
        services.request_evaluation(triton_problem.baseline_kernel, "h100")
    assert Evaluation.objects.count() == 0


def test_an_nki_problem_page_says_nothing_of_triton(client, engineer, nki_problem, no_torch):
    assert client.login(username=engineer.username, password=TEST_PASSWORD)
    assert "evaluation-unavailable" not in client.get(nki_problem.get_absolute_url()).content.decode()


def test_an_evaluation_meeting_a_missing_package_is_a_configuration_error_tried_once(no_torch, triton_problem,
                                                                                      client, engineer):
    import json

    definition = json.loads((FIXTURES / "studio_axpy_h16.json").read_text())
    solution = json.loads((FIXTURES / "studio_axpy_blocked.solution.json").read_text())
    result = evaluate_triton(solution, definition, {"uuid": "w", "axes": {"batch": 3}, "inputs": {}}, platform="h100")
    assert result.error_kind is ErrorKind.INFRASTRUCTURE_ERROR and result.attempts == 1
    assert "PyTorch (`torch`)" in result.error_message and TRITON_INSTALL in result.error_message
    # Stored, it reads as a configuration error, not "ours, retried".
    evaluation = Evaluation.objects.create(kernel=Kernel.objects.get(pk=triton_problem.baseline_kernel_id),
                                           platform="h100", backend="triton-interpreter", backend_version="x")
    services.save_result(evaluation.pk, result)
    evaluation.refresh_from_db()
    assert evaluation.get_error_kind_display() == CONFIGURATION_LABEL == evaluation.outcome
    assert "retried" not in evaluation.outcome.replace("not retried", "")
    # On its page: what to do, never "this failure is ours" with a Retry.
    client.login(username=engineer.username, password=TEST_PASSWORD)
    page = client.get(f"/evaluations/{evaluation.pk}/fragment/").content.decode()
    assert 'data-testid="missing-package"' in page and "Evaluate again" in page
    assert html.escape(TRITON_INSTALL) in page
    assert "This failure is ours" not in page and ">Retry<" not in page


def test_only_our_packages_count_as_missing():
    assert missing_module(ModuleNotFoundError("No module named 'torch'", name="torch")) == "torch"
    assert missing_module(ModuleNotFoundError("x", name="triton.language")) == "triton"
    assert missing_module(ModuleNotFoundError("x", name="scipy")) is None  # a kernel's own import: its own
    assert missing_module(ValueError("torch")) is None
