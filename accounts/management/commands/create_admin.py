from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from accounts.services import create_admin


class Command(BaseCommand):
    help = "Create the first admin account with a random password, printed once. Does nothing if it exists."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin")

    def handle(self, *args: Any, **options: Any) -> None:
        username = options["username"]
        password = create_admin(username)
        if password is None:
            self.stdout.write(f"Admin account {username!r} already exists; password unchanged.")
            return
        self.stdout.write(
            self.style.WARNING(
                f"Created admin account {username!r} with password {password}\n"
                "  It is shown only this once: note it, then change it at /accounts/password/."
            )
        )
