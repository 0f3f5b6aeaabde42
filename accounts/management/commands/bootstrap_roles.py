from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from accounts.roles import ROLES, bootstrap_roles


class Command(BaseCommand):
    help = "Create the role groups (engineer, curator, admin). Safe to run any number of times."

    def handle(self, *args: Any, **options: Any) -> None:
        created = bootstrap_roles()
        new = f"created {', '.join(created)}" if created else "none new"
        self.stdout.write(f"Roles ready: {', '.join(ROLES)} ({new}).")
