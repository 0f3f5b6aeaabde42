"""An imported FlashInfer-Bench solution evaluated through the evaluation service on the Triton interpreter
(issue 24): judged correct with no latency, shown as "correctness only: no GPU", never ranked; a wrong kernel
uploaded for the same problem judged incorrect. Needs the interpreter backend in engine.evaluator."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from benchmark import services
from benchmark.leaderboard import build_board
from benchmark.models import Problem
from engine.platforms.registry import BACKENDS

FIXTURES = Path(__file__).resolve().parent / "fixtures"

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif("triton-interpreter" not in BACKENDS,
                       reason="the triton-interpreter backend is not registered yet"),
]


@pytest.fixture
def imported(settings) -> Problem:
    settings.ACCELOPT_EVALUATION_INLINE = True
    summary = services.import_flashinfer(services.flashinfer_items_from_paths([str(FIXTURES)]), platform="h100",
                                         evaluate=True)
    return summary.problems[0]


def test_the_imported_solution_is_judged_correct_with_no_latency(imported):
    evaluation = imported.baseline_kernel.evaluations.get()
    assert (evaluation.platform, evaluation.backend) == ("h100", "triton-interpreter")
    assert evaluation.correct is True and not evaluation.error_kind, evaluation.error_message
    assert evaluation.latency_ms is None and not evaluation.is_rankable
    row = build_board("h100").rows[0]
    assert row.measured.best is None and row.correct_only == evaluation
    assert services.export_solution(imported)["name"] == "studio_axpy_blocked"


def test_a_wrong_triton_kernel_is_judged_incorrect(imported, engineer):
    wrong = imported.baseline_kernel.source.replace("2.0 * x + y", "x + y")
    _, _, evaluation = services.upload_kernel(engineer, kernel_source=wrong, problem=imported, wait=True)
    evaluation.refresh_from_db()
    assert (evaluation.platform, evaluation.backend) == ("h100", "triton-interpreter")
    assert evaluation.correct is False and evaluation.error_kind == "incorrect"


def test_the_evaluate_command_judges_a_triton_kernel_on_its_problems_platform(imported, tmp_path):
    path = tmp_path / "kernel.py"
    path.write_text(imported.baseline_kernel.source)
    out = StringIO()
    call_command("evaluate", str(path), "--problem", imported.address, "--json", stdout=out)
    data = json.loads(out.getvalue())
    assert (data["platform"], data["backend"], data["correct"], data["latency_ms"]) == (
        "h100", "triton-interpreter", True, None)
