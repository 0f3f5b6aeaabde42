"""Problems are addressed as [SUITE/]SLUG[:CASE], the mini case by default."""

from __future__ import annotations

import pytest
from django.http import Http404

from benchmark.services import get_problem_by_address, parse_problem_address

pytestmark = pytest.mark.django_db


def test_a_bare_slug_means_the_mini_case_of_nkibench():
    assert parse_problem_address("silu") == ("nkibench", "silu", "mini")


def test_a_suite_prefix_and_a_case_are_both_read():
    assert parse_problem_address("imported/silu:0") == ("imported", "silu", "0")


def test_an_empty_address_is_refused_with_the_expected_form():
    with pytest.raises(ValueError, match=r"SLUG\[:CASE\]"):
        parse_problem_address("  ")


def test_loaded_suite_has_a_mini_and_a_full_case_for_each_of_the_14_problems(nkibench):
    slugs = {p.slug for p in nkibench}
    assert len(slugs) == 14
    assert {p.case for p in nkibench} == {"mini", "full"}
    full = get_problem_by_address("matmul:full")
    assert full.parameters == {"M": 4096, "N": 12288, "K": 5120}
    assert full.matmul_flops == 2 * 4096 * 12288 * 5120


def test_an_unknown_case_names_the_cases_that_exist(nkibench):
    with pytest.raises(Http404, match="cases of silu: full, mini"):
        get_problem_by_address("silu:huge")


def test_an_unloaded_suite_says_how_to_load_it(db):
    with pytest.raises(Http404, match="load_suite nkibench"):
        get_problem_by_address("silu")
