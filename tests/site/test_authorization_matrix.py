"""Issue 36: every API route and the site's page actions, each tried by seven people, with the status each
must get. One shared world: erin's public Triton problem, her *private* run with the kernels it wrote (one
ranked fastest, one held for review), her private campaign, a memory entry.

Beyond the status, no answer to someone who may not see the private run may carry its work: the source
of the kernels it wrote (a marker line) or a link to them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.test import Client
from django.utils import timezone
from django.utils.html import escape

from accelopt_site.api import api
from accounts.roles import ADMIN, CURATOR, ENGINEER, grant_role
from accounts.services import create_token
from benchmark import services
from benchmark.models import Evaluation, EvaluationStatus, Kernel, KernelOrigin, Review, Visibility
from benchmark.services.kernels import source_sha256
from campaigns.models import Campaign
from engine.evaluator.result import ErrorKind
from memory.learning import learn
from memory.models import MemoryEvidence, MergeProposal
from memory.services import add_entry
from memory.views import ACTIONS as MEMORY_ACTIONS
from optimizer.models import Candidate, Iteration, Run

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parents[1] / "triton_django" / "fixtures"
MARKER = "# erin's private run wrote this line"
MARKER_HELD = "# erin's private run wrote this held line"
LESSON = "erin's private run learned this"  # the title of the lesson it filed in the memory

ROLES = ("anonymous", "viewer", "owner", "other", "curator", "admin", "superuser")
SEES_PRIVATE_RUN = {"owner", "admin", "superuser"}  # the run's owner, and admins (visible_owned)
CURATORS_TOO = frozenset({*SEES_PRIVATE_RUN, "curator"})


def everyone(status: int) -> dict[str, int]:
    return dict.fromkeys(ROLES, status)


def private(status: int = 200) -> dict[str, int]:
    """Something of erin's private run: 404 for whoever may not see it, so its existence does not leak."""
    return {role: status if role in SEES_PRIVATE_RUN else 404 for role in ROLES}


def api_role(status: int, role: str = ENGINEER) -> dict[str, int]:
    """An API route needing `role`: 401 without credentials, 403 without the role."""
    holders = {ENGINEER: {"owner", "other", "curator", "admin", "superuser"},
               CURATOR: {"curator", "admin", "superuser"}, ADMIN: {"admin", "superuser"}}[role]
    return {r: 401 if r == "anonymous" else status if r in holders else 403 for r in ROLES}


def page_role(status: int, role: str = ENGINEER) -> dict[str, int]:
    """A page needing `role`: anonymous visitors go to the login page (302), others without it get 403."""
    return {**api_role(status, role), "anonymous": 302}


def private_lesson(status: int = 200, *, page: bool = False, curate: bool = False) -> dict[str, int]:
    """The lesson erin's private run filed: read by engineers who may see the run, curated by curators who may;
    a curator who may not see the run gets 404 like anyone else who may not."""
    expected = private(status)
    expected.update(anonymous=302 if page else 401, viewer=403)
    if curate:
        expected.update(owner=403)
    return expected


def own_write(status: int, *, page: bool = False) -> dict[str, int]:
    """Changing erin's private run or campaign: only she and admins; others cannot even see it (404)."""
    expected = {r: status if r in SEES_PRIVATE_RUN else 404 for r in ROLES}
    expected.update(anonymous=302 if page else 401, viewer=403 if page else 403)
    return expected


@dataclass
class Case:
    name: str
    method: str
    path: str  # formatted with the world's ids: {problem}, {kernel}, {private_kernel}, ...
    expected: dict[str, int]
    body: Any = None  # JSON for the API, form data for pages; callable(world) for what needs ids
    multipart: bool = False
    check: Callable[[dict[str, Any], str], None] | None = None  # a postcondition, given the world and role
    sees_private: frozenset[str] = frozenset(SEES_PRIVATE_RUN)  # whose answers may show the private run's work
    api: bool = field(init=False)

    def __post_init__(self) -> None:
        self.api = self.path.startswith("/api/")


def _definition_reimport(world: dict[str, Any]) -> dict[str, Any]:
    definition = json.loads((FIXTURES / "studio_axpy_h16.json").read_text())
    definition["description"] = "replaced by whoever re-imported it"
    definition["reference"] = definition["reference"].replace("import torch", "import torch  # replaced", 1)
    return {"platform": "h100", "definitions": [definition]}


def _definition_into_builtin(world: dict[str, Any]) -> dict[str, Any]:
    definition = json.loads((FIXTURES / "studio_axpy_h16.json").read_text())
    definition["name"] = "sneaky_axpy"
    return {"platform": "h100", "definitions": [definition], "suite": "nkibench"}


def _reference_unchanged_unless_allowed(world: dict[str, Any], role: str) -> None:
    problem = world["problem_row"]
    problem.refresh_from_db()
    if role in ("owner", "superuser"):
        assert "replaced" in problem.reference_source
    else:
        assert "replaced" not in problem.reference_source, f"{role} replaced erin's reference"


def _no_problem_in_builtin_suite(world: dict[str, Any], role: str) -> None:
    assert not services.find_problems(None, suite="nkibench").filter(slug="sneaky_axpy").exists()


def _admin_self_promotion(world: dict[str, Any]) -> dict[str, Any]:
    admin = world["users"]["admin"]
    return {
        "username": admin.username, "first_name": "", "last_name": "", "email": "",
        "is_active": "on", "is_staff": "on", "is_superuser": "on",
        "groups": [str(Group.objects.get(name=ADMIN).pk)],
        "date_joined_0": "2026-01-01", "date_joined_1": "00:00:00",
    }


def _still_not_superuser(world: dict[str, Any], role: str) -> None:
    admin = world["users"]["admin"]
    admin.refresh_from_db()
    assert role == "superuser" or not admin.is_superuser, f"{role} made the admin-role member a superuser"


def _run_from_private_kernel(world: dict[str, Any]) -> dict[str, Any]:
    return {"problem": str(world["problem"]), "start_kernel_id": world["private_kernel"], "platform": "h100",
            "backend": "triton-interpreter"}


CASES = [
    # --- the API ------------------------------------------------------------------------------------
    Case("me", "GET", "/api/me", {**everyone(200), "anonymous": 401}),
    Case("problems", "GET", "/api/problems", everyone(200)),
    Case("problem", "GET", "/api/problems/{problem}", everyone(200)),
    Case("kernel upload", "POST", "/api/kernels", api_role(201),
         body=lambda w: {"problem": str(w["problem"]), "source": "def run():\n    pass\n", "evaluate": False}),
    Case("public kernel", "GET", "/api/kernels/{kernel}", everyone(200)),
    Case("private run's kernel", "GET", "/api/kernels/{private_kernel}", private()),
    Case("evaluate a private run's kernel", "POST", "/api/kernels/{private_kernel}/evaluations",
         {**private(200), "anonymous": 401, "viewer": 403}, body={}),
    # A Triton kernel has no NKI generation to migrate: 400 for whoever may see it.
    Case("migrate a private run's kernel", "POST", "/api/kernels/{private_kernel}/migrate",
         {**private(400), "anonymous": 401, "viewer": 403}, body={}),
    Case("private run's evaluation", "GET", "/api/evaluations/{private_evaluation}", private()),
    # Curators decide held results, a private run's too: the review queue is where they see that work.
    Case("review queue", "GET", "/api/reviews", api_role(200, CURATOR), sees_private=CURATORS_TOO),
    Case("accept a public held result", "POST", "/api/evaluations/{held}/accept", api_role(200, CURATOR), body={}),
    Case("reject a private run's held result", "POST", "/api/evaluations/{private_held}/reject",
         api_role(200, CURATOR), body={}, sees_private=CURATORS_TOO),
    Case("re-import someone else's FlashInfer definition", "POST", "/api/flashinfer/import",
         {**api_role(403), "owner": 200, "superuser": 200}, body=_definition_reimport,
         check=_reference_unchanged_unless_allowed),
    Case("import into a built-in suite", "POST", "/api/flashinfer/import", api_role(403),
         body=_definition_into_builtin, check=_no_problem_in_builtin_suite),
    Case("export a solution", "GET", "/api/flashinfer/solutions/{problem}", everyone(200)),
    Case("baselines", "GET", "/api/baselines", everyone(200)),
    Case("import kernel files", "POST", "/api/kernels/import", api_role(201), multipart=True,
         body=lambda w: {"problem": w["address"], "evaluate": "false",
                         "files": [("mine.py", b"def run():\n    return 1\n")]}),
    Case("memory", "GET", "/api/memory", api_role(200)),
    Case("memory add", "POST", "/api/memory", api_role(201, CURATOR),
         body={"title": "t", "slow_kernel": "a = 1", "fast_kernel": "a = 2", "speedup": 1.5}),
    Case("memory export", "GET", "/api/memory/export", api_role(200)),
    Case("memory import", "POST", "/api/memory/import", api_role(200, CURATOR), body=[]),
    Case("memory entry", "GET", "/api/memory/{entry}", api_role(200)),
    Case("memory edit", "PATCH", "/api/memory/{entry}", api_role(200, CURATOR), body={"title": "new"}),
    *[Case(f"memory {action}", "POST", f"/api/memory/{{entry}}/{action}", api_role(200, CURATOR), body={})
      for action in ("pin", "unpin", "prune", "restore", "transfers", "stays")],
    # Accepting is for proposed lessons (an active entry stays as it is); only curators may.
    Case("memory accept", "POST", "/api/memory/{entry}/accept", api_role(200, CURATOR), body={}),
    Case("private run's lesson", "GET", "/api/memory/{private_entry}", private_lesson()),
    Case("pin a private run's lesson", "POST", "/api/memory/{private_entry}/pin",
         {**private_lesson(curate=True), "other": 403}, body={}),
    Case("my MCP tool calls", "GET", "/api/mcp/calls", {**everyone(200), "anonymous": 401}),
    Case("memory bulk prune", "POST", "/api/memory/prune", api_role(200, CURATOR), body=lambda w: {"ids": [w["entry"]]}),
    Case("run from a private run's kernel", "POST", "/api/runs",
         {**private(201), "anonymous": 401, "viewer": 403}, body=_run_from_private_kernel),
    Case("runs", "GET", "/api/runs", everyone(200)),
    Case("private run", "GET", "/api/runs/{run}", private()),
    Case("cancel a private run", "POST", "/api/runs/{run}/cancel", own_write(200), body={}),
    Case("pause a private run", "POST", "/api/runs/{run}/pause", own_write(200), body={}),
    Case("resume a private run", "POST", "/api/runs/{run}/resume", own_write(200), body={}),
    Case("continue a private run", "POST", "/api/runs/{run}/continue", own_write(400), body={"budget": {}}),
    Case("private run's events", "GET", "/api/runs/{run}/events", private()),
    Case("campaign launch", "POST", "/api/campaigns", api_role(400), body={}),
    Case("campaigns", "GET", "/api/campaigns", everyone(200)),
    Case("private campaign", "GET", "/api/campaigns/{campaign}", private()),
    Case("cancel a private campaign", "POST", "/api/campaigns/{campaign}/cancel", own_write(200), body={}),
    Case("export an unfinished private campaign", "GET", "/api/campaigns/{campaign}/export.csv", private(400)),
    # --- pages --------------------------------------------------------------------------------------
    Case("home", "GET", "/", everyone(200)),
    Case("problems page", "GET", "/problems/", everyone(200)),
    Case("problem page", "GET", "/problems/{problem}/", everyone(200)),
    Case("solution download", "GET", "/problems/{problem}/solution.json", everyone(200)),
    Case("import page", "GET", "/problems/import-flashinfer/", page_role(200)),
    Case("re-import someone else's definition on the page", "POST", "/problems/import-flashinfer/",
         {**page_role(403), "owner": 302, "superuser": 302}, multipart=True,
         body=lambda w: {"platform": "h100", "files": [
             ("studio_axpy_h16.json", json.dumps(_definition_reimport(w)["definitions"][0]).encode())]},
         check=_reference_unchanged_unless_allowed),
    Case("kernels page", "GET", "/kernels/", everyone(200)),
    Case("kernels of a private run", "GET", "/kernels/?run={run}", everyone(200)),
    Case("generated kernels", "GET", "/kernels/?origin=generated", everyone(200)),
    Case("upload page", "GET", "/kernels/upload/", page_role(200)),
    Case("upload a kernel on the page", "POST", "/kernels/upload/", page_role(302), multipart=True,
         body=lambda w: {"problem": str(w["problem"]), "platform": "h100", "source": "def run():\n    return 2\n"}),
    Case("public kernel page", "GET", "/kernels/{kernel}/", everyone(200)),
    Case("private run's kernel page", "GET", "/kernels/{private_kernel}/", private()),
    Case("evaluate a private run's kernel on the page", "POST", "/kernels/{private_kernel}/evaluate/",
         own_write(302, page=True), body={}),
    Case("migrate a private run's kernel on the page", "POST", "/kernels/{private_kernel}/migrate/",
         own_write(302, page=True), body={}),
    Case("private evaluation panel", "GET", "/evaluations/{private_evaluation}/fragment/", private()),
    Case("review page", "GET", "/reviews/", page_role(200, CURATOR), sees_private=CURATORS_TOO),
    Case("accept on the page", "POST", "/evaluations/{held}/accept/", page_role(302, CURATOR), body={}),
    Case("reject a private held result on the page", "POST", "/evaluations/{private_held}/reject/",
         page_role(302, CURATOR), body={}),
    Case("Triton leaderboard", "GET", "/leaderboard/?platform=h100", everyone(200)),
    Case("NKI leaderboard", "GET", "/leaderboard/", everyone(200)),
    Case("baseline progress", "GET", "/leaderboard/baselines/", everyone(200)),
    Case("leaderboard grid", "GET", "/leaderboard/grid/?platform=h100", everyone(200)),
    Case("runs page", "GET", "/runs/", everyone(200)),
    Case("run form", "GET", "/runs/new/", page_role(200)),
    # Only her own kernels are a person's to start from (admins' too): to anyone else the form says it is not theirs.
    Case("launch a run from a private run's kernel on the page", "POST", "/runs/new/",
         {**page_role(200), "owner": 302}, body=lambda w: {
             "problem": str(w["problem"]), "start": str(w["private_kernel"]), "platform": "h100",
             "backend": "triton-interpreter", "agent": "offline", "iterations": 1, "beam_width": 1,
             "plans_per_candidate": 1, "samples_per_plan": 1, "memory_size": 0, "seed": 0, "strategy": "beam"}),
    Case("run form from a private run's kernel", "GET", "/runs/new/?problem={problem}&kernel={private_kernel}",
         page_role(200)),
    Case("private run page", "GET", "/runs/{run}/", private()),
    Case("run form's estimate", "GET", "/runs/new/estimate/", page_role(200)),
    Case("private run's iteration", "GET", "/runs/{run}/iterations/1/", private()),
    Case("private run's tree node", "GET", "/runs/{run}/tree/c1/", private()),
    Case("private run's candidate", "GET", "/runs/{run}/candidates/c1/", private()),
    # Queued, it cannot be continued: its owner and admins are told so on its page.
    Case("continue a private run on the page", "POST", "/runs/{run}/continue/",
         {**own_write(302, page=True), "anonymous": 404, "viewer": 404}, body={}),
    *[Case(f"private run {part}", "GET", f"/runs/{{run}}/{part}/", private())
      for part in ("state", "chart", "badge", "tree", "memory", "queue")],
    *[Case(f"{action} a private run on the page", "POST", f"/runs/{{run}}/{action}/",
           {**own_write(302, page=True), "anonymous": 404, "viewer": 404}, body={})
      for action in ("cancel", "pause", "resume")],
    Case("private kernel diff", "GET", "/runs/{run}/kernels/{private_kernel}/diff/", private()),
    Case("private transcript", "GET", "/runs/{run}/kernels/{private_kernel}/transcript/", private()),
    Case("memory page", "GET", "/memory/", page_role(200)),
    Case("memory entry page", "GET", "/memory/{entry}/", page_role(200)),
    Case("pin on the page", "POST", "/memory/{entry}/pin/", page_role(302, CURATOR), body={}),
    Case("private run's lesson page", "GET", "/memory/{private_entry}/", private_lesson(page=True)),
    Case("revert a private run's lesson", "POST", "/memory/{private_entry}/revert/1/",
         {**private_lesson(302, page=True, curate=True), "other": 403}, body={}),
    Case("undo a private run's lesson's merge", "POST", "/memory/merges/{private_entry}/undo/",
         {**private_lesson(302, page=True, curate=True), "other": 403}, body={}),
    *[Case(f"{decision} the merge of two of a private run's lessons", "POST",
           f"/memory/proposals/{{private_proposal}}/{decision}/",
           {**private_lesson(302, page=True, curate=True), "other": 403}, body={}) for decision in ("accept", "reject")],
    Case("prune a private run's lesson on the page", "POST", "/memory/{private_entry}/prune/",
         {**private_lesson(302, page=True, curate=True), "other": 403}, body={}),
    *[Case(f"{action} on the page", "POST", f"/memory/{{entry}}/{action}/", page_role(302, CURATOR), body={})
      for action in ("unpin", "restore", "accept", "transfers", "stays")],
    Case("memory edit page", "GET", "/memory/{entry}/edit/", page_role(200, CURATOR)),
    Case("edit a memory entry on the page", "POST", "/memory/{entry}/edit/", page_role(302, CURATOR),
         body={"title": "tile it better", "summary": "s"}),
    Case("memory import page", "GET", "/memory/import/", page_role(200, CURATOR)),
    Case("import memory on the page", "POST", "/memory/import/", page_role(302, CURATOR), multipart=True,
         body={"file": [("experience.json", b"[]")]}),
    Case("memory export download", "GET", "/memory/export/", page_role(200)),
    Case("memory bulk prune on the page", "POST", "/memory/prune/", page_role(302, CURATOR),
         body=lambda w: {"ids": [str(w["entry"])]}),
    Case("campaign form", "GET", "/campaigns/new/", page_role(200)),
    # Without problems: the form again, saying what is missing, for whoever may launch one.
    Case("launch a campaign on the page", "POST", "/campaigns/new/", page_role(200), body={"name": "mine"}),
    Case("campaign form's estimate", "GET", "/campaigns/new/estimate/", page_role(200)),
    Case("private campaign's progress", "GET", "/campaigns/{campaign}/progress/", private()),
    *[Case(f"export an unfinished private campaign on the page as {fmt}", "GET",
           f"/campaigns/{{campaign}}/export.{fmt}", private(409)) for fmt in ("json", "csv")],
    Case("campaign comparison", "GET", "/campaigns/compare/", everyone(200)),
    # Anyone signed in makes tokens of their own (the page shows the new one once).
    Case("new API token", "POST", "/accounts/tokens/", {**everyone(201), "anonymous": 302}, body={"name": "t"}),
    Case("MCP tool calls page", "GET", "/agents/calls/", {**everyone(200), "anonymous": 302}),
    Case("campaigns page", "GET", "/campaigns/", everyone(200)),
    Case("private campaign page", "GET", "/campaigns/{campaign}/", private()),
    Case("cancel a private campaign on the page", "POST", "/campaigns/{campaign}/cancel/",
         {**own_write(302, page=True), "anonymous": 404, "viewer": 404}, body={}),
    Case("profile", "GET", "/accounts/me/", {**everyone(200), "anonymous": 302}),
    Case("password form", "GET", "/accounts/password/", {**everyone(200), "anonymous": 302}),
    # A wrong current password: the form again, for anyone signed in; nobody's password changes.
    Case("change one's password", "POST", "/accounts/password/", {**everyone(200), "anonymous": 302},
         body={"old_password": "wrong", "new_password1": "a-new-Passw0rd", "new_password2": "a-new-Passw0rd"}),
    # Only one's own tokens: anyone else's answers 404, admins' included (they revoke them in /admin/).
    Case("revoke erin's API token", "POST", "/accounts/tokens/{token}/revoke/",
         {**everyone(404), "anonymous": 302, "owner": 302}, body={}),
    Case("evaluation queue", "GET", "/ops/evaluations/", everyone(200)),
    Case("quotas page", "GET", "/ops/quotas/", page_role(200, ADMIN)),
    # --- Django admin: the admin role (staff) manages users, never superusers ---------------------------
    Case("admin site", "GET", "/admin/", {**everyone(302), "admin": 200, "superuser": 200}),
    Case("superuser's password form", "GET", "/admin/auth/user/{superuser}/password/",
         {**everyone(302), "admin": 403, "superuser": 200}),
    Case("superuser's change form", "POST", "/admin/auth/user/{superuser}/change/",
         {**everyone(302), "admin": 403, "superuser": 200}, body={}),
    Case("make oneself superuser", "POST", "/admin/auth/user/{admin}/change/",
         {**everyone(302), "admin": 302, "superuser": 302}, body=_admin_self_promotion, check=_still_not_superuser),
]


@pytest.fixture
def world(make_user: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    # Requests queue evaluations; none of them needs to run here.
    monkeypatch.setattr("benchmark.services.evaluations._submit", lambda evaluation: None)
    root = get_user_model().objects.create_superuser("root", "root@example.com", "x")
    users = {
        "viewer": make_user("vera"), "owner": make_user("erin", role=ENGINEER), "other": make_user("tom", role=ENGINEER),
        "curator": make_user("cora", role=CURATOR), "admin": make_user("ada", role=ADMIN, is_staff=True),
        "superuser": root,
    }
    grant_role(users["superuser"], ADMIN)
    summary = services.import_flashinfer(
        services.flashinfer_items_from_paths([str(FIXTURES / name) for name in
                                              ("studio_axpy_h16.json", "studio_axpy_h16.jsonl",
                                               "studio_axpy_blocked.solution.json")]),
        platform="h100", user=users["owner"],
    )
    problem = summary.problems[0]
    baseline = problem.baseline_kernel
    run = Run.objects.create(problem=problem, start_kernel=baseline, owner=users["owner"], is_public=False,
                             platform="h100", backend="cuda")

    def generated(marker: str) -> Kernel:
        source = f"{baseline.source}\n{marker}\n"
        return Kernel.objects.create(problem=problem, source=source, sha256=source_sha256(source),
                                     origin=KernelOrigin.GENERATED, run_id=run.pk, author=users["owner"],
                                     parent=baseline, entry_point=baseline.entry_point,
                                     solution_meta=baseline.solution_meta)

    def evaluation(kernel: Kernel, platform: str, backend: str, **fields: Any) -> Evaluation:
        return Evaluation.objects.create(
            kernel=kernel, platform=platform, backend=backend, backend_version="test", status=EvaluationStatus.DONE,
            compiled=True, runnable=True, correct=True, reference_digest=problem.reference_digest,
            finished=timezone.now(), **fields,
        )

    private_kernel, private_held_kernel = generated(MARKER), generated(MARKER_HELD)
    evaluation(baseline, "h100", "triton-interpreter")  # correct: what the solution export falls back to
    private_evaluation = evaluation(private_kernel, "h100", "cuda", latency_ms=0.001)  # the fastest on the board
    held = evaluation(baseline, "h200", "cuda", latency_ms=0.5, review=Review.HELD, held_reason="test",
                      held_at=timezone.now())
    private_held = evaluation(private_held_kernel, "h200", "cuda", latency_ms=0.002, review=Review.HELD,
                              held_reason="test", held_at=timezone.now())
    campaign = Campaign.objects.create(name="erin's", owner=users["owner"], is_public=False)
    entry = add_entry(title="tile it", summary="s", slow_kernel="a = 1", fast_kernel="a = 2", speedup=2.0)
    # What erin's private run learned: a lesson of its own, carrying its kernel's source, and a second time a
    # lesson the public entry above already held (evidence there naming the run and its candidate).
    private_entry = learn(title=LESSON, summary="unroll the loop", slow_kernel=baseline.source,
                          fast_kernel=private_kernel.source, speedup=3.0, polarity="positive", problem=problem,
                          source_run_id=run.pk, candidate_key="c1", source_key=f"run:{run.pk}:c1").entry
    MemoryEvidence.objects.create(entry=entry, original_entry=entry, speedup=4.0, problem=problem,
                                  source_run_id=run.pk, candidate_key="c2", source_key=f"run:{run.pk}:c2")
    # Two of its lessons that read alike: a merge proposed for a curator who may see them.
    twin_entry = add_entry(title=f"{LESSON}, again", summary="unroll it", slow_kernel=baseline.source,
                           fast_kernel=private_held_kernel.source, speedup=2.5, problem=problem,
                           source_kind="run", source_run_id=run.pk)
    proposal = MergeProposal.objects.create(entry=private_entry, duplicate=twin_entry, similarity=0.8)
    iteration = Iteration.objects.create(run=run, index=1)
    Candidate.objects.create(iteration=iteration, key="c1", parent_kernel=baseline, kernel=private_kernel,
                             evaluation=private_evaluation, plan="erin's plan")
    return {
        "users": users, "problem_row": problem, "problem": problem.pk, "address": problem.address,
        "kernel": baseline.pk, "private_kernel": private_kernel.pk, "private_held_kernel": private_held_kernel.pk,
        "private_evaluation": private_evaluation.pk, "held": held.pk, "private_held": private_held.pk,
        "run": run.pk, "campaign": campaign.pk, "entry": entry.pk, "private_entry": private_entry.pk,
        "private_proposal": proposal.pk, "token": create_token(users["owner"], "erin's").token.pk, "superuser": root.pk, "admin": users["admin"].pk,
    }


def _client(world: dict[str, Any], role: str, case: Case) -> tuple[Client, dict[str, str]]:
    # A script with a token never has a CSRF token: every API route must answer it with CSRF checks on.
    client = Client(enforce_csrf_checks=case.api)
    if role == "anonymous":
        return client, {}
    user = world["users"][role]
    if case.api:
        return client, {"Authorization": f"Bearer {create_token(user, 'matrix').secret}"}
    client.force_login(user)
    return client, {}


def _request(client: Client, headers: dict[str, str], case: Case, world: dict[str, Any]) -> Any:
    path = case.path.format(**world)
    body = case.body(world) if callable(case.body) else case.body
    if case.method == "GET":
        return client.get(path, headers=headers)
    if case.multipart:  # a field whose value is a list of (name, content) pairs holds files
        from django.core.files.uploadedfile import SimpleUploadedFile

        data = {key: [SimpleUploadedFile(name, content) for name, content in value]
                if isinstance(value, list) and value and isinstance(value[0], tuple) else value
                for key, value in body.items()}
        return client.post(path, data, headers=headers)
    if case.api:
        return client.generic(case.method, path, json.dumps(body), content_type="application/json", headers=headers)
    return client.generic(case.method, path, _form(body), content_type="application/x-www-form-urlencoded",
                          headers=headers)


def _form(body: dict[str, Any] | None) -> str:
    from urllib.parse import urlencode

    return urlencode(body or {}, doseq=True)


def _leaks(world: dict[str, Any], content: bytes) -> list[str]:
    text = content.decode("utf-8", "replace")
    found = [marker for marker in (MARKER, MARKER_HELD, LESSON)
             if marker in text or json.dumps(marker)[1:-1] in text or escape(marker) in text]
    run = world["run"]
    traces = [f"/kernels/{world['private_kernel']}/", f"/kernels/{world['private_held_kernel']}/",
              f'?run={run}"', f'data-run="{run}"', f"/runs/{run}/", "a private run"]
    return found + [trace for trace in traces if trace in text]


# The matrix's placeholders and the schema's path parameters they fill.
SCHEMA_PARAMETERS = (("{problem}", "{reference}"), ("{kernel}", "{kernel_id}"), ("{private_kernel}", "{kernel_id}"),
                     ("{private_evaluation}", "{evaluation_id}"), ("{held}", "{evaluation_id}"),
                     ("{private_held}", "{evaluation_id}"), ("{entry}", "{entry_id}"), ("{private_entry}", "{entry_id}"),
                     ("{run}", "{run_id}"), ("{campaign}", "{campaign_id}"))


def _schema_route(case: Case) -> tuple[str, str]:
    """The (method, path) an API case calls, as the OpenAPI schema names it."""
    template = case.path
    for name, param in SCHEMA_PARAMETERS:
        template = template.replace(name, param)
    return case.method, template


def _declared_statuses(case: Case) -> set[str]:
    method, path = _schema_route(case)
    return {str(status) for status in api.get_openapi_schema()["paths"][path][method.lower()]["responses"]}


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_each_person_gets_what_their_role_allows(case: Case, world: dict[str, Any]) -> None:
    wrong = []
    declared = _declared_statuses(case) if case.api else set()
    for role in ROLES:
        with transaction.atomic():
            client, headers = _client(world, role, case)
            response = _request(client, headers, case, world)
            got = response.status_code
            if got != case.expected[role]:
                wrong.append(f"{role}: {got}, expected {case.expected[role]} ({response.content[:160]!r})")
            elif case.api and str(got) not in declared:
                wrong.append(f"{role}: {got}, a status the OpenAPI schema does not list ({sorted(declared)})")
            elif got < 300 and role not in case.sees_private and (leaks := _leaks(world, response.content)):
                wrong.append(f"{role}: the answer shows erin's private run's work: {leaks}")
            elif case.check is not None:
                try:
                    case.check(world, role)
                except AssertionError as error:
                    wrong.append(f"{role}: {error}")
            transaction.set_rollback(True)
    assert not wrong, f"{case.method} {case.path}:\n" + "\n".join(wrong)


def test_the_matrix_covers_every_api_route() -> None:
    """A new endpoint must join the matrix: its schema's paths are the matrix's, no more, no fewer."""
    schema = api.get_openapi_schema()
    routes = {(method.upper(), path) for path, operations in schema["paths"].items() for method in operations}
    covered = {_schema_route(case) for case in CASES if case.api}
    solution_path = ("GET", "/api/flashinfer/solutions/{reference}")
    assert routes - covered == set(), f"routes missing from the matrix: {sorted(routes - covered)}"
    assert solution_path in covered


# Answers beyond the matrix's, each from a route that gives it (method, path, the schema's path, status): the
# schema must list them too.
API_ANSWERS = [
    ("GET", "/api/runs?status=bogus", "/api/runs", 400),
    ("GET", "/api/memory?polarity=bogus", "/api/memory", 400),
    ("GET", "/api/problems/nkibench/:", "/api/problems/{reference}", 400),
    ("GET", "/api/campaigns/{campaign}/export.csv", "/api/campaigns/{campaign_id}/export.csv", 200),  # finished
    ("GET", "/api/runs/{run}/events?after=x", "/api/runs/{run_id}/events", 422),
    ("GET", "/api/kernels/999999", "/api/kernels/{kernel_id}", 404),
]


@pytest.mark.parametrize(("method", "path", "route", "status"), API_ANSWERS, ids=[f"{m} {p}" for m, p, _, _ in API_ANSWERS])
def test_the_schema_lists_what_the_api_answers(world: dict[str, Any], method: str, path: str, route: str,
                                               status: int) -> None:
    Campaign.objects.filter(pk=world["campaign"]).update(finished=timezone.now())
    token = create_token(world["users"]["superuser"], "schema").secret
    response = Client().generic(method, path.format(**world), "{}", content_type="application/json",
                                headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == status, response.content
    declared = api.get_openapi_schema()["paths"][route][method.lower()]["responses"]
    assert status in {int(key) for key in declared}, f"{method} {path} answers {status}, unlisted in its schema"


# --- the same source as a private run's kernel ------------------------------------------------------------


@pytest.mark.parametrize("role", ["owner", "other", "curator", "admin"])
def test_uploading_a_private_runs_kernel_source_stores_a_row_of_ones_own(world: dict[str, Any], role: str) -> None:
    """Whoever uploads the very source erin's private run wrote (its owner too: an upload is seen by everyone
    who sees the problem) gets a new kernel, with none of that run's evaluations or provenance."""
    private_kernel = Kernel.objects.get(pk=world["private_kernel"])
    client = Client()
    token = create_token(world["users"][role], "matrix").secret
    body = {"problem": str(world["problem"]), "source": private_kernel.source, "evaluate": False}
    response = client.post("/api/kernels", json.dumps(body), content_type="application/json",
                           headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 201, response.content
    kernel = response.json()["kernel"]
    assert response.json()["created"] is True
    assert kernel["id"] != private_kernel.pk and kernel["run_id"] is None and kernel["evaluations"] == []
    assert kernel["author"] == world["users"][role].username
    # Their upload is theirs to read (the private run's row would answer 404 to most of them).
    page = Client()
    page.force_login(world["users"][role])
    assert page.get(f"/kernels/{kernel['id']}/").status_code == 200
    assert f"/runs/{world['run']}/" not in page.get(f"/kernels/{kernel['id']}/").content.decode()
    # A second upload of it is that same row again, not a third one.
    again = client.post("/api/kernels", json.dumps(body), content_type="application/json",
                        headers={"Authorization": f"Bearer {token}"})
    assert again.json()["kernel"]["id"] == kernel["id"] and again.json()["created"] is False


def test_another_run_writing_a_private_runs_source_is_answered_by_nothing_of_it(
        world: dict[str, Any], make_user: Callable[..., Any]) -> None:
    """The identical-candidate cache answers a candidate from a twin's stored result only where everyone who
    sees the candidate may see the twin: tom's run evaluates erin's private source again; erin's next private run
    is answered from her own."""
    private_kernel = Kernel.objects.get(pk=world["private_kernel"])
    problem = world["problem_row"]
    # As a run's rewrite stores it: the solution files it keeps, not the whole solution's description.
    private_kernel.solution_meta = {key: value for key, value in problem.baseline_kernel.solution_meta.items()
                                    if key in ("path", "sources", "order")}
    private_kernel.save(update_fields=["solution_meta"])

    def run_of(owner: Any, *, public: bool) -> Run:
        return Run.objects.create(problem=problem, start_kernel=problem.baseline_kernel, owner=owner,
                                  is_public=public, platform="h100", backend="cuda")

    def answer(run: Run) -> tuple[Kernel, Evaluation | None]:
        # A comment line of its own: another source, the same kernel to the cache.
        rewrite = f"{private_kernel.source}# written by run {run.pk}\n"
        kernel, _ = services.create_kernel(problem, rewrite, origin=KernelOrigin.GENERATED, run_id=run.pk,
                                           rewrite_of=problem.baseline_kernel)
        return kernel, services.IdenticalSources(problem).answer_for(kernel, "h100", "cuda", "test")

    toms_kernel, toms_answer = answer(run_of(world["users"]["other"], public=False))
    assert toms_answer is None
    # Word for word erin's source: tom's run gets a row of its own, not hers with its evaluation.
    same, _ = services.create_kernel(problem, private_kernel.source, origin=KernelOrigin.GENERATED,
                                     run_id=toms_kernel.run_id, rewrite_of=problem.baseline_kernel)
    assert same.pk != private_kernel.pk and not same.evaluations.exists()
    public_kernel, public_answer = answer(run_of(world["users"]["owner"], public=True))
    assert public_answer is None  # her own public run: everyone reads what answers it
    erins_kernel, erins_answer = answer(run_of(world["users"]["owner"], public=False))
    assert erins_answer is not None and erins_answer.pk == world["private_evaluation"]


# Page routes the matrix leaves out, each with why: none changes anything or shows anyone's work.
PAGES_NOT_IN_MATRIX = {
    "healthz": "the server's health, the same answer for everyone (tests/site/test_healthz.py)",
    "docs/<str:name>/": "the site's own documentation, the same for everyone",
    "accounts/login/": "the sign-in form (throttling: tests/site/test_login_throttle.py)",
    "accounts/logout/": "ends one's own session",
    "accounts/password/done/": "says one's password was changed",
}
# Whole trees another test owns: the API (test_the_matrix_covers_every_api_route) and Django's admin, whose own
# permission checks rule it (the admin cases above try what the admin role must not reach).
PREFIXES_NOT_IN_MATRIX = ("api/", "^api/", "admin/")


def _page_routes() -> set[str]:
    from django.urls import URLResolver, get_resolver

    def walk(patterns: list[Any], prefix: str) -> Any:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, route)
            else:
                yield route

    return {route for route in walk(get_resolver().url_patterns, "") if not route.startswith(PREFIXES_NOT_IN_MATRIX)}


def test_the_matrix_covers_every_page_route() -> None:
    """A new page must join the matrix (or PAGES_NOT_IN_MATRIX, saying why it shows and changes nothing): each
    route a page case reaches, by Django's own URL resolution."""
    from collections import defaultdict
    from urllib.parse import urlsplit

    from django.urls import resolve

    ids: defaultdict[str, int] = defaultdict(lambda: 1)
    covered = {resolve(urlsplit(case.path.format_map(ids)).path).route for case in CASES if not case.api}
    missing = _page_routes() - covered - set(PAGES_NOT_IN_MATRIX)
    assert missing == set(), f"page routes missing from the matrix: {sorted(missing)}"
    assert not set(PAGES_NOT_IN_MATRIX) & covered, "a route both in the matrix and excused from it"


# Routes whose last part names what they do (the keyword that holds it, and every value a view takes): each
# value is a case of its own.
ROUTE_ACTIONS = {
    "runs/<int:pk>/<str:action>/": ("action", ("cancel", "pause", "resume")),  # optimizer.views.run_action
    "memory/<int:pk>/<str:action>/": ("action", tuple(MEMORY_ACTIONS)),
    "memory/proposals/<int:pk>/<str:decision>/": ("decision", ("accept", "reject")),
    "campaigns/<int:pk>/export.<str:fmt>": ("fmt", ("json", "csv")),
}


def test_the_matrix_covers_every_page_action(make_user: Callable[..., Any]) -> None:
    """Each method a page route answers (its 405's Allow header names them) and each action of a route that names
    one must be a case: a form's POST is an action of its own, not covered by the GET that shows the form."""
    from collections import defaultdict
    from urllib.parse import urlsplit

    from django.urls import resolve

    client = Client()
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.com", "x"))
    wanted = set()
    for route in _page_routes() - set(PAGES_NOT_IN_MATRIX):
        allow = client.options("/" + re.sub(r"<int:\w+>", "1", re.sub(r"<str:\w+>", "x", route))).headers.get("Allow")
        assert allow, f"{route}: its view names no methods (require_GET, require_POST or require_http_methods)"
        methods = {method.strip() for method in allow.split(",")} - {"HEAD", "OPTIONS", "PUT"}  # PUT: a form's POST
        _, actions = ROUTE_ACTIONS.get(route, ("", ("",)))
        wanted |= {(route, method, action) for method in methods for action in actions}
    ids: defaultdict[str, int] = defaultdict(lambda: 1)
    covered = set()
    for case in CASES:
        if not case.api:
            match = resolve(urlsplit(case.path.format_map(ids)).path)
            keyword, _ = ROUTE_ACTIONS.get(match.route, ("", ()))
            covered.add((match.route, case.method, match.kwargs.get(keyword, "")))
    missing = sorted(wanted - covered)
    assert not missing, f"page actions missing from the matrix: {missing}"


def test_private_runs_nobody_owns_share_their_kernels_and_no_one_elses(world: dict[str, Any]) -> None:
    """A management command's private runs (no owner) are seen by admins only, all of them: a repeated command
    campaign finds the first one's kernels and results; erin's private kernel stays hers."""
    problem = world["problem_row"]
    private_kernel = Kernel.objects.get(pk=world["private_kernel"])
    first, second = (Run.objects.create(problem=problem, start_kernel=problem.baseline_kernel, owner=None,
                                        is_public=False, platform="h100", backend="cuda") for _ in range(2))
    source = f"{problem.baseline_kernel.source}# a command's campaign wrote this\n"
    written, _ = services.create_kernel(problem, source, origin=KernelOrigin.GENERATED, run_id=first.pk)
    assert services.create_kernel(problem, source, origin=KernelOrigin.GENERATED, run_id=second.pk)[0] == written
    theirs, _ = services.create_kernel(problem, private_kernel.source, origin=KernelOrigin.GENERATED, run_id=second.pk)
    assert theirs.pk != private_kernel.pk


def test_a_public_run_never_shows_a_private_problem_or_a_private_runs_code(world: dict[str, Any]) -> None:
    """A public run shows everyone its starting kernel (its diff and transcript pages) and its problem's reference
    (its prompts): one from erin's private run's kernel, or on a private problem, is refused, saying why; launched
    private, the same run is hers to start."""
    token = create_token(world["users"]["owner"], "public run").secret
    headers = {"Authorization": f"Bearer {token}"}

    def launch(path: str, body: dict[str, Any]) -> Any:
        return Client().post(path, json.dumps(body), content_type="application/json", headers=headers)

    from_private_kernel = {**_run_from_private_kernel(world), "is_public": True}
    refused = launch("/api/runs", from_private_kernel)
    assert refused.status_code == 400
    assert refused.json()["detail"] == (f"kernel {world['private_kernel']} was written by a private run: a public run "
                                        "starting from it would show it to everyone; launch this run private, or "
                                        "start from another kernel")
    assert launch("/api/runs", {**from_private_kernel, "is_public": False}).status_code == 201

    problem = world["problem_row"]
    problem.visibility = Visibility.PRIVATE
    problem.save(update_fields=["visibility"])
    on_private_problem = {"problem": str(problem.pk), "platform": "h100", "backend": "triton-interpreter",
                          "is_public": True}
    refused = launch("/api/runs", on_private_problem)
    assert refused.status_code == 400 and f"{problem.address} is a private problem" in refused.json()["detail"]
    campaign = launch("/api/campaigns", {"problems": [str(problem.pk)], "platform": "h100",
                                         "backend": "triton-interpreter", "is_public": True})
    assert campaign.status_code == 400 and "cannot be public" in campaign.json()["detail"]
    assert not Run.objects.filter(is_public=True).exists()


# What the Content-Security-Policy (script-src 'self') forbids a page: a script in the page itself (a JSON data block
# is no script), an inline event handler (htmx's hx-on included), a javascript: address.
INLINE_SCRIPT = re.compile(r"<script\b(?![^>]*\bsrc=)(?![^>]*\btype=[\"']application/json)[^>]*>", re.IGNORECASE)
INLINE_HANDLER = re.compile(r"<[a-z][^>]*\s(on[a-z]+|hx-on[^\s=]*)\s*=", re.IGNORECASE)
SCRIPT_ADDRESS = re.compile(r"\b(?:href|src|action|formaction)\s*=\s*[\"']?\s*javascript:", re.IGNORECASE)
ADMIN_PAGES = ("/admin/", "/admin/auth/user/", "/admin/auth/user/{admin}/change/", "/admin/auth/group/add/",
               "/admin/benchmark/kernel/{private_kernel}/change/")


def test_no_page_needs_what_the_content_security_policy_forbids(world: dict[str, Any]) -> None:
    """Every page the matrix reads, as a superuser sees it (everything shown), and the admin's forms: nothing on them
    runs only if the policy allows inline script, so each works under it as it is."""
    # A run with an iteration done: its page and chart fragment draw a Plotly figure.
    Run.objects.filter(pk=world["run"]).update(start_latency_ms=0.01)
    Iteration.objects.filter(run_id=world["run"], index=1).update(finished=timezone.now(), best_latency_ms=0.005)
    client = Client()
    client.force_login(world["users"]["superuser"])
    paths = [case.path for case in CASES if not case.api and case.method == "GET"] + list(ADMIN_PAGES)
    found, figures = [], 0
    for path in paths:
        response = client.get(path.format(**world))
        if response.status_code != 200 or not response["Content-Type"].startswith("text/html"):
            continue
        assert "script-src 'self'" in response["Content-Security-Policy"], path
        html = response.content.decode()
        figures += html.count("data-plotly-figure")
        found += [f"{path}: {match.group(0)[:80]}" for pattern in (INLINE_SCRIPT, INLINE_HANDLER, SCRIPT_ADDRESS)
                  for match in pattern.finditer(html)]
    assert not found, "what the policy blocks:\n" + "\n".join(found)
    assert figures, "no page drew a Plotly figure: the check above saw none of them"


def test_the_evaluation_queue_names_a_cancelled_private_run_only_to_who_may_see_it(world: dict[str, Any]) -> None:
    """An evaluation stopped with erin's private run is listed on /ops/evaluations/ for everyone (the queue is
    shared), but the reason naming her run only for those who may see it."""
    # As benchmark's cancel_pending_evaluations stores it when the run is cancelled.
    Evaluation.objects.filter(pk=world["private_evaluation"]).update(
        error_kind=ErrorKind.INFRASTRUCTURE_ERROR, finished=timezone.now(),
        error_message=f"{services.CANCELLED_PREFIX}run {world['run']} was cancelled")
    for role in ROLES:
        client = Client()
        if role != "anonymous":
            client.force_login(world["users"][role])
        rows = client.get("/ops/evaluations/?format=json").json()["cancelled"]
        assert len(rows) == 1
        named = rows[0]["reason"] == f"run {world['run']} was cancelled"
        assert named == (role in SEES_PRIVATE_RUN), f"{role}: {rows[0]}"
