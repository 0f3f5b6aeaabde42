"""The run page's search tree: every kernel as a node under its parent, coloured by outcome, readable at a few
hundred nodes; a node opens its plan, the memory the Planner was shown, its agent calls, evaluation and diff."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from benchmark.models import Kernel, KernelOrigin
from benchmark.services import source_sha256
from memory.models import MemoryEntry
from optimizer import services
from optimizer.models import AgentCall, Candidate, CandidateStatus, Iteration, RunEvent, RunStatus
from tests.optimizer.fakes import fake_kernel

pytestmark = pytest.mark.django_db

PER_PARENT = 25  # kernels written per parent per iteration
BEAM = 6
# The outcome each sample index gets, in turn: faster, slower, incorrect, failed (unusable), held.
CYCLE = ("faster", "slower", "incorrect", "failed", "held")


class TreeParser(HTMLParser):
    """The tree's <li data-key> elements, each with its parent's key and outcome."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.parent: dict[str, str | None] = {}
        self.outcome: dict[str, str] = {}

    def handle_starttag(self, tag, attrs):
        if tag == "li":
            attrs = dict(attrs)
            key = attrs["data-key"]
            self.parent[key] = self.stack[-1] if self.stack else None
            self.outcome[key] = attrs["data-outcome"]
            self.stack.append(key)

    def handle_endtag(self, tag):
        if tag == "li":
            self.stack.pop()


def make_synthetic_run(owner, problem, iterations=3):
    """A finished run of 1 + 25 + 5 x 25 + 6 x 25 = 301 kernels, built as the recorder would store it: the five
    "faster" kernels of iteration 1 form the next beam, then the six fastest of each later iteration."""
    run = services.create_run(owner, problem)
    run.status, run.start_latency_ms = RunStatus.SUCCEEDED, 10.0
    run.save()
    parents = [(run.start_kernel, 10.0)]
    for index in range(1, iterations + 1):
        iteration = Iteration.objects.create(run=run, index=index)
        written = []
        for b, (parent, parent_ms) in enumerate(parents):
            for p in range(PER_PARENT):
                outcome = CYCLE[p % len(CYCLE)]
                key = f"{index}.{b}.{p}.0"
                latency = parent_ms * (0.9 - 0.001 * p if outcome == "faster" else 1.2)
                kernel = None
                if outcome != "failed":
                    source = fake_kernel(latency, key)
                    kernel = Kernel.objects.create(problem=problem, source=source, sha256=source_sha256(source),
                                                   origin=KernelOrigin.GENERATED, parent=parent, run_id=run.pk)
                written.append((Candidate(
                    iteration=iteration, key=key, parent_kernel=parent, plan_index=p, plan=f"plan {key}",
                    kernel=kernel,
                    status=CandidateStatus.UNUSABLE if outcome == "failed" else CandidateStatus.EVALUATED,
                    correct=None if outcome == "failed" else outcome != "incorrect",
                    latency_ms=latency if outcome in ("faster", "slower", "held") else None,
                    speedup=parent_ms / latency if outcome in ("faster", "slower") else None,
                    error={"held": "held for review: speedup 12x", "incorrect": "relative L2 error 0.5",
                           "failed": "no code block"}.get(outcome, ""),
                ), latency))
        best = sorted((pair for pair in written if CYCLE[int(pair[0].key.split(".")[2]) % len(CYCLE)] == "faster"),
                      key=lambda pair: pair[1])[:BEAM]
        for candidate, _ in best:
            candidate.chosen = True
        Candidate.objects.bulk_create([c for c, _ in written])
        parents = [(c.kernel, latency) for c, latency in best]
    return run


def test_the_tree_of_a_few_hundred_kernels_puts_every_kernel_under_its_parent(client, owner, problem):
    run = make_synthetic_run(owner, problem)
    client.force_login(owner)
    response = client.get(f"/runs/{run.pk}/tree/")
    assert response.status_code == 200
    html = response.content.decode()
    tree = TreeParser()
    tree.feed(html)
    assert len(tree.parent) == 1 + PER_PARENT + 5 * PER_PARENT + BEAM * PER_PARENT == 301
    assert f'data-nodes="{len(tree.parent)}"' in html
    assert tree.parent["start"] is None
    assert all(tree.parent[key] == "start" for key in tree.parent if key.startswith("1."))
    # Iteration 2's kernels hang under the iteration-1 kernels kept in the beam, 25 each.
    kept = Candidate.objects.filter(iteration__run=run, iteration__index=1, chosen=True)
    for candidate in kept:
        children = [k for k, parent in tree.parent.items() if parent == candidate.key]
        assert len(children) == PER_PARENT and all(k.startswith("2.") for k in children)
    assert all(tree.parent[k].startswith("2.") for k in tree.parent if k.startswith("3."))
    # Every outcome is coloured, and the legend counts them.
    counts = {outcome: list(tree.outcome.values()).count(outcome) for outcome in set(tree.outcome.values())}
    assert counts == {"start": 1, "faster": 60, "slower": 60, "incorrect": 60, "failed": 60, "held": 60}
    assert "faster than its parent <span class=\"muted\">(60)</span>" in html
    assert "tree-dot--held" in html and "1.11×" in html  # a speedup label (10 / 9.0)
    # Branches fold; only the root and the beam's path start open.
    assert html.count("<details open>") == 1 + 5 + BEAM


def test_a_node_opens_its_plan_memory_calls_evaluation_and_diff(client, owner, problem):
    run = make_synthetic_run(owner, problem, iterations=1)
    candidate = Candidate.objects.get(iteration__run=run, key="1.0.5.0")
    entry = MemoryEntry.objects.create(title="Hoist the invariant load", summary="...", source_key="run0:9.0.0.0",
                                       speedup=1.3)
    curated = MemoryEntry.objects.create(title="Written by a curator", summary="...", speedup=1.1)  # no source key
    RunEvent.objects.create(run=run, seq=100, kind="plan.proposed", payload={
        "iteration": 1, "plan_key": "1.0.5", "plan": "plan 1.0.5.0",
        "memory": [{"key": entry.source_key, "title": entry.title, "polarity": "positive", "speedup": 1.3},
                   {"key": "gone", "title": "An entry since pruned", "polarity": "negative", "speedup": 2.0},
                   {"key": f"memory:{curated.pk}", "title": curated.title, "polarity": "positive", "speedup": 1.1}]})
    # The Planner was asked twice, for one plan each; the node shows the call whose reply holds its plan.
    for seq, (reply, cost) in enumerate((("1. plan 1.0.4.0", 0.0042), ("1. plan 1.0.5.0", 0.0021)), start=101):
        planner = AgentCall.objects.create(run=run, role="planner", model="m", prompt_tokens=900,
                                           completion_tokens=80, cost_usd=cost, response=reply)
        RunEvent.objects.create(run=run, seq=seq, kind="agent.call", payload={
            "iteration": 1, "task_key": "1.0", "agent_call": planner.pk, "role": "planner"})
    AgentCall.objects.create(run=run, candidate=candidate, role="executor", model="m", prompt_tokens=1200,
                             completion_tokens=300, cost_usd=None)
    client.force_login(owner)
    html = client.get(f"/runs/{run.pk}/tree/1.0.5.0/").content.decode()
    assert "plan 1.0.5.0" in html
    assert "Hoist the invariant load" in html and f"/memory/{entry.pk}/" in html and "An entry since pruned" in html
    assert f"/memory/{curated.pk}/" in html  # an entry without a source key, named by its id
    assert "Planner" in html and "Executor" in html and "$0.0021" in html and "unknown" in html
    assert "$0.0042" not in html  # the other plan's Planner call
    assert "correct" in html and "kept in the beam" in html
    assert "class=\"diff-changed\"" in html and "2 lines differ" in html  # the latency and lineage lines

    start = client.get(f"/runs/{run.pk}/tree/start/").content.decode()
    assert "Starting kernel" in start
    assert client.get(f"/runs/{run.pk}/tree/9.9.9.9/").status_code == 404


def test_a_private_runs_tree_is_hidden_from_others(client, owner, teammate, problem):
    run = make_synthetic_run(owner, problem, iterations=1)
    client.force_login(teammate)
    assert client.get(f"/runs/{run.pk}/tree/").status_code == 404
    assert client.get(f"/runs/{run.pk}/tree/start/").status_code == 404
