"""FlashInfer-Bench in the product: importing definitions, workloads and solutions as Triton problems and
kernels, and exporting our best kernel for a problem as a solution.

Reading and writing the formats is `engine.platforms.triton.flashinfer` (pure, shared with the GPU script); this
module maps them onto rows. One import is one transaction: a bad file or field anywhere stores nothing
from that import and leaves what was stored before as it was. Re-importing is idempotent; a workload is
identified by its uuid, so importing more workloads of a definition adds to the ones it has.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from benchmark.models import Evaluation, Kernel, KernelOrigin, Problem, Visibility
from benchmark.services.access import (
    builtin_suites,
    can_edit_problem,
    require_problem_editor,
    visible_evaluations,
)
from benchmark.services.evaluations import backend_unavailable, request_evaluation
from benchmark.services.kernels import create_kernel, kernel_source_limit
from benchmark.services.queue import check_evaluation_quota
from benchmark.services.solutions import solution_document
from benchmark.sizes import human_bytes
from engine.platforms.registry import FLASHINFER_FORMAT, MEASURED, get_definition, platforms_storing

# Where imported definitions go unless told otherwise, and the case naming "all of its workloads".
FLASHINFER_SUITE = "flashinfer"
WORKLOADS_CASE = "workloads"
# The largest file an import reads (a definition, a workload list, a solution): FlashInfer-Bench's are KiBs.
MAX_FILE_BYTES = 8 * 1024 * 1024


@dataclass
class FlashInferItems:
    """What one import brings, each item with the label its errors name (a file, "file:line", "solutions[0]")."""

    definitions: list[tuple[str, Any]] = field(default_factory=list)
    workloads: list[tuple[str, Any]] = field(default_factory=list)
    solutions: list[tuple[str, Any]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.definitions) + len(self.workloads) + len(self.solutions)


@dataclass
class FlashInferImportSummary:
    suite: str
    platform: str
    problems: list[Problem] = field(default_factory=list)
    problems_created: int = 0
    workloads_added: int = 0
    kernels: list[Kernel] = field(default_factory=list)
    kernels_created: int = 0
    evaluations: list[Evaluation] = field(default_factory=list)

    def __str__(self) -> str:
        return (
            f"{self.suite}: {len(self.problems)} problems ({self.problems_created} new), {self.workloads_added} "
            f"workloads added, {len(self.kernels)} solutions ({self.kernels_created} new) for {self.platform}"
        )


def _fib() -> Any:
    # Imported on first use, like the evaluation pipeline: web processes that never import need none of it.
    from engine.platforms.triton import flashinfer

    return flashinfer


# --------------------------------------------------------------------------------------------------
# Reading files


def _json(text: str, label: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ValidationError(f"{label}: not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})") from None


def _kind(data: Any, label: str) -> str:
    """Which FlashInfer-Bench object a JSON file holds, by its fields."""
    if isinstance(data, dict) and "spec" in data and "sources" in data:
        return "solution"
    if isinstance(data, dict) and "axes" in data:
        return "definition"
    if isinstance(data, dict) and "workload" in data:
        return "workload"
    keys = sorted(data)[:8] if isinstance(data, dict) else type(data).__name__
    raise ValidationError(
        f"{label}: neither a definition (axes, inputs, outputs, reference), a solution (spec, sources) nor a "
        f"workload (definition, workload); found {keys}"
    )


def items_from_texts(named_texts: Iterable[tuple[str, str]]) -> FlashInferItems:
    """Sort named file contents into definitions, workloads and solutions: a `.jsonl` file holds one
    workload per line, a `.json` file one definition or solution (told apart by their fields)."""
    items = FlashInferItems()
    for name, text in named_texts:
        if name.endswith(".jsonl"):
            for number, line in enumerate(text.splitlines(), start=1):
                if line.strip():
                    items.workloads.append((f"{name}:{number}", _json(line, f"{name}:{number}")))
            continue
        data = _json(text, name)
        getattr(items, f"{_kind(data, name)}s").append((name, data))
    return items


def items_from_paths(paths: Sequence[str | Path]) -> FlashInferItems:
    """The files named, and under each directory named every `.json` and `.jsonl` file (sorted)."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl"))
            if not found:
                raise ValidationError(f"{path}: no .json or .jsonl files under it")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        else:
            raise ValidationError(f"{path}: no such file or directory")
    texts = []
    for path in files:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ValidationError(f"{path}: {path.stat().st_size / 2**20:.1f} MiB; the limit is "
                                  f"{MAX_FILE_BYTES // 2**20} MiB per file")
        try:
            texts.append((str(path), path.read_text(encoding="utf-8")))
        except UnicodeDecodeError as error:
            raise ValidationError(f"{path}: not UTF-8 text (byte {error.start})") from None
    return items_from_texts(texts)


def items_from_payload(payload: dict[str, Any]) -> FlashInferItems:
    """The API's body: lists of definitions, workloads and solutions as JSON objects."""
    items = FlashInferItems()
    for kind in ("definitions", "workloads", "solutions"):
        values = payload.get(kind) or []
        if not isinstance(values, list):
            raise ValidationError(f"{kind}: expected a list of objects, got {type(values).__name__}")
        getattr(items, kind).extend((f"{kind}[{index}]", value) for index, value in enumerate(values))
    return items


# --------------------------------------------------------------------------------------------------
# Importing


def _parse(kind: str, data: Any, label: str) -> Any:
    """One object through the Triton core's reader; its complaint (naming the field), prefixed with where
    the object came from."""
    reader = getattr(_fib(), f"parse_{kind}")
    try:
        return reader(data)
    except (ValueError, TypeError, KeyError) as error:
        raise ValidationError(f"{label}: {error}") from None


def _problem_fields(definition: Any, language: str) -> dict[str, Any]:
    return {
        "language": language,
        "family": definition.op_type[:64],
        "title": definition.name[:200],
        "description": definition.description,
        "parameters": dict(definition.const_axes),
        "reference_source": definition.reference,
        "definition": _fib().definition_to_dict(definition),
        "visibility": Visibility.PUBLIC,
    }


def _check_workload(definition: Any, workload: Any) -> None:
    """A workload must give every variable axis of its definition and name only the definition's inputs."""
    definition.axis_values(workload)  # FormatError naming a missing axis
    unknown = sorted(set(workload.inputs) - set(definition.inputs))
    if unknown:
        raise ValueError(f"workload.inputs.{unknown[0]}: not an input of {definition.name} "
                         f"(inputs are {sorted(definition.inputs)})")
    extra = sorted(set(workload.axes) - set(definition.var_axes))
    if extra:
        raise ValueError(f"workload.axes.{extra[0]}: not a variable axis of {definition.name} "
                         f"(variable axes are {sorted(definition.var_axes)})")


def _solution_parts(solution: Any, language: str) -> tuple[str, str, dict[str, Any]]:
    """A solution in the kernel `language` of its platform as what a Kernel row holds: its entry file's source, its
    entry point, and the rest (for evaluation and export): the other files under "sources", every path in order
    under "order"."""
    if solution.language != language:
        raise ValueError(f"spec.language: {solution.language!r} solutions are not supported; only {language}")
    for index, path in enumerate(solution.sources):
        why = _fib().unimportable_source(path)
        if why:
            raise ValueError(f"sources[{index}].path: {path!r}: {why}")
    size = sum(len(content.encode("utf-8")) for content in solution.sources.values())
    if size > kernel_source_limit():
        raise ValueError(f"sources: {human_bytes(size)} in all; the limit is {human_bytes(kernel_source_limit())}")
    meta = {
        "name": solution.name, "author": solution.author, "description": solution.description,
        "target_hardware": list(solution.target_hardware), "dependencies": list(solution.dependencies),
        "path": solution.entry_file, "extra": solution.extra,
    }
    if len(solution.sources) > 1:
        meta["sources"] = {p: c for p, c in solution.sources.items() if p != solution.entry_file}
        meta["order"] = list(solution.sources)
    return solution.sources[solution.entry_file], solution.entry_point, meta


def import_flashinfer(
    items: FlashInferItems,
    *,
    platform: str,
    user: Any = None,
    suite: str = FLASHINFER_SUITE,
    evaluate: bool = False,
) -> FlashInferImportSummary:
    """Store definitions as Triton problems of `suite` (one per definition, case "workloads"), workloads on
    their definition's problem, and solutions as imported kernels, for a GPU `platform` (h100, h200).

    All or nothing: a bad item anywhere raises ValidationError naming it, and nothing of this import is
    stored. A definition's first imported solution becomes its problem's baseline, the kernel runs start
    from. With `evaluate`, every imported kernel is evaluated on `platform` (its default backend) afterwards.
    """
    if not len(items):
        raise ValidationError("nothing to import: give FlashInfer-Bench definitions, workloads or solutions")
    try:
        language = get_definition(platform).language
    except ValueError as error:
        raise ValidationError(str(error)) from None
    if get_definition(platform).problem_format != FLASHINFER_FORMAT:
        fitting = ", ".join(platforms_storing(FLASHINFER_FORMAT)) or "none"
        raise ValidationError(f"{platform} runs {language} kernels on problems that are not FlashInfer-Bench "
                              f"definitions; import them for one of {fitting}")
    if evaluate:
        # Checked before storing anything: an import asked to evaluate what cannot run here stores nothing.
        unavailable = backend_unavailable(get_definition(platform).default_backend.value, platform)
        if unavailable:
            raise ValidationError(f"nothing was imported: {unavailable}. Or import without evaluating.")
    if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", suite):
        raise ValidationError(f"suite: {suite!r} cannot name a suite (letters, digits, _ and -, at most 64)")
    if user is not None and suite in builtin_suites():
        raise PermissionDenied(f"suite: {suite!r} is a built-in suite and read-only; import into a suite of your "
                               f"own, e.g. {FLASHINFER_SUITE!r}")
    if evaluate:
        check_evaluation_quota(user, adding=len(items.solutions))
    summary = FlashInferImportSummary(suite=suite, platform=platform)
    with transaction.atomic():
        problems = _import_definitions(items, summary, user, suite, language)
        _import_workloads(items, problems, summary, user, suite)
        _import_solutions(items, problems, summary, user, suite, language)
    if evaluate:
        summary.evaluations = [request_evaluation(kernel, platform, user=user) for kernel in summary.kernels]
    return summary


def _problem_named(problems: dict[str, Problem], name: str, suite: str, label: str) -> Problem:
    """The problem of a definition named in this import or imported before into `suite`."""
    if name in problems:
        return problems[name]
    problem = Problem.objects.select_for_update().filter(suite=suite, slug=name, case=WORKLOADS_CASE).first()
    if problem is None or not problem.is_flashinfer:
        raise ValidationError(f"{label}: definition {name!r} is neither in this import nor imported into {suite!r}")
    problems[name] = problem
    return problem


def _editable(problem: Problem, user: Any, label: str) -> Problem:
    """The problem, if this import may change it: a command (no user) may; a person must own it."""
    if user is not None:
        require_problem_editor(user, problem, label)
    return problem


def _import_definitions(items: FlashInferItems, summary: FlashInferImportSummary, user: Any,
                        suite: str, language: str) -> dict[str, Problem]:
    problems: dict[str, Problem] = {}
    for label, raw in items.definitions:
        definition = _parse("definition", raw, label)
        if definition.name in problems:
            raise ValidationError(f"{label}: a second definition named {definition.name!r} in this import")
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,100}", definition.name):
            raise ValidationError(f"{label}: name: {definition.name!r} cannot name a problem (letters, digits, "
                                  "_ and -, at most 100)")
        problem = Problem.objects.select_for_update().filter(suite=suite, slug=definition.name,
                                                              case=WORKLOADS_CASE).first()
        if problem is not None and (not problem.is_flashinfer or problem.language != language):
            raise ValidationError(f"{label}: {problem.address} is an existing {problem.language} problem")
        if problem is not None:
            _editable(problem, user, label)  # a re-import replaces the reference: only its owner's
        fields = _problem_fields(definition, language)
        if problem is None:
            problem = Problem.objects.create(suite=suite, slug=definition.name, case=WORKLOADS_CASE,
                                             owner=user if getattr(user, "is_authenticated", False) else None,
                                             **fields)
            summary.problems_created += 1
        else:
            for name, value in fields.items():
                setattr(problem, name, value)
            problem.save()
        problems[definition.name] = problem
        summary.problems.append(problem)
    return problems


def _import_workloads(items: FlashInferItems, problems: dict[str, Problem], summary: FlashInferImportSummary,
                      user: Any, suite: str) -> None:
    fib = _fib()
    changed: dict[str, Problem] = {}
    for label, raw in items.workloads:
        workload = _parse("workload", raw, label)
        problem = _editable(_problem_named(problems, workload.definition, suite, label), user, label)
        try:
            _check_workload(fib.parse_definition(problem.definition), workload)
        except ValueError as error:
            raise ValidationError(f"{label}: {error}") from None
        if not workload.uuid:
            raise ValidationError(f"{label}: workload.uuid: missing (a workload is kept and replaced by its uuid)")
        dumped = fib.workload_to_dict(workload)
        uuids = [w["workload"].get("uuid") for w in problem.workloads]
        if workload.uuid in uuids:
            problem.workloads[uuids.index(workload.uuid)] = dumped
        else:
            problem.workloads.append(dumped)
            summary.workloads_added += 1
        changed[workload.definition] = problem
    for problem in changed.values():
        problem.save()
        if problem not in summary.problems:
            summary.problems.append(problem)


def _import_solutions(items: FlashInferItems, problems: dict[str, Problem], summary: FlashInferImportSummary,
                      user: Any, suite: str, language: str) -> None:
    for label, raw in items.solutions:
        solution = _parse("solution", raw, label)
        problem = _problem_named(problems, solution.definition, suite, label)
        if not problem.workloads:
            raise ValidationError(f"{label}: definition {solution.definition!r} has no workloads to evaluate "
                                  "the solution on; import its workloads (.jsonl) with it")
        try:
            source, entry_point, meta = _solution_parts(solution, language)
        except ValueError as error:
            raise ValidationError(f"{label}: {error}") from None
        kernel, created = create_kernel(problem, source, origin=KernelOrigin.IMPORTED, author=user,
                                        name=solution.name)
        if created or not kernel.entry_point:
            kernel.entry_point, kernel.solution_meta = entry_point, meta
            kernel.save(update_fields=["entry_point", "solution_meta"])
        elif (kernel.solution_meta or {}).get("sources", {}) != meta.get("sources", {}):
            # A kernel is its entry file's source (one row per source and problem): the same entry file
            # with other helper files would silently be taken for the stored kernel.
            raise ValidationError(f"{label}: kernel {kernel.pk} of {problem.address} has the same "
                                  f"{solution.entry_file} but other files beside it; rename or change "
                                  f"{solution.entry_file} to import this solution as a kernel of its own")
        if problem.baseline_kernel_id is None and (user is None or can_edit_problem(user, problem)):
            problem.baseline_kernel = kernel  # the reference point runs start from, as import_nkibench does
            problem.save(update_fields=["baseline_kernel"])
        summary.kernels.append(kernel)
        summary.kernels_created += created
        if problem not in summary.problems:
            summary.problems.append(problem)


# --------------------------------------------------------------------------------------------------
# Exporting


def exportable_kernel(problem: Problem, user: Any = None) -> tuple[Kernel, Evaluation]:
    """Our best kernel for a FlashInfer-Bench problem among those `user` may see (None: an anonymous visitor): the
    fastest measured by a backend whose latency is measured (Triton's: a GPU), on any of its platforms, else the
    newest any backend judged correct. ValidationError when there is none, or for a problem stored otherwise."""
    if not problem.is_flashinfer:
        raise ValidationError(f"{problem.address} is an {problem.language} problem; only problems stored as "
                              "FlashInfer-Bench definitions export as FlashInfer-Bench solutions")
    platforms = [p.value for p in problem.platforms]
    measured = [b.value for b in problem.backends if b.definition.latency == MEASURED]
    best = (
        visible_evaluations(user, Evaluation.objects.rankable())
        .filter(kernel__problem=problem, backend__in=measured, platform__in=platforms)
        .select_related("kernel").order_by("latency_ms", "id").first()
    )
    if best is not None:
        return best.kernel, best
    correct = (
        visible_evaluations(user).filter(kernel__problem=problem, correct=True, error_kind="", review="",
                                  status="done", platform__in=platforms)
        .select_related("kernel").order_by("-finished", "-id").first()
    )
    if correct is None:
        raise ValidationError(f"{problem.address} has no kernel judged correct yet; nothing to export")
    return correct.kernel, correct


def export_solution(problem: Problem, kernel: Kernel | None = None, *, user: Any = None) -> dict[str, Any]:
    """A kernel of a Triton problem (by default `exportable_kernel`) as a FlashInfer-Bench solution object.
    What an imported solution said (name, author, description, target hardware, dependencies) comes back."""
    if kernel is None:
        kernel, _ = exportable_kernel(problem, user)
    elif kernel.problem_id != problem.pk or not problem.is_flashinfer:
        raise ValidationError(f"kernel {kernel.pk} is not a kernel of the FlashInfer-Bench problem {problem.address}")
    return solution_document(kernel)
