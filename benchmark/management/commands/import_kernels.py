"""python manage.py import_kernels DIR --user NAME: upload every kernel file of a folder at once (issue 20)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from benchmark import services
from benchmark.models import Platform
from benchmark.services.kernel_import import import_kernels


class Command(BaseCommand):
    help = (
        "Upload every *.py file of DIR as a kernel, as USER (an engineer), and evaluate each. Without --problem, each "
        "file's problem comes from its NKIBench-style name (silu_M4096_N7168_0.py -> silu:full; silu.py -> "
        "silu:mini). Nothing is stored if any file has no problem."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("directory")
        parser.add_argument("--user", required=True, help="the engineer the kernels are uploaded as")
        parser.add_argument("--problem", default="", help="one problem for every file, e.g. silu:full")
        parser.add_argument("--platform", choices=Platform.values, default=None)
        parser.add_argument("--no-evaluate", action="store_true", help="store the kernels only")

    def handle(self, *args: Any, **options: Any) -> None:
        directory = Path(options["directory"])
        if not directory.is_dir():
            raise CommandError(f"{directory} is not a directory")
        user = get_user_model().objects.filter(username=options["user"]).first()
        if user is None:
            raise CommandError(f"no user named {options['user']!r}")
        files = [(path.name, path.read_bytes()) for path in sorted(directory.glob("*.py"))]
        try:
            problem = services.get_problem_by_address(options["problem"], user) if options["problem"] else None
            imported = import_kernels(user, files, problem=problem, platform=options["platform"],
                                      evaluate=not options["no_evaluate"], wait=True)
        except (ValidationError, PermissionDenied) as error:
            messages = error.messages if isinstance(error, ValidationError) else [str(error)]
            raise CommandError(" ".join(messages)) from None
        for item in imported:
            outcome = item.evaluation.outcome if item.evaluation is not None else "not evaluated"
            latency = f", {item.evaluation.latency_ms:.4g} ms" if item.evaluation and item.evaluation.latency_ms else ""
            self.stdout.write(f"{item.file_name}: kernel {item.kernel.pk} of {item.kernel.problem.address} "
                              f"({'new' if item.created else 'already there'}): {outcome}{latency}")
        self.stdout.write(f"{len(imported)} kernels imported, {sum(i.created for i in imported)} new")
