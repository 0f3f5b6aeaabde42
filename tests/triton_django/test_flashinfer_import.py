"""FlashInfer-Bench in and out (issue 24): our own small definition, workloads and solution
(tests/triton_django/fixtures/, written for these tests) imported through the command, the page and the API;
bad input named and nothing stored; the imported solution evaluated on the Triton interpreter; the export
imported back as the same kernel."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from benchmark import services
from benchmark.models import Backend, Evaluation, EvaluationStatus, Kernel, KernelOrigin, Problem
from tests.conftest import TEST_PASSWORD

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).resolve().parent / "fixtures"
DEFINITION = FIXTURES / "studio_axpy_h16.json"
WORKLOADS = FIXTURES / "studio_axpy_h16.jsonl"
SOLUTION = FIXTURES / "studio_axpy_blocked.solution.json"
ADDRESS = "flashinfer/studio_axpy_h16:workloads"


def _import(*paths: Path, **options) -> services.FlashInferImportSummary:
    return services.import_flashinfer(services.flashinfer_items_from_paths([str(p) for p in paths]),
                                      platform=options.pop("platform", "h100"), **options)


def _counts() -> tuple[int, int]:
    return Problem.objects.count(), Kernel.objects.count()


def test_the_command_imports_a_definition_its_workloads_and_a_solution(capsys):
    call_command("import_flashinfer", str(FIXTURES), "--platform", "h100")
    problem = services.get_problem_by_address(ADDRESS, require_visible=False)
    assert (problem.language, problem.family, problem.parameters) == ("triton", "elementwise", {"hidden": 16})
    assert problem.reference_source.startswith("import torch")
    assert problem.definition["name"] == "studio_axpy_h16"
    assert [w["workload"]["uuid"] for w in problem.workloads] == ["studio-axpy-b3", "studio-axpy-b8"]
    kernel = problem.baseline_kernel
    assert (kernel.origin, kernel.name, kernel.entry_point) == (KernelOrigin.IMPORTED, "studio_axpy_blocked",
                                                                 "main.py::run")
    assert "@triton.jit" in kernel.source
    assert "1 problems (1 new), 2 workloads added, 1 solutions (1 new)" in capsys.readouterr().out
    # Idempotent: the same files again change nothing.
    before = _counts()
    call_command("import_flashinfer", str(DEFINITION), str(WORKLOADS), str(SOLUTION))
    assert _counts() == before
    assert len(Problem.objects.get(pk=problem.pk).workloads) == 2


def _broken(tmp_path: Path, name: str, change) -> Path:
    """A copy of the fixtures with one file changed by `change(data) -> data`."""
    folder = tmp_path / "fib"
    shutil.copytree(FIXTURES, folder)
    path = folder / name
    if path.suffix == ".jsonl":
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        path.write_text("\n".join(json.dumps(line) for line in change(lines)) + "\n")
    else:
        path.write_text(json.dumps(change(json.loads(path.read_text()))))
    return folder


def _without(key):
    def change(data):
        data.pop(key)
        return data
    return change


@pytest.mark.parametrize(("name", "change", "expected"), [
    ("studio_axpy_h16.json", _without("outputs"), r"studio_axpy_h16\.json.*outputs"),
    ("studio_axpy_blocked.solution.json", lambda d: {**d, "spec": {**d["spec"], "language": "cuda"}},
     r"studio_axpy_blocked\.solution\.json.*cuda"),
    ("studio_axpy_blocked.solution.json", lambda d: {**d, "definition": "no_such_definition"},
     r"studio_axpy_blocked\.solution\.json.*no_such_definition"),
    ("studio_axpy_h16.jsonl", lambda lines: [lines[0], {**lines[1], "workload": {**lines[1]["workload"], "axes": {}}}],
     r"studio_axpy_h16\.jsonl:2.*batch"),
])
def test_a_bad_file_is_named_and_nothing_of_the_import_is_stored(tmp_path, name, change, expected):
    folder = _broken(tmp_path, name, change)
    with pytest.raises(ValidationError, match=expected):
        _import(folder)
    assert _counts() == (0, 0)


def test_a_bad_reimport_leaves_what_was_stored_before(tmp_path):
    _import(FIXTURES)
    problem = Problem.objects.get()
    before = (problem.definition, problem.workloads, _counts())
    folder = _broken(tmp_path, "studio_axpy_h16.jsonl", lambda lines: [*lines, {"definition": "studio_axpy_h16"}])
    (folder / "studio_axpy_blocked.solution.json").write_text(
        SOLUTION.read_text().replace("studio_axpy_blocked", "studio_axpy_other").replace("BLOCK=32", "BLOCK=16"))
    with pytest.raises(ValidationError, match=r"studio_axpy_h16\.jsonl:3"):
        _import(folder)
    problem.refresh_from_db()
    assert (problem.definition, problem.workloads, _counts()) == before


def test_the_command_reports_errors_without_a_traceback(tmp_path):
    folder = _broken(tmp_path, "studio_axpy_h16.json", lambda d: [d])
    with pytest.raises(CommandError, match=r"studio_axpy_h16\.json: neither a definition"):
        call_command("import_flashinfer", str(folder))
    with pytest.raises(CommandError, match="no such file"):
        call_command("import_flashinfer", str(tmp_path / "missing"))


def test_an_nki_platform_is_refused():
    with pytest.raises(ValidationError, match="trn1 runs nki kernels"):
        _import(FIXTURES, platform="trn1")


def test_the_page_imports_several_files_at_once(client, engineer):
    assert client.login(username=engineer.username, password=TEST_PASSWORD)
    with DEFINITION.open("rb") as d, WORKLOADS.open("rb") as w, SOLUTION.open("rb") as s:
        response = client.post("/problems/import-flashinfer/", {"files": [d, w, s], "platform": "h200"}, follow=True)
    problem = Problem.objects.get()
    assert response.redirect_chain[-1][0] == problem.get_absolute_url()
    html = response.content.decode()
    assert "studio-axpy-b8" in html and "Download the best kernel as a FlashInfer-Bench solution" in html


def test_the_page_shows_the_error_naming_the_file(client, engineer, tmp_path):
    assert client.login(username=engineer.username, password=TEST_PASSWORD)
    bad = tmp_path / "broken.json"
    bad.write_text("{not json")
    with bad.open("rb") as handle:
        response = client.post("/problems/import-flashinfer/", {"files": [handle], "platform": "h100"})
    assert response.status_code == 200 and "broken.json: not valid JSON" in response.content.decode()
    assert _counts() == (0, 0)


def test_the_api_imports_and_exports(client, engineer, make_token):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {make_token(engineer)}"}
    body = {
        "platform": "h100",
        "definitions": [json.loads(DEFINITION.read_text())],
        "workloads": [json.loads(line) for line in WORKLOADS.read_text().splitlines()],
        "solutions": [json.loads(SOLUTION.read_text())],
    }
    response = client.post("/api/flashinfer/import", body, content_type="application/json", **auth)
    assert response.status_code == 200, response.content
    data = response.json()
    assert (data["problems_created"], data["workloads_added"], data["kernels_created"]) == (1, 2, 1)
    assert data["problems"][0]["language"] == "triton"
    bad = client.post("/api/flashinfer/import", {**body, "solutions": [{"spec": {}, "sources": []}]},
                      content_type="application/json", **auth)
    assert bad.status_code == 400 and bad.json()["detail"].startswith("solutions[0]")
    # Nothing judged correct yet: nothing to export, said plainly.
    missing = client.get(f"/api/flashinfer/solutions/{ADDRESS}")
    assert missing.status_code == 400 and "no kernel judged correct" in missing.json()["detail"]


def _mark_correct(kernel: Kernel, backend: str = Backend.TRITON_INTERPRETER, latency: float | None = None) -> None:
    Evaluation.objects.create(kernel=kernel, platform="h100", backend=backend, backend_version="test",
                              status=EvaluationStatus.DONE, compiled=True, runnable=True, correct=True,
                              latency_ms=latency)


def test_an_exported_solution_imports_back_as_the_same_kernel(client, tmp_path):
    _import(FIXTURES)
    problem = Problem.objects.get()
    _mark_correct(problem.baseline_kernel)
    exported = client.get(f"/api/flashinfer/solutions/{ADDRESS}").json()
    assert exported == json.loads(SOLUTION.read_text())  # what the solution said comes back
    download = client.get(f"/problems/{problem.pk}/solution.json")
    assert download["Content-Disposition"] == 'attachment; filename="studio_axpy_blocked.json"'
    assert json.loads(download.content) == exported
    # Re-imported: the same kernel (nothing new); exported again: identical.
    (tmp_path / "again.json").write_text(json.dumps(exported))
    summary = _import(tmp_path / "again.json")
    assert summary.kernels == [problem.baseline_kernel] and summary.kernels_created == 0
    assert services.export_solution(problem) == exported


def test_the_export_prefers_the_fastest_gpu_measurement(tmp_path):
    _import(FIXTURES)
    problem = Problem.objects.get()
    faster = services.create_kernel(problem, problem.baseline_kernel.source.replace("32", "64"))[0]
    _mark_correct(problem.baseline_kernel)
    _mark_correct(faster, Backend.CUDA, 0.01)
    _mark_correct(problem.baseline_kernel, Backend.CUDA, 0.02)
    solution = services.export_solution(problem)
    assert solution["sources"][0]["content"] == faster.source
    assert solution["spec"]["entry_point"] == "main.py::run" and solution["definition"] == "studio_axpy_h16"
