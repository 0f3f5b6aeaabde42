"""The Python packages a platform's evaluations need beyond the base install, and what to say when one is missing.

The Triton platforms (h100, h200) need PyTorch and Triton, the `triton` extra of pyproject.toml. `make run`
installs it when the machine can (Makefile); where it could not, the pages say so before anything is queued
(`benchmark.services.evaluations.backend_unavailable`), and an evaluation that still meets a missing package
(a Ray node without it, a package the sandbox cannot see) ends at once as a configuration problem naming the
package and the install command: never retried, never "ours, retried" (issue 32).

A missing package is stored as an infrastructure error (it says nothing about the kernel: never ranked, never
sent to the Fixer) whose message starts with MISSING_PACKAGE_PREFIX; `Evaluation.get_error_kind_display` shows
it as a configuration error.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable

# (import name, what people call it): the triton extra's packages, in the order they are needed.
TRITON_PACKAGES: tuple[tuple[str, str], ...] = (("torch", "PyTorch"), ("triton", "Triton"))
TRITON_INSTALL = ".venv/bin/pip install -e '.[triton]'"
MISSING_PACKAGE_PREFIX = "configuration: not installed where evaluations run: "
CONFIGURATION_LABEL = "Configuration error (a package is missing; not retried)"


def missing_triton_packages() -> list[str]:
    """Import names of the Triton platform's packages this interpreter cannot find (not imported: fast)."""
    return [name for name, _ in TRITON_PACKAGES if importlib.util.find_spec(name) is None]


def missing_packages_message(names: Iterable[str]) -> str:
    """What a page and an evaluation say: the packages, and the command that installs them."""
    labels = dict(TRITON_PACKAGES)
    listed = ", ".join(f"{labels.get(n, n)} (`{n}`)" for n in names)
    return (f"{MISSING_PACKAGE_PREFIX}{listed}. The Triton platform needs the `triton` extra: run "
            f"{TRITON_INSTALL} in the checkout (make run does when the machine can), then restart the server")


def triton_unavailable() -> str | None:
    """Why Triton kernels cannot be evaluated by this process (None: they can)."""
    missing = missing_triton_packages()
    return missing_packages_message(missing) if missing else None


def is_missing_package(message: str) -> bool:
    return message.startswith(MISSING_PACKAGE_PREFIX)


def missing_module(exc: BaseException) -> str | None:
    """The Triton package an ImportError is about, if it is one of ours (a kernel's own imports are its own)."""
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        root = exc.name.split(".")[0]
        if root in dict(TRITON_PACKAGES):
            return root
    return None
