"""Prompts per platform: a Triton problem's four roles speak of Triton on an NVIDIA GPU (the entry-point
contract, the GPU's rules and peaks, the profile's meanings or 'correctness only'), never of NKI or
Trainium; an NKI problem's prompts say nothing of Triton or GPUs."""

from __future__ import annotations

import re

import pytest

from engine.agents import prompting
from engine.agents.base import (
    FixRequest,
    KernelView,
    MemoryItem,
    PlanRequest,
    ProblemContext,
    SummaryRequest,
    WriteRequest,
)
from tests.triton_agents.kernels import ADD

NKI_WORDS = re.compile(r"\bNKI\b|Trainium|NeuronCore|SBUF|PSUM|\bnl\.|nisa", re.IGNORECASE)
GPU_WORDS = re.compile(r"Triton|\bGPU\b|NVIDIA|main\.py|tl\.load|num_warps", re.IGNORECASE)

TRITON_REFERENCE = "import torch\n\ndef run(x, y):\n    return x + y\n"
NKI_REFERENCE = "import numpy as np\n\ndef forward(x):\n    return x * 2\n"
MEMORY = (MemoryItem(key="m1", title="Mask loads and stores at the edge of the data", summary="mask=offs < n",
                     speedup=1.0, polarity="negative", problem="add_mini"),)


def messages(problem: ProblemContext, kernel: KernelView) -> dict[str, list[dict[str, str]]]:
    return {
        "planner": prompting.planner_messages(PlanRequest(problem, kernel, MEMORY, count=3, seed=1)),
        "executor": prompting.executor_messages(WriteRequest(problem, kernel, "1. Larger blocks", MEMORY, seed=1)),
        "fixer": prompting.fixer_messages(FixRequest(problem, kernel, "Larger blocks", kernel.source, "incorrect",
                                                     "wrong output on shapes [(1000,)]", attempt=1, seed=1)),
        "summarizer": prompting.summarizer_messages(SummaryRequest(problem, kernel.source, kernel.source, 1.0,
                                                                   "negative", "Larger blocks", seed=1,
                                                                   failure="incorrect: wrong output")),
    }


def text(rendered: list[dict[str, str]]) -> str:
    return "\n".join(m["content"] for m in rendered)


@pytest.mark.parametrize("platform", ["h100", "h200"])
def test_triton_prompts_speak_of_triton_on_the_gpu_and_never_of_nki(platform):
    problem = ProblemContext(slug="add_mini", reference_source=TRITON_REFERENCE, platform=platform)
    for role, rendered in messages(problem, KernelView(ADD)).items():
        whole = text(rendered)
        assert not re.search(r"\{\{\w+\}\}", whole), role
        assert "Triton" in whole and "GPU" in whole, role
        # The kernel itself is shown as given; everything else must not mention NKI.
        assert not NKI_WORDS.search(whole.replace(ADD.strip(), "")), (role, NKI_WORDS.search(whole))
    planner = text(messages(problem, KernelView(ADD))["planner"])
    assert "main.py::run" in planner and "Import `math`, `torch`, `triton`" in planner and "is refused" in planner
    assert "mask=" in planner and "@triton.autotune" in planner
    assert "broke a kernel (the result failed its check): avoid it" in planner  # a failed rewrite's lesson


def test_the_gpu_rules_carry_the_platform_s_documented_peaks():
    h100 = prompting.hardware_rules("h100")
    h200 = prompting.hardware_rules("h200")
    assert "NVIDIA H100 SXM: 3.35 TB/s HBM" in h100 and "990 TFLOP/s" in h100 and "132 SMs" in h100
    assert "NVIDIA H200 SXM: 4.80 TB/s HBM" in h200


def test_a_triton_profile_without_latency_says_correctness_only():
    problem = ProblemContext(slug="add_mini", reference_source=TRITON_REFERENCE, platform="h100")
    user = messages(problem, KernelView(ADD))["planner"][1]["content"]
    assert "correctness only" in user and "measures no time" in user
    assert "latency_ms" not in user


def test_a_measured_triton_profile_is_shown_with_gpu_meanings():
    problem = ProblemContext(slug="add_mini", reference_source=TRITON_REFERENCE, platform="h200")
    kernel = KernelView(ADD, latency_ms=0.0421, peak_fraction=0.61, profile={"spread": 0.012})
    user = messages(problem, kernel)["planner"][1]["content"]
    assert "| latency_ms | 0.0421 | median GPU time" in user
    assert "| peak_fraction | 0.61 | roofline time" in user
    assert "| spread | 0.012 | relative spread" in user
    assert "correctness only" not in user


def test_nki_prompts_say_nothing_of_triton_or_gpus():
    problem = ProblemContext(slug="double_mini", reference_source=NKI_REFERENCE, platform="trn1")
    kernel = KernelView("def kernel(x):\n    return x\n", latency_ms=1.0, profile={"hbm_read_bytes": 64.0})
    for role, rendered in messages(problem, kernel).items():
        whole = text(rendered)
        assert "NKI" in whole and "Trainium" in whole, role
        assert not GPU_WORDS.search(whole), (role, GPU_WORDS.search(whole))
    assert "(no profile: this kernel has not been profiled)" in prompting.format_profile(KernelView("x"), "nki")


def test_the_failure_is_told_to_the_summarizer():
    problem = ProblemContext(slug="add_mini", reference_source=TRITON_REFERENCE, platform="h100")
    user = messages(problem, KernelView(ADD))["summarizer"][1]["content"]
    assert "broke the kernel" in user and "incorrect: wrong output" in user and "not a measurement" in user


def test_a_failing_start_kernel_is_shown_to_the_planner_as_failing():
    problem = ProblemContext(slug="add_mini", reference_source=TRITON_REFERENCE, platform="h100")
    kernel = KernelView(ADD, failure="runtime_error: the kernel wrote outside the buffer of output out")
    user = messages(problem, kernel)["planner"][1]["content"]
    assert "This kernel FAILS its correctness check (runtime_error: the kernel wrote outside" in user
    assert "correctness only" in user  # and it was still not timed


def test_an_executor_reply_without_imports_gets_the_triton_header_not_nki_s():
    from engine.agents.imports import complete_imports

    body = ADD.split("\n\n\n", 1)[1]  # the kernels and run, without the import lines
    completed = complete_imports(body, "h100")
    assert completed.startswith("import torch\nimport triton\nimport triton.language as tl\n")
    assert "neuronxcc" not in completed and "numpy" not in completed


def test_a_cuda_evaluation_s_profile_reaches_the_planner_with_its_spread_and_roofline():
    from types import SimpleNamespace

    from engine.search.state import Evaluation

    # The shape of a cuda backend result (engine.platforms.triton.pipeline): nested timing, top-level numbers.
    result = SimpleNamespace(correct=True, latency_ms=0.318, peak_fraction=0.17, error_kind=None, error_message=None,
                             profile={"timing": {"median_ms": 0.318, "spread": 0.011}, "environment": {"gpu": "H200"},
                                      "flops": 3.3e8, "bytes": 2.66e8, "spread": 0.011, "roofline_source": "[H200-DS]"})
    ev = Evaluation.from_result(result)
    problem = ProblemContext(slug="rmsnorm_h128", reference_source=TRITON_REFERENCE, platform="h200")
    kernel = KernelView(ADD, latency_ms=ev.latency_ms, peak_fraction=ev.peak_fraction, profile=ev.profile)
    user = messages(problem, kernel)["planner"][1]["content"]
    assert "| latency_ms | 0.318 | median GPU time" in user and "| peak_fraction | 0.17 | roofline time" in user
    assert "| spread | 0.011 | relative spread" in user and "| bytes | 2.66e+08 | bytes the workload" in user


HELPER = "BLOCK = 32\nSCALE = 2.0\n"


def test_a_multi_file_solution_s_helpers_are_shown_named_and_read_only_and_only_the_entry_file_comes_back():
    problem = ProblemContext(slug="add_mini", reference_source=TRITON_REFERENCE, platform="h100",
                             entry_file="main.py", helper_files=(("config.py", HELPER),))
    rendered = messages(problem, KernelView(ADD))
    for role in ("planner", "executor", "fixer"):
        user = rendered[role][1]["content"]
        assert "# Helper files of this solution (read-only)" in user, role
        assert "## `config.py`\n```python\nBLOCK = 32\nSCALE = 2.0\n```" in user, role
        assert not re.search(r"\{\{\w+\}\}", text(rendered[role])), role
    executor_system = rendered["executor"][0]["content"]
    assert "Return only the entry file, `main.py`" in executor_system and "never paste them" in executor_system
    # A one-file kernel gets no helper section.
    alone = messages(ProblemContext(slug="add_mini", reference_source=TRITON_REFERENCE, platform="h100"),
                     KernelView(ADD))
    assert all("Helper files" not in text(alone[role]) for role in ("planner", "executor", "fixer"))
