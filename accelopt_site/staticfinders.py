"""A static-files finder for single files that ship inside installed Python packages.

plotly.min.js (4.7 MB) is part of the `plotly` wheel we already depend on. Serving it from there keeps it
out of git, keeps its version in step with the Python package that builds the figures, and needs no CDN.
Configured by settings.ACCELOPT_PACKAGE_STATIC_FILES: {url_path: (package, path_inside_package)}.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path, PurePosixPath
from typing import Any

from django.conf import settings
from django.contrib.staticfiles.finders import BaseFinder
from django.core import checks
from django.core.files.storage import FileSystemStorage


def _package_file(package: str, inner_path: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / inner_path
        if candidate.is_file():
            return candidate
    return None


class PackageFileFinder(BaseFinder):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.files: dict[str, Path] = {}
        self.missing: dict[str, str] = {}
        for url_path, (package, inner_path) in settings.ACCELOPT_PACKAGE_STATIC_FILES.items():
            found = _package_file(package, inner_path)
            if found is None:
                self.missing[url_path] = f"{package}/{inner_path}"
            else:
                self.files[url_path] = found

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        return [
            checks.Error(
                f"static file {url_path!r} should come from {source!r}, which is not installed",
                hint="pip install -e . installs the packages that ship these files",
                id="accelopt_site.E001",
            )
            for url_path, source in self.missing.items()
        ]

    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> str | list[str]:
        found = self.files.get(path)
        if found is None:
            return []  # what Django's own finders return for "not here", whatever find_all says
        return [str(found)] if find_all else str(found)

    def list(self, ignore_patterns: list[str] | None) -> Any:
        for url_path, found in self.files.items():
            storage = FileSystemStorage(location=found.parent)
            # collectstatic joins storage.prefix with the name, reproducing url_path under STATIC_ROOT.
            folder = str(PurePosixPath(url_path).parent)
            if folder != ".":
                storage.prefix = folder
            yield found.name, storage
