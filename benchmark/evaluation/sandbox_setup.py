"""`python -m benchmark.evaluation.sandbox_setup [--check]`: prepare this host so evaluation children can run
as the unprivileged sandbox user (benchmark/evaluation/sandbox_user.py). Run by `make sandbox`, which
`make run` and `make test` (so `.ci/run`) depend on. Idempotent; it does nothing unless run as root.

What it changes, and only when needed (docs/operations.md, "Evaluation sandbox"):

1. creates the user: `useradd --system --no-create-home --shell /usr/sbin/nologin accelopt-sandbox`;
2. adds "others may traverse" (o+x: enter by name, never list or read) to each directory on the way to the
   Python interpreter, its installation, the virtualenv and the checkout that lacks it. Here that is only
   /root (mode 0700), because the interpreter lives under /root/.pyenv;
3. removes all access for others from the project's var directory (the SQLite database is created 0644,
   and the sandbox user must not read it; the secret key file is 0600 already).

Then it checks, changing nothing: files of the Python installation and virtualenv that others cannot read
(reported; only when something was changed, or with --check), the interpreter starting as the user and
importing numpy, our simulator and the evaluation child, the user being unable to list var, and a tiny
evaluation passing end to end.

`--check` reports what would change and runs no probe; exit status 1 if anything would.
"""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmark.evaluation.sandbox import PROJECT_ROOT, child_environment
from benchmark.evaluation.sandbox_user import (
    ALLOW_ROOT_VARIABLE,
    SandboxUnavailable,
    SandboxUser,
    lookup_sandbox_user,
    root_allowed,
    sandbox_user_name,
)

_NOLOGIN_SHELLS = ("/usr/sbin/nologin", "/sbin/nologin", "/bin/false")

# Imported by the probe as the sandbox user: what every child role needs.
_PROBE_IMPORTS = ("numpy", "benchmark.evaluation.child", "benchmark.evaluation.backends", "benchmark.nki",
                  "benchmark.perf")

_PROBE_REFERENCE = '''
import numpy as np

def get_inputs():
    return [np.random.normal(size=(8, 8)).astype(np.float32), np.random.normal(size=(8, 8)).astype(np.float32)]

def forward(a, b):
    return a + b
'''
_PROBE_KERNEL = "import numpy as np\n\ndef kernel(a, b):\n    return a + b\n"


class SetupFailed(Exception):
    """The host is not ready and this step cannot make it so; the message says what to do."""


def var_dir() -> Path:
    """The project's runtime directory, resolved the way accelopt_site/settings.py does."""
    return Path(os.environ.get("ACCELOPT_VAR_DIR", "").strip() or Path(PROJECT_ROOT) / "var").resolve()


def _symlink_chain(path: str) -> list[str]:
    """`path`, every link target on the way, and the final real path (all absolute)."""
    chain, current = [], os.path.abspath(path)
    for _ in range(40):
        chain.append(current)
        if not os.path.islink(current):
            break
        current = os.path.normpath(os.path.join(os.path.dirname(current), os.readlink(current)))
    chain.append(os.path.realpath(path))
    return chain


def paths_the_sandbox_needs() -> list[str]:
    paths: list[str] = []
    for path in (sys.executable, sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, PROJECT_ROOT):
        paths.extend(_symlink_chain(path))
    return list(dict.fromkeys(paths))


def directories_to_open(paths: list[str]) -> list[str]:
    """Directories on the way to `paths` (real paths, outermost first) that others cannot traverse."""
    missing: list[str] = []
    for path in paths:
        target = Path(os.path.realpath(path))
        chain = [*reversed(target.parents), target] if target.is_dir() else [*reversed(target.parents)]
        for directory in chain:
            if not os.stat(directory).st_mode & stat.S_IXOTH and str(directory) not in missing:
                missing.append(str(directory))
    return missing


def reachable_neighbours(directory: str, needed: list[str]) -> list[str]:
    """Entries of `directory` that any user who knows their names can read once it is traversable."""
    on_the_way = {Path(os.path.realpath(p)).parts[len(Path(directory).parts)]
                  for p in needed if os.path.realpath(p).startswith(directory.rstrip("/") + "/")}
    names = []
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        mode = entry.stat(follow_symlinks=False).st_mode
        if entry.name not in on_the_way and mode & (stat.S_IROTH | stat.S_IXOTH):
            names.append(entry.name + ("/" if stat.S_ISDIR(mode) else ""))
    return names


def unreadable_files(roots: list[str], limit: int = 5) -> tuple[int, list[str]]:
    """Files others cannot read, and directories they cannot list and enter, under `roots`."""
    count, examples = 0, []
    for root in dict.fromkeys(os.path.realpath(r) for r in roots):
        for directory, subdirs, files in os.walk(root):
            for name in subdirs + files:
                path = os.path.join(directory, name)
                mode = os.lstat(path).st_mode
                needed = (stat.S_IROTH | stat.S_IXOTH) if stat.S_ISDIR(mode) else stat.S_IROTH
                if not stat.S_ISLNK(mode) and (mode & needed) != needed:
                    count += 1
                    if len(examples) < limit:
                        examples.append(path)
    return count, examples


def ensure_user(name: str, check_only: bool) -> tuple[SandboxUser | None, list[str]]:
    user = lookup_sandbox_user(name)
    if user is not None:
        return user, []
    shell = next((s for s in _NOLOGIN_SHELLS if os.path.exists(s)), "/bin/false")
    command = ["useradd", "--system", "--no-create-home", "--shell", shell, name]
    if check_only:
        return None, [" ".join(command)]
    if shutil.which("useradd") is None:
        raise SetupFailed(f"the sandbox user {name!r} does not exist and `useradd` is not installed; create an "
                          "unprivileged system user of that name by hand (no home, no login shell)")
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    user = lookup_sandbox_user(name)
    if user is None:  # exit status 9 (exists already) from a concurrent run is fine: the lookup decides
        raise SetupFailed(f"`{' '.join(command)}` failed (exit status {done.returncode}): {done.stderr.strip()}")
    return user, [f"{' '.join(command)}  (uid {user.uid}, gid {user.gid})"]


def open_directories(check_only: bool) -> list[str]:
    needed = paths_the_sandbox_needs()
    changes = []
    for directory in directories_to_open(needed):
        mode = stat.S_IMODE(os.stat(directory).st_mode)
        changes.append(f"chmod o+x {directory}  (was {stat.filemode(mode | stat.S_IFDIR)}, no listing for others)")
        if check_only:
            continue
        os.chmod(directory, mode | stat.S_IXOTH)
        exposed = reachable_neighbours(directory, needed)
        if exposed:
            changes.append(f"  note: these entries of {directory} are now readable by any user who knows their "
                           f"names (their own modes allow it): {', '.join(exposed)}")
    return changes


def close_var_dir(check_only: bool) -> list[str]:
    path = var_dir()
    if not path.exists():
        if check_only:
            return [f"mkdir {path} (mode 0750)"]
        path.mkdir(parents=True)
    mode = stat.S_IMODE(path.stat().st_mode)
    if not mode & 0o007:
        return []
    if not check_only:
        os.chmod(path, mode & ~0o007)
    return [f"chmod o-rwx {path}  (was {stat.filemode(mode | stat.S_IFDIR)}; holds the database and secret key)"]


def probe(user: SandboxUser) -> None:
    """Start the interpreter the way a child is started, as `user`; raise SetupFailed with its stderr."""
    private = tempfile.mkdtemp(prefix="accelopt-probe-")
    try:
        os.chown(private, user.uid, user.gid)
        code = (f"import {', '.join(_PROBE_IMPORTS)}\n"
                "import os, sys\n"
                "try:\n"
                f"    os.listdir({str(var_dir())!r})\n"
                "except PermissionError:\n"
                "    pass\n"
                "else:\n"
                f"    sys.exit('the sandbox user can list {var_dir()}')\n")
        try:
            done = subprocess.run([sys.executable, "-s", "-B", "-P", "-c", code], cwd=private,
                                  env=child_environment(private), user=user.uid, group=user.gid, extra_groups=[],
                                  capture_output=True, text=True, timeout=120, check=False)
        except PermissionError as exc:
            raise SetupFailed(f"the sandbox user {user.name!r} cannot execute {sys.executable}: {exc}") from None
        if done.returncode != 0:
            raise SetupFailed(f"the Python interpreter started as {user.name!r} failed (exit status "
                              f"{done.returncode}):\n{done.stderr.strip()[-3000:]}")
    finally:
        shutil.rmtree(private, ignore_errors=True)
    from benchmark.evaluation import Limits, evaluate

    result = evaluate(_PROBE_KERNEL, _PROBE_REFERENCE, backend="null",
                      limits=Limits(wall_seconds=60, cpu_seconds=60, infrastructure_retries=0))
    if not result.correct:
        raise SetupFailed(f"a trivial evaluation failed as {user.name!r}: {result.error_kind}: {result.error_message}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="report what would change; change nothing")
    check_only = parser.parse_args(argv).check
    say = "sandbox setup:"
    if os.geteuid() != 0:
        print(f"{say} not root (uid {os.geteuid()}): evaluation children run as this user; nothing to do")
        return 0
    try:
        if root_allowed():
            print(f"{say} {ALLOW_ROOT_VARIABLE} is set: evaluation children run as root; nothing to do")
            return 0
        name = sandbox_user_name()
        user, changes = ensure_user(name, check_only)
        changes += open_directories(check_only)
        changes += close_var_dir(check_only)
        for change in changes:
            print(f"{say} {'would run' if check_only else 'ran'}: {change}" if not change.startswith("  ")
                  else f"{say} {change.strip()}")
        # The scan reads ~84,000 inodes (seconds on a loaded host): done when setting up or asked to check,
        # not on every `make test` of a prepared host.
        count, examples = unreadable_files([sys.base_prefix, sys.prefix]) if changes or check_only else (0, [])
        if count:
            print(f"{say} warning: {count} files or directories of the Python installation cannot be read by "
                  f"{name!r} (an import of them will fail in a child), e.g. {', '.join(examples)}")
        if check_only:
            if not changes:
                print(f"{say} nothing to change for {name!r}")
            return 1 if changes else 0
        assert user is not None
        probe(user)
    except (SetupFailed, SandboxUnavailable) as exc:
        print(f"{say} FAILED: {exc}", file=sys.stderr)
        return 1
    print(f"{say} evaluation children run as {name!r} (uid {user.uid}); checked: it starts the interpreter, "
          "imports numpy and our code, cannot list var, and evaluates a trivial kernel")
    return 0


if __name__ == "__main__":
    sys.exit(main())
