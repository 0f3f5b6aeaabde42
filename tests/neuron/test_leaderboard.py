"""A result of the neuron backend, stored like any other, is a *measured* row on the leaderboard and reads like
a simulated one on the kernel page (same counter names)."""

from __future__ import annotations

import re

import pytest

from benchmark import services
from benchmark.leaderboard import build_board
from benchmark.models import Problem
from engine.platforms.nki.neuron.summary import MEASURED_KEY, MEASURED_VALUE
from engine.platforms.registry import Backend


@pytest.fixture
def silu_mini(db, settings, neuron_host) -> Problem:
    settings.ACCELOPT_EVALUATION_INLINE = True
    services.load_suite("nkibench", evaluate_cases=())
    return Problem.objects.get(suite="nkibench", slug="silu", case="mini")


def test_a_measured_result_is_a_measured_row_on_the_leaderboard(silu_mini, client) -> None:
    evaluation = services.request_evaluation(silu_mini.baseline_kernel, "trn1", Backend.NEURON.value, wait=True)
    assert evaluation.correct and evaluation.latency_ms, evaluation.error_message
    assert evaluation.backend_version == "neuronx-cc 0.0.0+contract.double"  # results of doubles say so
    assert evaluation.profile[MEASURED_KEY] == MEASURED_VALUE and "hbm_read_bytes" in evaluation.profile

    row = next(r for r in build_board("trn1", "mini").rows if r.problem == silu_mini)
    assert row.measured.best == evaluation and row.simulated.best is None

    # The mini board: the measured latency sits in the measured columns, and nothing is in the simulated ones.
    html = client.get("/leaderboard/?case=mini").content.decode()
    cells = re.search(rf'<tr data-problem="{re.escape(silu_mini.address)}">(.*?)</tr>', html, re.S).group(1)
    assert 'data-testid="measured-latency"' in cells and 'data-testid="simulated-latency"' not in cells

    page = client.get(evaluation.kernel.get_absolute_url()).content.decode()
    assert "hbm_read_bytes" in page and MEASURED_VALUE in page
