"""Run pages name the roles, not event types, and stay short: an offline rewrite's long rationale is shown
once, not under every plan of the same rewrite (issue 20)."""

from __future__ import annotations

from django.template.loader import render_to_string

from optimizer.events import render_event
from optimizer.templatetags.run_text import event_actor, plan_parts

PLAN = "Hoist the scale [rewrite hoist #{}]: multiply once per tile in line 12. Why: " + "long lesson " * 30 + "END."


def _event(kind, **payload):
    return {"run": 1, "seq": 3, "kind": kind, "payload": {"iteration": 1, **payload}, "created": "2026-12-04T17:00:00Z"}


def test_each_event_names_who_acted():
    assert event_actor(_event("plan.proposed")) == "Planner"
    assert event_actor(_event("candidate.written")) == "Executor"
    assert event_actor(_event("candidate.written", fix=1)) == "Fixer"
    assert event_actor(_event("memory.added")) == "Summarizer"
    assert event_actor(_event("agent.call", role="planner")) == "Planner"
    assert event_actor(_event("run.finished")) == "Run"


def test_the_event_log_shows_the_role_and_keeps_the_type_as_a_tooltip():
    html = render_event(_event("plan.proposed", plan=PLAN.format(0), plan_key="1.0.0", parent_sha="ab" * 32))
    assert 'title="plan.proposed">Planner</span>' in html
    assert "long lesson" not in html.split("run-event__text")[1].split("</span>")[0]  # the log line stays short


def test_an_offline_plans_rationale_is_split_from_what_it_changes():
    head, why = plan_parts(PLAN.format(2))
    assert head == "Hoist the scale [rewrite hoist #2]: multiply once per tile in line 12." and why.startswith("Why:")
    assert plan_parts("An LLM plan. With sentences.") == ("An LLM plan. With sentences.", "")


def test_a_finished_iteration_shows_a_repeated_rationale_once():
    class Parent:
        display_name = "silu baseline"

    plans = [{"key": f"1.0.{i}", "parent": Parent(), "text": PLAN.format(i), "candidates": []} for i in range(3)]
    iteration = type("Iteration", (), {"index": 1, "beam_kernel_ids": [1], "best_latency_ms": None})()
    run = type("Run", (), {"pk": 1})()
    html = render_to_string("optimizer/partials/iteration.html", {"run": run, "iteration": iteration, "plans": plans})
    assert html.count("[rewrite hoist #") == 3 and html.count("long lesson END.") == 1
