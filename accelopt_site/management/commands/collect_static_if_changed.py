"""`make prepare`'s static step: `collectstatic` (hashed names, gzip and brotli copies), only when a static
file changed since it last ran. Compressing plotly.js and the admin's files takes the better part of a
minute on 2 cores: a newcomer pays it once, not on every `make run`."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.core.management.base import BaseCommand

STAMP_NAME = ".accelopt-collected"


def static_fingerprint() -> str:
    """A digest of every file the finders list (name, size, modification time) and the storage in use."""
    digest = hashlib.sha256(settings.STORAGES["staticfiles"]["BACKEND"].encode())
    entries = []
    for finder in finders.get_finders():
        for path, storage in finder.list(None):
            stat = Path(storage.path(path)).stat()
            entries.append(f"{getattr(storage, 'prefix', '') or ''}/{path}\0{stat.st_size}\0{stat.st_mtime_ns}")
    for entry in sorted(entries):
        digest.update(entry.encode() + b"\n")
    return digest.hexdigest()


class Command(BaseCommand):
    help = "Run collectstatic when the static files changed since the last time (make prepare calls it)."

    def handle(self, *args: Any, **options: Any) -> None:
        root = Path(settings.STATIC_ROOT)
        stamp = root / STAMP_NAME
        fingerprint = static_fingerprint()
        if stamp.is_file() and stamp.read_text() == fingerprint and (root / "staticfiles.json").is_file():
            self.stdout.write("Static files are collected and compressed already.")
            return
        self.stdout.write("Collecting and compressing static files (after a change only: up to a minute on 2 cores)...")
        call_command("collectstatic", interactive=False, verbosity=0)
        stamp.write_text(fingerprint)
        self.stdout.write("Static files collected.")
