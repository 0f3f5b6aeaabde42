"""No evaluation spent on a candidate that cannot win (issue 38): a run on a full-size problem checks each
candidate on the problem's mini shapes first, identical candidates are answered from the cache, and the run
page says what each stage saved.

The kernels here are tiny Python files (`latency = 8.0`, optional `mini_fails = 1` / `full_fails = 1`); the
fake pipeline reads them and knows from the reference whether it runs the mini or the full shapes.
"""

from __future__ import annotations

import ast
from collections import Counter
from io import StringIO

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command

import engine.evaluator as pipeline
import optimizer.worker
from benchmark.models import Evaluation, Kernel, KernelOrigin, Problem
from benchmark.services import source_sha256
from engine.agents.base import AgentResult, WriteRequest
from optimizer import services
from optimizer.models import Candidate, Run, RunStatus
from optimizer.worker import RunWorker
from tests.optimizer.fakes import FakeAgents

pytestmark = pytest.mark.django_db(transaction=True)

MINI_REFERENCE, FULL_REFERENCE = "# reference: mini shapes\n", "# reference: full shapes\n"
SEARCH = {"iterations": 1, "beam_width": 1, "plans_per_candidate": 4, "samples_per_plan": 2, "fix_attempts": 0,
          "memory_size": 0, "rewrites_per_iteration": 0, "agent_batch": 8, "evaluation_batch": 8}


def values(source: str) -> dict[str, float]:
    """`name = number` lines of a test kernel."""
    tree = ast.parse(source)
    return {node.targets[0].id: node.value.value for node in tree.body if isinstance(node, ast.Assign)}


class ShapePipeline:
    """Correct unless the kernel fails on the shapes this reference has; counts evaluations by shapes."""

    def __init__(self) -> None:
        self.calls: Counter[tuple[str, str]] = Counter()  # ("mini" | "full", kernel source) -> evaluations

    def __call__(self, kernel_source: str, reference_source: str, **kwargs) -> dict:
        shapes = "mini" if reference_source == MINI_REFERENCE else "full"
        self.calls[shapes, kernel_source] += 1
        kernel = values(kernel_source)
        if kernel.get(f"{shapes}_fails"):
            return {"status": "failed", "compiled": True, "runnable": False, "correct": False,
                    "error_kind": "runtime_error", "error_line": 2,
                    "error_message": "tile size 128 does not divide dimension 96"}
        latency = float(kernel["latency"])
        return {"status": "ok", "compiled": True, "runnable": True, "correct": True, "latency_ms": latency,
                "peak_fraction": 1.0 / latency, "profile": {"hbm_read_bytes": 1000.0 * latency}}

    def shapes_of(self, needle: str) -> list[str]:
        return sorted(shapes for (shapes, source), count in self.calls.items() if needle in source
                      for _ in range(count))


class PlanAgents(FakeAgents):
    """Plans write Python kernels: "mini-only-bug" fails on the mini shapes (and would be fast at full),
    "full-only-bug" passes at mini and fails at full, "faster" is correct everywhere (its two samples differ
    in a comment only), "same" writes its parent unchanged."""

    async def write(self, request: WriteRequest) -> AgentResult[str]:
        self.requests.append(request)
        plan, sample = request.plan, request.sample
        if plan == "same":
            source = request.kernel.source
        elif plan == "faster":
            source = f"latency = 8.0  # sample {sample}: fewer loads\n"
        elif plan == "mini-only-bug":
            source = f"latency = 5.0\nmini_fails = 1\nsample = {sample}\n"
        else:
            source = f"latency = 6.0\nfull_fails = 1\nsample = {sample}\n"
        return AgentResult(source, self._call("executor", plan))


PLANS = ("faster", "mini-only-bug", "full-only-bug", "same")


@pytest.fixture
def shape_pipeline(monkeypatch, settings) -> ShapePipeline:
    settings.ACCELOPT_EVALUATION_INLINE = True
    fake = ShapePipeline()
    monkeypatch.setattr(pipeline, "evaluate", fake, raising=False)
    return fake


def make_problem(case: str, reference: str, slug: str = "tiles") -> Problem:
    problem = Problem.objects.create(slug=slug, case=case, family="elementwise", reference_source=reference)
    source = "latency = 10.0\n"
    problem.baseline_kernel = Kernel.objects.create(problem=problem, source=source, sha256=source_sha256(source),
                                                    origin=KernelOrigin.BASELINE, name="baseline")
    problem.save(update_fields=["baseline_kernel"])
    return problem


@pytest.fixture
def full_problem(db) -> Problem:
    make_problem("mini", MINI_REFERENCE)
    return make_problem("full", FULL_REFERENCE)


def run_to_end(owner, problem: Problem, **search) -> Run:
    run = services.create_run(owner, problem, search={**SEARCH, **search})
    agents = PlanAgents(plans=PLANS)
    assert async_to_sync(RunWorker(agents_factory=lambda run: agents).step)()
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED, run.error_message
    return run


def candidate(run: Run, plan: str, sample: int = 0) -> Candidate:
    return Candidate.objects.get(iteration__run=run, plan=plan, sample_index=sample)


def test_a_candidate_that_fails_on_the_mini_shapes_is_never_evaluated_at_full_size(
    shape_pipeline, full_problem, owner
):
    run = run_to_end(owner, full_problem)
    assert run.config["search"]["mini_first"] is True
    assert shape_pipeline.shapes_of("mini_fails") == ["mini", "mini"]  # its two samples, at mini only
    stopped = candidate(run, "mini-only-bug")
    assert stopped.correct is False and stopped.evaluation_id is None
    assert stopped.error == ("failed on the mini shapes: tile size 128 does not divide dimension 96; "
                             "not evaluated at full size")
    # The full-size verdict is the one that counts for a candidate that passed on the mini shapes.
    assert shape_pipeline.shapes_of("full_fails") == ["full", "full", "mini", "mini"]
    assert candidate(run, "full-only-bug").correct is False
    assert run.best_latency_ms == pytest.approx(8.0)


def test_the_run_page_says_what_the_mini_stage_and_the_cache_saved(shape_pipeline, full_problem, owner, client):
    run = run_to_end(owner, full_problem)
    client.force_login(owner)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    # 8 candidates: "same" twice repeats the start kernel, the second "faster" differs from the first in a
    # comment only; the two "mini-only-bug" stop at mini.
    assert "Identical candidates answered from the cache: <strong>3</strong> evaluations saved" in page
    assert "(2 repeated a kernel this run had already evaluated, 0 had a stored result of the same source, " \
           "1 of an identical source up to comments and spacing)" in page
    assert "Mini shapes first: <strong>2</strong> full-size evaluations saved" in page
    assert "3 correct there went on to full size" in page  # "faster" and both "full-only-bug"
    assert "4 evaluated at full size, 5 on the mini shapes." in page  # the start kernel needs no mini check


def test_an_identical_candidate_is_answered_by_its_twins_evaluation(shape_pipeline, full_problem, owner):
    run = run_to_end(owner, full_problem)
    first, second = candidate(run, "faster", 0), candidate(run, "faster", 1)
    assert first.kernel_id != second.kernel_id  # two sources, two kernels ...
    assert shape_pipeline.shapes_of("fewer loads") == ["full", "mini"]  # ... one evaluation at each size
    assert (second.correct, second.latency_ms) == (True, pytest.approx(8.0))
    copied = Evaluation.objects.get(kernel_id=second.kernel_id)
    assert copied.result["answered_from"] == Evaluation.objects.get(kernel_id=first.kernel_id).pk
    assert copied.latency_ms == pytest.approx(8.0) and copied.wall_time_s is None


def test_a_run_launched_without_the_mini_stage_evaluates_every_candidate_at_full_size(
    shape_pipeline, full_problem, owner, client
):
    run = run_to_end(owner, full_problem, mini_first=False)
    assert run.config["search"]["mini_first"] is False
    assert not any(shapes == "mini" for shapes, _ in shape_pipeline.calls)
    assert candidate(run, "mini-only-bug").correct is True
    assert run.best_latency_ms == pytest.approx(5.0)
    client.force_login(owner)
    assert "Mini shapes first: off for this run" in client.get(f"/runs/{run.pk}/").content.decode()


def test_a_problem_without_a_mini_case_runs_without_the_mini_stage(shape_pipeline, owner):
    problem = make_problem("full", FULL_REFERENCE)  # no mini sibling
    run = run_to_end(owner, problem)
    assert run.config["search"]["mini_first"] is False
    assert not any(shapes == "mini" for shapes, _ in shape_pipeline.calls)


def test_the_run_form_offers_the_mini_stage_on_by_default_and_records_it_off(full_problem, owner, client):
    client.force_login(owner)
    form = client.get("/runs/new/").content.decode()
    assert 'name="mini_first"' in form and "Check candidates on the mini shapes first" in form
    assert 'name="mini_first" checked' in form or ('name="mini_first"' in form and "checked" in
                                                   form.split('name="mini_first"')[1].split(">")[0])
    response = client.post("/runs/new/", {"problem": full_problem.pk, "start": "baseline", "platform": "trn1",
                                          "backend": "simulator", "agent": "offline", "iterations": 1,
                                          "beam_width": 1, "plans_per_candidate": 1, "samples_per_plan": 1,
                                          "memory_size": 0, "seed": 0, "strategy": "beam"})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Run.objects.get().config["search"]["mini_first"] is False


def test_manage_py_optimize_turns_the_mini_stage_off_and_prints_what_each_stage_saved(
    shape_pipeline, full_problem, monkeypatch
):
    agents = PlanAgents(plans=PLANS)
    monkeypatch.setattr(optimizer.worker, "default_agents", lambda run: agents)
    out = StringIO()
    call_command("optimize", "--problem", "tiles:full", "--iterations", "1", "--beam", "1", "--plans", "4",
                 "--samples", "2", "--no-mini-first", stdout=out)
    assert Run.objects.get().config["search"]["mini_first"] is False
    assert ("evaluations: 6 at full size, 0 on the mini shapes; 3 answered from the cache (2 repeated in the run, "
            "0 same source stored, 1 identical source stored); mini shapes first: off") in out.getvalue()


def test_a_campaigns_runs_check_on_the_mini_shapes_where_their_problem_has_them(full_problem, owner):
    from campaigns.services import create_campaign

    alone = make_problem("full", FULL_REFERENCE, slug="no-mini")
    campaign = create_campaign(owner, problems=[full_problem, alone], case="full", search={"iterations": 1},
                               max_concurrent_runs=2)
    runs = {entry.problem.slug: entry.run for entry in campaign.entries.select_related("run", "problem")}
    assert runs["tiles"].config["search"]["mini_first"] is True
    assert runs["no-mini"].config["search"]["mini_first"] is False
