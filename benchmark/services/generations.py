"""Moving a legacy `neuronxcc.nki` kernel to the current `nki` package (NKI 0.6): the one service behind the
kernel page's Migrate button, POST /api/kernels/{id}/migrate and the MCP tool migrate_legacy_kernel.

The rewrite itself is engine.platforms.nki.migration (AWS's migration guides, each change naming its section).
The result is a new kernel of the same problem, the legacy one as its parent, evaluated like any upload: on the
same reference and inputs as the original, so its verdict says whether the migration kept the kernel's values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError

from benchmark.diffing import DiffRow, side_by_side
from benchmark.models import Evaluation, Kernel, KernelOrigin
from benchmark.services.access import can_create_kernels
from benchmark.services.evaluations import request_evaluation
from benchmark.services.kernels import create_kernel
from benchmark.services.queue import check_evaluation_quota
from engine.platforms.nki.generations import CURRENT, LABELS, LEGACY, kernel_generation
from engine.platforms.nki.migration import MigrationChange, MigrationError, migrate_source
from engine.platforms.registry import NKI


@dataclass(frozen=True)
class MigratedKernel:
    kernel: Kernel  # the NKI 0.6 kernel (its parent is the legacy one)
    created: bool  # False: this exact source was already stored for the problem
    evaluation: Evaluation | None
    changes: tuple[MigrationChange, ...]


def migrate_kernel(user: Any, kernel: Kernel, *, platform: str | None = None, evaluate: bool = True,
                   wait: bool = False) -> MigratedKernel:
    """Store the NKI 0.6 version of a legacy kernel the user can see, and start its evaluation.

    Refused (ValidationError, saying why) for a kernel that is not legacy NKI, or that has a construct the
    migration cannot rewrite (the message names its line and the construct). Without a platform: the
    problem's default one."""
    if user is not None and not can_create_kernels(user):  # None: a management command (manage.py optimize)
        raise PermissionDenied("only engineers can migrate kernels")
    if kernel.problem.language != NKI:
        raise ValidationError(f"kernel {kernel.pk} is a {kernel.problem.language} kernel; only NKI kernels have "
                              "generations to migrate between")
    generation = kernel_generation(kernel.source)
    if generation != LEGACY:
        what = LABELS.get(generation or "", "a source that imports neither NKI namespace")
        raise ValidationError(f"kernel {kernel.pk} is not in the legacy neuronxcc.nki namespace ({what}); there is "
                              "nothing to migrate")
    try:
        migration = migrate_source(kernel.source)
    except MigrationError as error:
        raise ValidationError(f"kernel {kernel.pk} cannot be migrated mechanically: {error}") from error
    if evaluate:
        check_evaluation_quota(user)  # before anything is stored
    name = f"{kernel.display_name} (NKI 0.6)"
    migrated, created = create_kernel(kernel.problem, migration.source, origin=KernelOrigin.UPLOADED, author=user,
                                      parent=kernel, name=name)
    evaluation = None
    if evaluate:
        evaluation = request_evaluation(migrated, platform or kernel.problem.default_platform, user=user, wait=wait)
    return MigratedKernel(migrated, created, evaluation, migration.changes)


@dataclass(frozen=True)
class MigrationView:
    parent: Kernel
    rows: list[DiffRow]
    changes: tuple[MigrationChange, ...]


def migration_of(kernel: Kernel) -> MigrationView | None:
    """How a kernel came from its legacy parent, when it is exactly that parent's migration (for its page)."""
    parent = kernel.parent
    if parent is None or kernel_generation(kernel.source) != CURRENT or kernel_generation(parent.source) != LEGACY:
        return None
    try:
        migration = migrate_source(parent.source)
    except MigrationError:
        return None
    if migration.source != kernel.source:
        return None
    return MigrationView(parent, side_by_side(parent.source, kernel.source), migration.changes)
