"""Parsing model replies: kernels, plans and memory summaries, including the awkward cases."""

from __future__ import annotations

import pytest

from engine.agents.parsing import UnusableReply, extract_kernel, parse_plans, parse_summary

KERNEL = "@nki.jit\ndef kernel(x):\n    return x\n"


def test_the_last_fenced_python_block_is_the_kernel():
    reply = f"First try:\n```python\ndef kernel(x):\n    return 0\n```\nBetter:\n```python\n{KERNEL}```\n"
    assert extract_kernel(reply, "kernel") == KERNEL


def test_an_untagged_or_tilde_fence_counts_but_a_json_block_does_not():
    assert extract_kernel(f"~~~\n{KERNEL}~~~", "kernel") == KERNEL
    reply = f"```python\n{KERNEL}```\nconfig:\n```json\n{{\"a\": 1}}\n```"
    assert extract_kernel(reply, "kernel") == KERNEL


def test_a_last_block_that_does_not_parse_falls_back_to_an_earlier_one():
    reply = f"```python\n{KERNEL}```\nOr maybe\n```python\ndef kernel(x:\n```"
    assert extract_kernel(reply, "kernel") == KERNEL


def test_a_block_without_the_kernel_function_is_rejected_by_name():
    with pytest.raises(UnusableReply, match="no top-level function 'kernel'"):
        extract_kernel("```python\ndef helper():\n    pass\n```", "kernel")


def test_reasoning_blocks_are_ignored():
    reply = f"<think>```python\ndef kernel(x):\n    return 1\n```</think>\n```python\n{KERNEL}```"
    assert extract_kernel(reply, "kernel") == KERNEL


@pytest.mark.parametrize("reply, reason", [
    ("", "empty"),
    ("I would rather not.", "no fenced Python"),
    ("```python\ndef kernel(x):\n    ret", "never closed"),
    ("<think>still thinking about ```python", "empty"),
    ("```python\ndef kernel(x)\n    return x\n```", "line 1"),
])
def test_unusable_kernel_replies_say_why(reply, reason):
    with pytest.raises(UnusableReply, match=reason):
        extract_kernel(reply, "kernel")


def test_plans_from_a_numbered_list_keep_their_continuation_lines():
    reply = "Analysis first.\n1. Hoist the load\n   out of the loop.\n2) Fuse the activations\nPlan 3: Bigger tiles\n"
    assert parse_plans(reply, 5) == ["Hoist the load\nout of the loop.", "Fuse the activations", "Bigger tiles"]


def test_plans_from_markdown_headings():
    reply = "### Plan 1: Reuse tiles\nLoad once.\n### Plan 2: Merge DMAs\nOne big load."
    assert parse_plans(reply, 5) == ["Reuse tiles\nLoad once.", "Merge DMAs\nOne big load."]


@pytest.mark.parametrize("reply", [
    '["hoist loads", "fuse ops"]',
    '```json\n{"plans": [{"title": "hoist loads"}, {"title": "fuse ops"}]}\n```',
    'Sure: [{"plan": "hoist loads"}, {"description": "fuse ops"}] done',
])
def test_plans_from_json_lists_and_objects(reply):
    assert [p.split(":")[0] for p in parse_plans(reply, 5)] == ["hoist loads", "fuse ops"]


def test_plans_are_capped_at_the_requested_count():
    assert parse_plans("1. a\n2. b\n3. c", 2) == ["a", "b"]


def test_a_reply_with_no_plans_is_unusable():
    with pytest.raises(UnusableReply, match="neither a JSON list"):
        parse_plans("The kernel is perfect as it is.", 3)


def test_a_numbered_list_must_count_from_one():
    # "2024. was a year" is not plan 1; stray numbers inside text do not start plans.
    assert parse_plans("1. first\nsee 3. below\n2. second", 5) == ["first\nsee 3. below", "second"]


def test_a_summary_has_a_bold_title_and_a_description():
    draft = parse_summary("**Reuse loaded tiles**\nLoad each input tile once and keep it in SBUF for both passes.")
    assert draft.title == "Reuse loaded tiles" and draft.summary.startswith("Load each input tile once")


@pytest.mark.parametrize("reply, reason", [
    ("No optimization found", "no transferable"),
    ("**Title only**\nshort", "too short"),
    ("", "empty"),
])
def test_unusable_summaries_say_why(reply, reason):
    with pytest.raises(UnusableReply, match=reason):
        parse_summary(reply)
