"""Importing a folder of kernels at once (issue 20): `manage.py import_kernels DIR` and POST /api/kernels/import.

Each file is one upload (`upload_kernel`: stored, deduplicated, evaluated). Its problem is the one given for
the whole batch, or else read from the file name the way NKIBench names its kernels,
`<slug>_<P1><v1>_<P2><v2>..._<n>.py` (e.g. `silu_M4096_N7168_0.py`): the built-in problem with that slug
whose case has exactly those parameters (`silu:full`), or, when the name carries no shape (`silu.py`,
`silu_3.py`), that slug's mini case. The whole batch is checked before anything is stored: a file whose
problem cannot be found, or that is not UTF-8 text, fails the batch with a message naming every such file.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError

from benchmark.models import DEFAULT_CASE, DEFAULT_SUITE, Evaluation, Kernel, Problem
from benchmark.services.access import visible_problems
from benchmark.services.kernels import kernel_source_limit, upload_kernel
from benchmark.services.queue import check_evaluation_quota
from benchmark.sizes import human_bytes

MAX_FILES = 200  # one request or command; more is a sign of the wrong folder
_SHAPE_PART = re.compile(r"^([A-Za-z]+)(\d+)$")


@dataclass
class ImportedKernel:
    file_name: str
    kernel: Kernel
    created: bool
    evaluation: Evaluation | None


def problem_for_file(file_name: str, problems: Sequence[Problem]) -> Problem | None:
    """The problem a kernel file's NKIBench-style name points at, among `problems` (None if none or several)."""
    stem = file_name.rsplit("/", 1)[-1].removesuffix(".py")
    parts = stem.split("_")
    if len(parts) > 1 and parts[-1].isdigit():
        parts = parts[:-1]  # NKIBench's implementation index
    shape: dict[str, int] = {}
    while parts and (match := _SHAPE_PART.match(parts[-1])) and len(parts) > 1:
        shape[match.group(1)] = int(match.group(2))
        parts = parts[:-1]
    slug = "_".join(parts)
    candidates = [p for p in problems if p.slug == slug]
    if shape:
        matching = [p for p in candidates if {k: int(v) for k, v in p.parameters.items()} == shape]
    else:
        matching = [p for p in candidates if p.case == DEFAULT_CASE]
    if len(matching) > 1:  # the same slug and shape in several suites: prefer the built-in one
        matching = [p for p in matching if p.suite == DEFAULT_SUITE] or matching
    return matching[0] if len(matching) == 1 else None


def import_kernels(
    user: Any, files: Sequence[tuple[str, bytes | str]], *, problem: Problem | None = None,
    platform: str | None = None, evaluate: bool = True, wait: bool = False,
) -> list[ImportedKernel]:
    """Upload every (file name, content) as a kernel of `problem`, or of the problem its name points at; with
    `wait`, each evaluation runs to its end before the next file (the command, whose process then exits)."""
    if not files:
        raise ValidationError("no kernel files to import: give a folder with .py files, or attach some")
    if len(files) > MAX_FILES:
        raise ValidationError(f"{len(files)} files: at most {MAX_FILES} kernels per import")
    problems = [] if problem is not None else list(visible_problems(user))
    limit = kernel_source_limit()
    planned: list[tuple[str, str, Problem]] = []
    errors: list[str] = []
    for name, content in files:
        try:
            source = content.decode("utf-8") if isinstance(content, bytes) else content
        except UnicodeDecodeError as error:
            errors.append(f"{name}: not UTF-8 text (byte {error.start})")
            continue
        if len(source.encode()) > limit:
            errors.append(f"{name}: {human_bytes(len(source.encode()))}, over the {human_bytes(limit)} a kernel may be")
            continue
        target = problem or problem_for_file(name, problems)
        if target is None:
            errors.append(f"{name}: no problem matches the name (expected <slug>_<shape>_<n>.py, e.g. "
                          "silu_M4096_N7168_0.py, or give the problem)")
            continue
        planned.append((name, source.replace("\r\n", "\n"), target))
    if errors:
        raise ValidationError("nothing imported: " + "; ".join(errors))
    if evaluate:
        check_evaluation_quota(user, adding=len(planned))  # all or none, before any file is stored
    imported = []
    for name, source, target in planned:
        kernel, created, evaluation = upload_kernel(
            user, kernel_source=source, problem=target, kernel_name=name,
            evaluate=evaluate, wait=wait, **({"platform": platform} if platform else {}),
        )
        imported.append(ImportedKernel(name, kernel, created, evaluation))
    return imported
