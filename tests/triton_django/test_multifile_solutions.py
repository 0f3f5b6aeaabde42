"""Multi-file FlashInfer-Bench solutions (issue 24): a solution whose entry file imports its own helper files,
relatively as FlashInfer-Bench loads a solution (a package) or by their bare names, is imported, evaluated in
the sandbox on the Triton interpreter, exported back as the same JSON, and rewritten by a run with its helpers
kept; a file that cannot be one of its modules is refused, naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from benchmark import services
from benchmark.models import KernelOrigin, Problem

FIXTURES = Path(__file__).resolve().parent / "fixtures"
DEFINITION = FIXTURES / "studio_axpy_h16.json"
WORKLOADS = FIXTURES / "studio_axpy_h16.jsonl"

pytestmark = pytest.mark.django_db

MAIN = """import torch
import triton

from .ops.axpy import _axpy
from .config import BLOCK


def run(x, y):
    out = torch.empty_like(x)
    n = x.numel()
    _axpy[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=BLOCK)
    return out
"""
AXPY = """import triton
import triton.language as tl

from ..config import SCALE


@triton.jit
def _axpy(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, SCALE * x + y, mask=mask)
"""


def _solution(main: str = MAIN, config: str = "BLOCK = 32\nSCALE = 2.0\n", name: str = "studio_axpy_split",
              extra_path: str = "config.py") -> dict:
    return {
        "name": name, "definition": "studio_axpy_h16", "author": "accelopt-studio-tests",
        "spec": {"language": "triton", "target_hardware": ["H100"], "entry_point": "main.py::run", "dependencies": []},
        "sources": [{"path": "main.py", "content": main}, {"path": "ops/axpy.py", "content": AXPY},
                    {"path": extra_path, "content": config}],
        "description": "The axpy kernel split over three files.",
    }


def _import(solution: dict, **options) -> services.FlashInferImportSummary:
    texts = [(str(DEFINITION), DEFINITION.read_text()), (str(WORKLOADS), WORKLOADS.read_text()),
             ("solution.json", json.dumps(solution))]
    return services.import_flashinfer(services.flashinfer_items_from_texts(texts), platform="h100", **options)


def test_a_multi_file_solution_is_evaluated_in_the_sandbox_and_exported_as_it_came(settings):
    settings.ACCELOPT_EVALUATION_INLINE = True
    solution = _solution()
    summary = _import(solution, evaluate=True)
    problem = summary.problems[0]
    kernel = problem.baseline_kernel
    assert kernel.source == MAIN and kernel.entry_point == "main.py::run"
    evaluation = summary.evaluations[0]
    evaluation.refresh_from_db()
    assert evaluation.backend == "triton-interpreter"
    assert evaluation.correct is True and not evaluation.error_kind, evaluation.error_message
    assert services.export_solution(problem) == solution  # every file back, in its order


def test_a_helper_imported_by_its_bare_name_works_and_a_wrong_helper_fails(settings):
    settings.ACCELOPT_EVALUATION_INLINE = True
    bare = MAIN.replace("from .config import BLOCK", "from config import BLOCK")
    summary = _import(_solution(main=bare), evaluate=True)
    evaluation = summary.evaluations[0]
    evaluation.refresh_from_db()
    assert evaluation.correct is True, evaluation.error_message
    # The same entry file with a wrong helper is another solution: a wrong answer is caught in the helper.
    wrong = _solution(main=bare.replace("import triton\n", "import triton  # v2\n", 1),
                      config="BLOCK = 32\nSCALE = 3.0\n", name="studio_axpy_wrong")
    evaluation = _import(wrong, evaluate=True).evaluations[0]
    evaluation.refresh_from_db()
    assert evaluation.correct is False and evaluation.error_kind == "incorrect"


def test_a_syntax_error_in_a_helper_is_named_with_its_file(settings):
    settings.ACCELOPT_EVALUATION_INLINE = True
    evaluation = _import(_solution(config="BLOCK = = 32\n"), evaluate=True).evaluations[0]
    evaluation.refresh_from_db()
    assert evaluation.error_kind == "compile_error" and "config.py" in evaluation.error_message


def test_a_run_rewriting_the_entry_file_keeps_the_helpers():
    problem = _import(_solution()).problems[0]
    rewrite, _ = services.create_kernel(problem, MAIN.replace("out = torch.empty_like(x)", "out = x.new_empty(x.shape)"),
                                        origin=KernelOrigin.GENERATED, rewrite_of=problem.baseline_kernel)
    exported = services.export_solution(problem, rewrite)
    assert [s["path"] for s in exported["sources"]] == ["main.py", "ops/axpy.py", "config.py"]
    assert exported["sources"][0]["content"] == rewrite.source and exported["name"].startswith("accelopt_")


@pytest.mark.parametrize(("path", "expected"), [
    ("kernel.cu", r"sources\[2\]\.path: 'kernel\.cu': not a \.py file"),
    ("my-config.py", r"sources\[2\]\.path: 'my-config\.py': 'my-config' is not a Python identifier"),
    ("os.py", r"sources\[2\]\.path: 'os\.py': 'os' would shadow the module of that name"),
])
def test_a_file_that_cannot_be_a_module_is_refused_naming_it(path, expected):
    with pytest.raises(ValidationError, match=expected):
        _import(_solution(extra_path=path))
    assert not Problem.objects.exists()


def test_the_same_entry_file_with_other_helpers_is_refused_not_merged():
    _import(_solution())
    with pytest.raises(ValidationError, match="same main.py but other files beside it"):
        _import(_solution(config="BLOCK = 16\nSCALE = 2.0\n", name="studio_axpy_block16"))


def _in_sandbox(files: dict[str, str]):
    """A solution straight into the sandbox (no import checks), on the fixture's smallest workload."""
    from engine.platforms.triton.pipeline import evaluate_triton

    solution = {**_solution(), "sources": [{"path": p, "content": c} for p, c in files.items()]}
    workload = json.loads(WORKLOADS.read_text().splitlines()[0])
    return evaluate_triton(solution, json.loads(DEFINITION.read_text()), workload, platform="h100", seeds=(1, 2, 3))


def test_in_the_sandbox_a_solution_file_named_like_a_module_is_only_ever_its_own():
    # Its os.py is what its `import os` gets: never the real os (which the allow-list refuses).
    own_os = _in_sandbox({"main.py": "import os\nassert not hasattr(os, 'system'), 'the real os'\n" + MAIN,
                          "ops/axpy.py": AXPY, "config.py": "BLOCK = 32\nSCALE = 2.0\n", "os.py": "name = 'mine'\n"})
    assert own_os.correct, own_os.error_message
    # A helper file is held to the same allow-list as the entry file.
    escaping = _in_sandbox({"main.py": MAIN, "ops/axpy.py": "import subprocess\n" + AXPY,
                            "config.py": "BLOCK = 32\nSCALE = 2.0\n"})
    assert escaping.error_kind == "rejected" and "import of 'subprocess' is not allowed" in escaping.error_message



def test_a_run_s_agents_see_the_helper_files_by_name_and_text(engineer):
    from engine.agents import prompting
    from engine.agents.base import KernelView, PlanRequest, WriteRequest
    from optimizer.adapters import problem_context
    from optimizer.services import create_run

    problem = _import(_solution()).problems[0]
    run = create_run(engineer, problem, backend="triton-interpreter")
    context = problem_context(run)
    assert context.entry_file == "main.py"
    assert context.helper_files == (("ops/axpy.py", AXPY), ("config.py", "BLOCK = 32\nSCALE = 2.0\n"))
    kernel = KernelView(run.start_kernel.source)
    for rendered in (prompting.planner_messages(PlanRequest(context, kernel, (), count=2, seed=1)),
                     prompting.executor_messages(WriteRequest(context, kernel, "1. Larger blocks", (), seed=1))):
        user = rendered[1]["content"]
        assert "## `ops/axpy.py`" in user and AXPY.strip() in user and "## `config.py`" in user
        assert "SCALE = 2.0" in user and user.count(MAIN.strip()) == 1
