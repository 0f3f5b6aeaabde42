"""Seeds are fresh and varied; measured latencies follow the warm-up/repeat/spread/median rule."""

from __future__ import annotations

import pytest

from engine.evaluator.backends import UnstableTiming, summarise_timings
from engine.evaluator.inputs import draw_seeds, plan_distributions


def test_seeds_are_drawn_fresh_for_every_evaluation() -> None:
    assert draw_seeds(3) != draw_seeds(3)


def test_three_seeds_cover_the_plain_and_both_variant_distributions() -> None:
    assert plan_distributions(3, ("reference", "zeros", "scaled")) == ("reference", "zeros", "scaled")


def test_a_problem_can_opt_out_of_a_distribution_that_breaks_its_math() -> None:
    assert plan_distributions(3, ("reference", "zeros")) == ("reference", "zeros", "reference")


def test_an_unknown_distribution_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown input distribution"):
        plan_distributions(3, ("reference", "gaussian-ish"))


def test_the_median_of_steady_measurements_is_reported() -> None:
    assert summarise_timings([1.000, 1.004, 1.002, 1.001, 1.003]) == 1.002


def test_measurements_spreading_over_one_percent_are_refused() -> None:
    with pytest.raises(UnstableTiming, match="over the 1% allowed"):
        summarise_timings([1.0, 1.0, 1.02])
