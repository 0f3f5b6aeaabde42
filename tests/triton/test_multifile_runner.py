"""The in-process runner (engine.platforms.triton.local, measurements/gpu_check.py's path, no sandbox) loads a
multi-file FlashInfer-Bench solution from disk as a package: relative and bare-name imports between its files
work as in the sandbox (tests/triton_django/test_multifile_solutions.py)."""

from __future__ import annotations

import json

from engine.platforms.triton.flashinfer import parse_definition, parse_solution, parse_workload
from engine.platforms.triton.local import evaluate_case
from tests.triton_django.test_multifile_solutions import DEFINITION, MAIN, WORKLOADS, _solution


def test_the_in_process_runner_loads_a_multi_file_solution_from_disk(tmp_path):
    bare = MAIN.replace("from .config import BLOCK", "from config import BLOCK")
    definition = parse_definition(json.loads(DEFINITION.read_text()))
    workload = parse_workload(json.loads(WORKLOADS.read_text().splitlines()[1]))
    result = evaluate_case(definition, workload, parse_solution(_solution(main=bare)), workdir=tmp_path)
    assert result.status == "correct", result.message
    wrong = _solution(main=bare, config="BLOCK = 32\nSCALE = 3.0\n")
    assert evaluate_case(definition, workload, parse_solution(wrong), workdir=tmp_path / "w").status == "incorrect"
    # A later solution's config.py is its own, not the module an earlier one left in sys.modules.
    offset = _solution(main=bare.replace("from config import BLOCK", "from config import BLOCK, OFFSET")
                       .replace("return out", "return out + OFFSET"), config="BLOCK = 32\nSCALE = 2.0\nOFFSET = 0.0\n")
    result = evaluate_case(definition, workload, parse_solution(offset), workdir=tmp_path / "o")
    assert result.status == "correct", result.message
