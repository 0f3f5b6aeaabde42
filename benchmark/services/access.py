"""Who may see and change what, and problems by address: the one helper per object that views, the API and
commands use to fetch a row for a user (404 when it is not visible to them, 403 when they may not write).

A problem is addressed as `[SUITE/]SLUG[:CASE]`; the suite defaults to nkibench and the case to mini.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import Http404

from accounts.roles import is_engineer
from benchmark.models import (
    CUSTOM_SUITE,
    DEFAULT_CASE,
    DEFAULT_SUITE,
    Evaluation,
    Kernel,
    Problem,
    Visibility,
)
from benchmark.provenance import audience_owner, generating_runs, hidden_from_audience, hidden_run_ids
from engine.platforms.nki.suites import available_suites


def can_create_kernels(user: Any) -> bool:
    """Engineers (and the roles above them) upload kernels; anonymous visitors only read."""
    return is_engineer(user)


def visible_problems(user: Any) -> QuerySet[Problem]:
    """Public problems, plus the private ones (uploaded references) the user owns."""
    problems = Problem.objects.all()
    if user is not None and user.is_authenticated:
        if user.is_superuser:
            return problems
        return problems.filter(Q(visibility=Visibility.PUBLIC) | Q(owner=user))
    return problems.filter(visibility=Visibility.PUBLIC)


def builtin_suites() -> frozenset[str]:
    """Suites the site itself loads (load_suite) and the one users' private references live in: read-only
    to users, so an import or upload can never replace a problem everyone ranks against."""
    return frozenset({DEFAULT_SUITE, CUSTOM_SUITE, *available_suites()})


def can_edit_problem(user: Any, problem: Problem) -> bool:
    """Whether `user` may change a problem's reference, description or workloads: its owning engineer, or a
    superuser. Nobody else, admins included: the reference is what every answer is checked against."""
    if user is None or not user.is_authenticated:
        return False
    if user.is_superuser:
        return True
    return problem.owner_id == user.pk and problem.suite not in builtin_suites() and is_engineer(user)


def require_problem_editor(user: Any, problem: Problem, label: str = "") -> None:
    """PermissionDenied naming the conflict unless `user` may edit `problem` (can_edit_problem)."""
    if can_edit_problem(user, problem):
        return
    prefix = f"{label}: " if label else ""
    if problem.suite in builtin_suites():
        why = f"it is in the built-in suite {problem.suite!r}, which is read-only"
    else:
        owner = problem.owner.get_username() if problem.owner_id else "the site"
        why = f"it belongs to {owner}"
    raise PermissionDenied(f"{prefix}{problem.address} already exists and you may not change it: {why}. "
                           "Give yours another name, or import it into a suite of your own.")


def get_problem_for_user(user: Any, pk: int) -> Problem:
    try:
        return visible_problems(user).get(pk=pk)
    except Problem.DoesNotExist:
        raise Http404(f"no problem with id {pk}") from None


def visible_kernels(user: Any) -> QuerySet[Kernel]:
    """Kernels of problems the user may see, less those a run they may not see wrote: a generated kernel is
    as private as its run (its source is the run's work), wherever it is listed, read, ranked or exported."""
    return Kernel.objects.filter(problem__in=visible_problems(user)).exclude(run_id__in=hidden_run_ids(user))


def shareable_kernels(problem: Problem, run_id: int | None = None) -> QuerySet[Kernel]:
    """The kernels of `problem` that a kernel stored now by run `run_id` (None: an upload, an import) may be, or take
    a result from: those everyone who will see it may see. A run's kernels are seen by whoever sees the run (a
    private one's by its owner and admins), an upload's by whoever sees its problem; so never another person's
    private run's row, which would hand over its evaluations and provenance, or show that it exists."""
    hidden = Q(run_id__in=hidden_from_audience(audience_owner(run_id)))
    if run_id:
        hidden &= ~Q(run_id=run_id)
    return Kernel.objects.filter(problem=problem).exclude(hidden)


def visible_evaluations(user: Any, evaluations: QuerySet[Evaluation] | None = None) -> QuerySet[Evaluation]:
    """`evaluations` (all by default) narrowed to those of kernels `user` may see (visible_kernels)."""
    if evaluations is None:
        evaluations = Evaluation.objects.all()
    return evaluations.filter(kernel__problem__in=visible_problems(user)).exclude(
        kernel__run_id__in=hidden_run_ids(user)
    )


def source_audience(kernel: Kernel) -> str:
    """Who can read a kernel's source, in a sentence for its page: whoever can see its problem and, for a
    generated kernel, its run (visible_kernels)."""
    problem = kernel.problem
    run = generating_runs([kernel]).get(kernel.run_id) if kernel.run_id else None
    if run is not None and not run.is_public:
        return f"Only whoever may see run {run.pk}, which wrote it, and the site's admins: that run is private."
    if problem.visibility == Visibility.PUBLIC:
        return "Everyone, including visitors who are not signed in: its problem is public."
    owner = problem.owner.get_username() if problem.owner else "its owner"
    return f"Only {owner} and the site's admins: it solves a private problem (an uploaded reference)."


def get_kernel_for_user(user: Any, pk: int, *, write: bool = False) -> Kernel:
    try:
        kernel = visible_kernels(user).select_related("problem", "author", "parent").get(pk=pk)
    except Kernel.DoesNotExist:
        raise Http404(f"no kernel with id {pk}") from None
    if write and not can_create_kernels(user):
        raise PermissionDenied("only engineers can upload kernels or request evaluations")
    return kernel


def get_evaluation_for_user(user: Any, pk: int) -> Evaluation:
    try:
        return visible_evaluations(user, Evaluation.objects.select_related("kernel", "kernel__problem")).get(pk=pk)
    except Evaluation.DoesNotExist:
        raise Http404(f"no evaluation with id {pk}") from None


def parse_problem_address(address: str) -> tuple[str, str, str]:
    """`silu` -> (nkibench, silu, mini); `silu:full`; `imported/silu:1`."""
    text = address.strip()
    if not text:
        raise ValueError("empty problem address; expected [SUITE/]SLUG[:CASE], e.g. silu:mini")
    suite, _, rest = text.rpartition("/")
    slug, _, case = rest.partition(":")
    if not slug:
        raise ValueError(f"problem address {address!r} has no slug; expected [SUITE/]SLUG[:CASE]")
    return suite or DEFAULT_SUITE, slug, case or DEFAULT_CASE


def get_problem_by_address(address: str, user: Any = None, *, require_visible: bool = True) -> Problem:
    suite, slug, case = parse_problem_address(address)
    problems = visible_problems(user) if require_visible else Problem.objects.all()
    try:
        return problems.get(suite=suite, slug=slug, case=case)
    except Problem.DoesNotExist:
        known = sorted(
            Problem.objects.filter(suite=suite, slug=slug).values_list("case", flat=True)
        )
        hint = f"; cases of {slug}: {', '.join(known)}" if known else ""
        if not Problem.objects.filter(suite=suite).exists():
            hint = f"; suite {suite!r} is not loaded (python manage.py load_suite {suite})"
        raise Http404(f"no problem {suite}/{slug}:{case}{hint}") from None


def get_problem_by_reference(user: Any, reference: str) -> Problem:
    """A problem by id ("12") or address ("silu", "silu:full", "imported/silu:1"), as the API names one."""
    if reference.isdigit():
        return get_problem_for_user(user, int(reference))
    return get_problem_by_address(reference, user)


def find_problems(user: Any, *, suite: str = "", case: str = "") -> QuerySet[Problem]:
    """The problems `user` may see, narrowed to one suite and/or case when given."""
    problems = visible_problems(user)
    if suite:
        problems = problems.filter(suite=suite)
    if case:
        problems = problems.filter(case=case)
    return problems


def other_cases(user: Any, problem: Problem) -> QuerySet[Problem]:
    """The problem's other shape cases (same suite and slug) that `user` may see."""
    return visible_problems(user).filter(suite=problem.suite, slug=problem.slug).exclude(pk=problem.pk)


def mini_sibling(problem: Problem) -> Problem | None:
    """The mini case of a full-size problem (same suite and slug), where a run checks candidates first
    (engine.search.cascade); None for any other case or when the suite has no mini case of it."""
    if problem.case != "full":
        return None
    return (Problem.objects.filter(suite=problem.suite, slug=problem.slug, case="mini", language=problem.language)
            .exclude(pk=problem.pk).first())


def kernel_evaluations(kernel: Kernel) -> list[Evaluation]:
    """A kernel's evaluations, newest first, with who requested and who reviewed each."""
    return list(kernel.evaluations.select_related("requested_by", "reviewed_by").order_by("-created", "-id"))
