"""Pages, uploads, runs and the leaderboard per platform (issue 24): a Triton problem lives on GPU platforms,
an NKI problem on Trainium ones, and nothing lets one be evaluated or optimized on the other's."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from benchmark import services
from benchmark.leaderboard import CASES, build_board
from benchmark.models import Backend, Evaluation, EvaluationStatus, Kernel
from benchmark.services.evaluations import backend_unavailable
from optimizer import services as run_services
from tests.conftest import TEST_PASSWORD

pytestmark = pytest.mark.django_db


def _result(kernel: Kernel, backend: str, latency: float | None, *, platform: str = "h100") -> Evaluation:
    return Evaluation.objects.create(kernel=kernel, platform=platform, backend=backend, backend_version="test",
                                     status=EvaluationStatus.DONE, compiled=True, runnable=True, correct=True,
                                     latency_ms=latency)


def _kernel(problem, source: str) -> Kernel:
    return services.create_kernel(problem, source)[0]


def test_the_triton_board_ranks_gpu_measurements_and_marks_interpreter_results_correct_only(
    client, triton_problem, nki_problem
):
    _result(triton_problem.baseline_kernel, Backend.TRITON_INTERPRETER, None)
    board = build_board("h100")
    assert [row.problem for row in board.rows] == [triton_problem]
    row = board.rows[0]
    assert row.measured.best is None and row.correct_only.kernel == triton_problem.baseline_kernel
    html = client.get("/leaderboard/?platform=h100").content.decode()
    assert "FlashInfer-Bench leaderboard" in html and "correctness only: no GPU" in html
    assert 'data-testid="correct-only"' in html
    # A GPU measurement ranks, and the baseline under the same backend gives the speedup.
    _result(triton_problem.baseline_kernel, Backend.CUDA, 0.30)
    _result(_kernel(triton_problem, "# faster\n"), Backend.CUDA, 0.10)
    row = build_board("h100").rows[0]
    assert row.measured.best.latency_ms == 0.10 and row.measured.speedup == pytest.approx(3.0)
    assert row.simulated.best is None  # a GPU has no simulator
    assert row.correct_only is None
    assert "measured · GPU" in client.get("/leaderboard/?platform=h100").content.decode()
    # Another GPU's board has its own numbers: none on h200 yet.
    assert build_board("h200").rows[0].measured.best is None


def test_nki_boards_never_list_triton_problems(client, triton_problem, nki_problem):
    for case in CASES:
        assert triton_problem not in [row.problem for row in build_board("trn1", case).rows]
    html = client.get("/leaderboard/?platform=trn1&case=mini").content.decode()
    assert triton_problem.slug not in html


def test_a_kernel_is_uploaded_for_its_problems_platforms_only(triton_problem, nki_problem, engineer):
    with pytest.raises(ValidationError, match="triton problem.*h100, h200"):
        services.upload_kernel(engineer, kernel_source="# t\n", problem=triton_problem, platform="trn1",
                               evaluate=False)
    with pytest.raises(ValidationError, match="nki problem.*trn1, trn2"):
        services.upload_kernel(engineer, kernel_source="# n\n", problem=nki_problem, platform="h100", evaluate=False)
    assert not Kernel.objects.filter(source__in=["# t\n", "# n\n"]).exists()  # refused before storing
    kernel, created, _ = services.upload_kernel(engineer, kernel_source="def run(x, y):\n    return x\n",
                                                problem=triton_problem, evaluate=False)
    assert created and kernel.entry_point == "main.py::run"
    with pytest.raises(ValidationError, match="NKIBench's format is a problem for trn1, trn2, trn3, not for h200; for h100, h200, import"):
        services.upload_kernel(engineer, kernel_source="# k\n", reference_source="# ref\n", platform="h200",
                               evaluate=False)


def test_an_evaluation_is_refused_on_another_languages_platform(triton_problem):
    with pytest.raises(ValidationError, match="runs nki kernels"):
        services.request_evaluation(triton_problem.baseline_kernel, "trn1")
    with pytest.raises(ValidationError, match="does not evaluate h100 kernels"):
        services.request_evaluation(triton_problem.baseline_kernel, "h100", "simulator")


def test_a_run_is_created_only_on_a_platform_of_the_problems_language(triton_problem, engineer):
    with pytest.raises(ValidationError, match="triton problem"):
        run_services.create_run(engineer, triton_problem, platform="trn1")
    with pytest.raises(ValidationError, match="does not evaluate h200 kernels"):
        run_services.create_run(engineer, triton_problem, platform="h200", backend="simulator")
    run = run_services.create_run(engineer, triton_problem)
    assert (run.platform, run.backend) == ("h100", "triton-interpreter")


def test_the_run_form_names_the_platform_mismatch(client, triton_problem, engineer):
    assert client.login(username=engineer.username, password=TEST_PASSWORD)
    response = client.post("/runs/new/", {
        "problem": triton_problem.pk, "start": "baseline", "platform": "trn1", "agent": "offline",
        "backend": "simulator", "iterations": 1, "beam_width": 1, "plans_per_candidate": 1, "samples_per_plan": 1,
        "memory_size": 0, "seed": 0,
    })
    assert response.status_code == 200
    assert "choose one of its platforms: h100, h200" in response.content.decode()


def test_problem_pages_show_the_platforms_of_their_language(client, triton_problem, nki_problem):
    triton_page = client.get(triton_problem.get_absolute_url()).content.decode()
    assert "<th>h100</th>" in triton_page and "<th>trn1</th>" not in triton_page
    assert "Triton, on h100, h200" in triton_page and 'data-testid="workloads"' in triton_page
    _kernel(nki_problem, "# an nki kernel\n")
    nki_page = client.get(nki_problem.get_absolute_url()).content.decode()
    assert "<th>trn1</th>" in nki_page and "<th>h100</th>" not in nki_page
    assert "export-solution" not in nki_page
    listing = client.get("/problems/").content.decode()
    assert "flashinfer/studio_axpy_h16" in listing and "Triton, on h100, h200: results on its page" in listing


def test_the_api_describes_a_problems_language_and_defaults_to_its_platform(client, triton_problem, engineer,
                                                                             make_token):
    data = client.get(f"/api/problems/{triton_problem.address}").json()
    assert (data["language"], data["platforms"]) == ("triton", ["h100", "h200"])
    assert data["definition"] == {"name": "studio_axpy_h16"} and len(data["workloads"]) == 1
    response = client.post("/api/kernels", {"problem": triton_problem.address, "source": "def run(x, y):\n  return y\n",
                                            "evaluate": False},
                           content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {make_token(engineer)}")
    assert response.status_code == 201, response.content
    assert response.json()["kernel"]["entry_point"] == "main.py::run"


def test_a_kernel_page_offers_the_backends_of_its_problems_platforms(client, engineer, triton_problem, nki_problem,
                                                                    monkeypatch, tmp_path):
    monkeypatch.setenv("ACCELOPT_NEURON_DEV_DIR", str(tmp_path))  # no Neuron device here, whatever the host has
    client.force_login(engineer)
    triton_page = client.get(triton_problem.baseline_kernel.get_absolute_url()).content.decode()
    assert '<option value="triton-interpreter" selected>Triton interpreter (CPU, correctness only)' in triton_page
    assert '<option value="cuda"' in triton_page and "NVIDIA GPU (measured)" in triton_page
    assert "simulator" not in triton_page and "with the current backend version is reused" in triton_page
    # An NKI kernel: the simulator by default, the hardware offered but greyed out where it cannot run.
    nki_page = client.get(_kernel(nki_problem, "# an nki kernel\n").get_absolute_url()).content.decode()
    assert '<option value="simulator" selected>Simulator (CPU, predicted latency)</option>' in nki_page
    assert '<option value="neuron" disabled title="the neuron backend cannot run here: no Neuron device' in nki_page
    assert "Neuron hardware (measured) (unavailable here)" in nki_page
    assert "triton-interpreter" not in nki_page and '<option value="null"' not in nki_page
    assert "with the current performance model is reused" in nki_page


@pytest.mark.skipif(bool(__import__("glob").glob("/dev/nvidia[0-9]*")), reason="this host has an NVIDIA GPU")
def test_a_gpu_measurement_is_refused_on_a_host_without_a_gpu(client, triton_problem, engineer):
    with pytest.raises(ValidationError, match="no NVIDIA GPU"):
        services.request_evaluation(triton_problem.baseline_kernel, "h100", "cuda")
    assert backend_unavailable("triton-interpreter", "h100") is None
    client.force_login(engineer)
    response = client.post(f"/kernels/{triton_problem.baseline_kernel.pk}/evaluate/",
                           {"platform": "h100", "backend": "cuda"}, follow=True)
    assert "no NVIDIA GPU" in response.content.decode()
