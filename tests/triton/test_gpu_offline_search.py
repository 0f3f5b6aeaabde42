"""measurements/gpu_offline_search.py on the interpreter: the product's offline search (OfflineAgents, the Triton
catalog, the beam search) from our sample rmsnorm, correctness only, and the search tree it writes."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

from engine.platforms.triton.rewrites import TRITON_BY_NAME

SCRIPT = Path(__file__).resolve().parents[2] / "measurements" / "gpu_offline_search.py"


def _script():
    spec = importlib.util.spec_from_file_location("gpu_offline_search", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_bad_arguments_are_refused_with_a_message(capsys, tmp_path):
    with pytest.raises(SystemExit):
        _script().parse_args(["--beam", "0"])
    assert "--beam must be >= 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _script().parse_args(["--solution", str(tmp_path / "missing.json")])
    assert "no such file" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without a GPU")
def test_without_a_gpu_it_exits_with_a_clear_message(capsys):
    assert _script().main([]) == 2
    assert "--interpret" in capsys.readouterr().err


def test_one_interpreted_iteration_on_our_rmsnorm_writes_the_search_tree(tmp_path, capsys):
    out = tmp_path / "search.json"
    assert _script().main(["--interpret", "--iterations", "1", "--seeds", "1", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert (report["solution"], report["definition"], report["status"]) == ("ours:rmsnorm_h128", "rmsnorm_h128", "succeeded")
    assert report["correctness_only"] is True and report["workload"]["axes"] == {"batch_size": 7}
    assert report["start"]["status"] == "correct" and report["start"]["latency_ms"] is None
    tree = report["tree"]
    # Every applicable catalog rewrite of the start kernel was written and checked; none was timed.
    assert tree and {row["iteration"] for row in tree} == {1} and {row["parent"] for row in tree} == {"start"}
    assert all(row["rewrite"].split(" #")[0] in TRITON_BY_NAME for row in tree)
    assert {"more_warps #0", "fewer_warps #0"} <= {row["rewrite"] for row in tree}
    assert all(row["status"] == "correct" and row["latency_ms"] is None and row["speedup_vs_start"] is None
               for row in tree)
    assert report["evaluations"] == 1 + len({row["sha"] for row in tree})
    # Unmeasured, nothing outranks the start: the best is the start kernel, with an empty diff.
    assert report["best"]["origin"] == "start" and report["best"]["diff"] == ""
    printed = capsys.readouterr().out
    assert "correctness only: no GPU" in printed and "fewer_warps #0" in printed
