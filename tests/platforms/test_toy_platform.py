"""A platform is a folder and one registration: the toy platform (engine/platforms/toy/: numpy kernels, a backend
that predicts a microsecond per bytecode instruction, one offline rewrite) is registered here and nowhere else,
and goes through an upload, a sandboxed evaluation, an offline run and the leaderboard as NKI's and Triton's
platforms do. Any of those paths that picked NKI's or Triton's code itself (a request, a backend, a child role,
prompt rules, a rewrite catalog, a board) would evaluate, rank or rewrite the toy kernels wrongly, or refuse them.
"""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from benchmark.leaderboard import build_board
from benchmark.models import Evaluation, Platform, Problem
from benchmark.services import theoretical_peaks, upload_kernel
from engine.agents import prompting
from engine.agents.base import KernelView, PlanRequest, ProblemContext
from engine.evaluator import ErrorKind, evaluate
from engine.platforms import toy
from engine.platforms.registry import Backend, PlatformDefinition, register_platform, registered
from optimizer.models import Run, RunStatus

pytestmark = pytest.mark.django_db(transaction=True)

REFERENCE = '''
import numpy as np


def get_inputs():
    return [np.random.rand(8, 16).astype(np.float32)]


def forward(x):
    return x * 2.0
'''

# Correct, with one step that changes nothing: the toy catalog's rewrite drops it.
BASELINE = '''
import numpy as np


def kernel(x):
    y = x * 2.0
    y = y * 1.0
    return y
'''


@pytest.fixture
def toy_platform():
    with registered(toy.DEFINITIONS, toy.BACKENDS, toy.PARTS):
        yield
    assert toy.PLATFORM not in Platform and toy.BACKEND not in Backend  # forgotten after the test


def test_a_registered_toy_platform_is_uploaded_evaluated_optimized_offline_and_ranked(toy_platform, engineer,
                                                                                       settings, client):
    settings.ACCELOPT_EVALUATION_INLINE = True
    # Its counts: 128 multiplies, 512 bytes in and 512 out; priced by the toy's own peak part.
    problem = Problem.objects.create(suite="toys", slug="double", case="full", language=toy.LANGUAGE,
                                     title="Double a matrix", reference_source=REFERENCE, vector_flops=128,
                                     matmul_flops=0, hbm_bytes=1024)
    assert problem.platforms == (toy.PLATFORM,) and problem.default_platform == toy.PLATFORM
    assert theoretical_peaks(problem) == {toy.PLATFORM: pytest.approx(128 / toy.TOY_CPU.flops_per_ms)}

    # Upload: stored and evaluated on the toy platform's own backend, in the sandbox.
    baseline, _, evaluation = upload_kernel(engineer, kernel_source=BASELINE, problem=problem, wait=True)
    assert (evaluation.platform, evaluation.backend, evaluation.backend_version) == (toy.PLATFORM, toy.BACKEND,
                                                                                     "toy-model-1")
    assert evaluation.correct, evaluation.error_message
    assert evaluation.latency_ms > 0 and evaluation.is_rankable
    assert evaluation.peak_fraction == pytest.approx(128 / toy.TOY_CPU.flops_per_ms / evaluation.latency_ms)
    problem.baseline_kernel = baseline
    problem.save()

    # What the agents are told comes from the toy's prompts part.
    messages = prompting.planner_messages(PlanRequest(
        problem=ProblemContext(slug="double", reference_source=REFERENCE, platform=toy.PLATFORM),
        kernel=KernelView(BASELINE, latency_ms=evaluation.latency_ms), memory=(), count=1, seed=0))
    whole = "\n".join(m["content"] for m in messages)
    assert "Toy rules (toy-cpu)" in whole and "toy numpy" in whole
    assert "NKI" not in whole and "Trainium" not in whole and "GPU" not in whole

    # An offline run: the toy catalog's rewrite, each candidate evaluated by the toy backend.
    call_command("optimize", "--problem", "toys/double:full", "--iterations", "1", "--beam", "1", "--plans", "1",
                 "--samples", "1", "--public", stdout=StringIO())
    run = Run.objects.latest("pk")
    assert run.status == RunStatus.SUCCEEDED, run.error_message
    assert (run.platform, run.backend) == (toy.PLATFORM, toy.BACKEND)
    faster = Evaluation.objects.filter(kernel__run_id=run.pk, correct=True).order_by("latency_ms").first()
    assert faster is not None and "y * 1.0" not in faster.kernel.source
    assert faster.latency_ms < evaluation.latency_ms

    # The leaderboard: the toy's predicted latencies are its simulated group, the rewrite's kernel the best.
    board = build_board(toy.PLATFORM)
    assert board.case is None and board.simulator == toy.BACKEND
    (row,) = board.rows
    assert row.simulated.best.kernel_id == faster.kernel_id
    assert row.simulated.speedup == pytest.approx(evaluation.latency_ms / faster.latency_ms)
    page = client.get(reverse("benchmark:leaderboard"), {"platform": toy.PLATFORM})
    assert page.status_code == 200
    html = page.content.decode()
    assert f'data-problem="{problem.address}"' in html and faster.kernel.display_name in html
    assert "NKIBench" not in html

    # Its pages name its language as its registration does, and offer what its one backend is.
    client.force_login(engineer)
    problem_page = client.get(problem.get_absolute_url()).content.decode()
    assert '<dd data-testid="problem-language">toy numpy, on toy-cpu</dd>' in problem_page
    assert "NKI, on" not in problem_page and "export-solution" not in problem_page
    assert "Peak latency on toy-cpu" in problem_page and "Peak latency on trn1" not in problem_page
    # Its device backend is offered greyed out, with the reason its own host check gives.
    kernel_page = client.get(baseline.get_absolute_url()).content.decode()
    assert ('<option value="toy-device" disabled title="no toy device is attached for toy-cpu">Toy device '
            '(measured) (unavailable here)</option>') in kernel_page
    assert "with the current performance model is reused" in kernel_page


def test_an_uploaded_reference_for_the_toy_platform_is_a_toy_problem(toy_platform, engineer, settings):
    """A reference file uploaded for a platform is a problem in that platform's language, evaluated by its backend."""
    settings.ACCELOPT_EVALUATION_INLINE = True
    kernel, _, evaluation = upload_kernel(engineer, kernel_source=BASELINE, reference_source=REFERENCE,
                                          platform=toy.PLATFORM, wait=True)
    assert (kernel.problem.language, kernel.problem.platforms) == (toy.LANGUAGE, (toy.PLATFORM,))
    assert (evaluation.backend, evaluation.correct) == (toy.BACKEND, True), evaluation.error_message


def test_a_recording_backend_of_a_language_without_a_verifier_is_refused(toy_platform):
    """A backend that records the kernel's program (NKI's simulator) is trusted only with its language's verifier:
    on a platform whose language registers none, the evaluation stops before any child runs the kernel."""
    recorded = PlatformDefinition(platform="toy-recorded", language=toy.LANGUAGE, language_name="toy numpy",
                                  hardware_name="the toy CPU", hardware=toy.TOY_CPU, backends=(Backend.SIMULATOR,),
                                  default_backend=Backend.SIMULATOR)
    with registered((recorded,)):
        result = evaluate(BASELINE, REFERENCE, platform="toy-recorded", backend=Backend.SIMULATOR)
    assert result.error_kind is ErrorKind.INFRASTRUCTURE_ERROR and not result.correct
    assert result.error_message == ("backend 'simulator' records the kernel's program, but the language of "
                                    "platform 'toy-recorded' registers no verifier for it")


def test_a_platform_naming_a_backend_nobody_registered_is_refused(toy_platform):
    stray = PlatformDefinition(platform="stray", language=toy.LANGUAGE, language_name="toy numpy",
                               hardware_name="nothing", hardware=toy.TOY_CPU, backends=("warp-drive",),
                               default_backend="warp-drive")
    with pytest.raises(ValueError, match="warp-drive"):
        register_platform(stray)
    assert "stray" not in Platform
