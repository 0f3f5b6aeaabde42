"""python manage.py evaluate KERNEL.py (--problem SLUG[:CASE] | --reference REF.py) [--platform] [--json]."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from benchmark.models import Evaluation, Kernel
from tests.benchmark.bad_inputs import BAD_INPUTS, BadInput


def run(*args: str) -> str:
    out = StringIO()
    call_command("evaluate", *args, stdout=out)
    return out.getvalue()


@pytest.fixture
def write(tmp_path: Path):
    def write(name: str, text: str) -> str:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return str(path)

    return write


def test_the_baseline_prints_correct_latency_peak_fraction_and_profile(silu_mini, write):
    output = run(write("silu.py", silu_mini.baseline_kernel.source), "--problem", "silu")
    assert "correct: yes" in output
    assert "latency_ms:" in output and "(predicted by the performance model)" in output
    assert "peak_fraction: 0." in output
    assert "hbm_read_bytes" in output


def test_json_output_is_the_full_result_on_the_chosen_platform(silu_mini, write):
    data = json.loads(run(write("silu.py", silu_mini.baseline_kernel.source), "--problem", "silu:mini",
                          "--platform", "trn2", "--json"))
    assert data["correct"] is True and data["platform"] == "trn2"
    assert 0 < data["peak_fraction"] <= 1
    assert len(data["seeds"]) >= 3 and data["output_errors"][0] <= data["tolerance"]


def test_a_reference_file_gives_latency_but_no_peak_fraction(silu_mini, write):
    output = run(write("silu.py", silu_mini.baseline_kernel.source), "--reference",
                 write("ref.py", silu_mini.reference_source))
    assert "correct: yes" in output
    assert "peak_fraction: unknown" in output


def test_the_recorded_seeds_reproduce_an_earlier_evaluations_numbers(silu_mini, write):
    """An API consumer copies `seeds` from an evaluation's provenance and gets the same numbers again."""
    kernel = write("silu.py", silu_mini.baseline_kernel.source)
    first = json.loads(run(kernel, "--problem", "silu", "--json"))
    again = json.loads(run(kernel, "--problem", "silu", "--json", "--seeds", ",".join(map(str, first["seeds"]))))
    assert again["seeds"] == first["seeds"] and again["distributions"] == first["distributions"]
    assert again["relative_l2_errors"] == first["relative_l2_errors"]
    assert again["latency_ms"] == first["latency_ms"] and again["peak_fraction"] == first["peak_fraction"]


@pytest.mark.parametrize(("seeds", "message"), [("1,2", "at least 3"), ("1,two,3", "comma-separated integers"),
                                                ("1,2,-3", "between 0 and")])
def test_bad_seeds_are_refused_before_anything_runs(nkibench, write, seeds, message):
    with pytest.raises(CommandError, match=message):
        run(write("k.py", "x = 1\n"), "--problem", "silu", "--seeds", seeds)


def test_nothing_is_stored(silu_mini, write):
    run(write("silu.py", silu_mini.baseline_kernel.source + "\n# cli\n"), "--problem", "silu")
    assert not Kernel.objects.filter(origin="uploaded").exists()
    assert not Evaluation.objects.exists()


@pytest.mark.parametrize("case", BAD_INPUTS, ids=lambda case: case.name)
def test_each_bad_input_prints_its_failure_kind_and_message(silu_mini, write, settings, case: BadInput):
    for name, value in case.limits:
        setattr(settings, name, value)
    target = ["--reference", write("ref.py", case.reference)] if case.reference else ["--problem", "silu:mini"]
    output = run(write("kernel.py", case.kernel), *target)
    assert "correct: no" in output
    error_line = next(line for line in output.splitlines() if line.startswith("error: "))
    assert error_line.startswith(f"error: {case.kind}")
    if case.line is not None:
        assert f"at line {case.line}" in error_line
    for word in case.words:
        assert word.lower() in error_line.lower()
    assert "latency_ms" not in output


def test_an_unknown_problem_is_refused_naming_the_cases_that_exist(nkibench, write):
    with pytest.raises(CommandError, match="cases of silu: full, mini"):
        run(write("k.py", "x = 1\n"), "--problem", "silu:giant")


def test_a_missing_kernel_file_is_refused_naming_it(nkibench):
    with pytest.raises(CommandError, match="no such file"):
        run("/nonexistent/kernel.py", "--problem", "silu")


def test_problem_and_reference_cannot_both_be_given(nkibench, write):
    with pytest.raises(CommandError):
        run(write("k.py", "x = 1\n"), "--problem", "silu", "--reference", write("r.py", "x = 1\n"))
