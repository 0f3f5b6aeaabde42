from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command, get_commands
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accelopt_site.config_check import check_configuration, unknown_variables

# Steps other apps provide, run when they exist: (command, arguments). Kept here so `make run` never
# needs editing when an app adds its first-run step; a missing command is skipped, a failing one stops.
# The suite's baselines are not evaluated here: the server starts at once and evaluates them in the
# background (benchmark.services.baselines; the leaderboard shows the progress).
OPTIONAL_STEPS: tuple[tuple[str, tuple[str, ...]], ...] = (("load_suite", ("nkibench", "--evaluate", "none")),)


class Command(BaseCommand):
    help = (
        "Bring a checkout up to date for serving: migrate, create the role groups and the first admin, "
        "then load the built-in suites. Idempotent; `make run` calls it on every start."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--admin-username", default="admin")
        parser.add_argument("--skip-optional", action="store_true", help="only migrate, roles and admin")

    def handle(self, *args: Any, **options: Any) -> None:
        # First: `make run` stops here, before migrating, on any invalid ACCELOPT_* value (all listed at once).
        try:
            check_configuration()
        except ImproperlyConfigured as error:
            raise CommandError(str(error)) from None
        for name in unknown_variables():
            self.stderr.write(f"warning: {name} is set but AccelOpt Studio reads no such setting (a typo?)")
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("Database migrated.")
        call_command("bootstrap_roles", stdout=self.stdout)
        call_command("create_admin", username=options["admin_username"], stdout=self.stdout)
        if options["skip_optional"]:
            return
        available = get_commands()
        for name, arguments in OPTIONAL_STEPS:
            if name not in available:
                self.stdout.write(f"Skipped `{name}`: no app provides it yet.")
                continue
            call_command(name, *arguments, stdout=self.stdout)
