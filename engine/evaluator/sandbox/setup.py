"""`python -m engine.evaluator.sandbox.setup [--check]`: prepare this host for the evaluation sandbox
(engine/evaluator/sandbox/isolation.py) and check that an isolated child really starts. Run by `make sandbox`,
which `make run` and `make test` (so `.ci/run`) depend on. Idempotent.

What it changes, and only when needed (docs/operations.md, "Evaluation sandbox"):

1. installs bubblewrap when `bwrap` is missing, and libseccomp2 (the children's seccomp filter) when it
   cannot be loaded (`apt-get install -y --no-install-recommends bubblewrap libseccomp2`, as root; `unshare` comes
   with util-linux, which every Debian has);
2. creates the directory of uid leases, /run/accelopt-sandbox (0700, root's);
3. adds "others may traverse" (o+x: enter by name, never list or read) to each directory on the way to the
   Python interpreter, its installation, the virtualenv and the project that lacks it, saying so and why
   before it changes anything: children run as uids of their own, and bubblewrap resolves those paths as
   that uid (even the ones it binds by descriptor). Here that is only /root (mode 0700), because the
   interpreter lives under /root/.pyenv; an interpreter outside a private home needs no change;
4. removes all access for others from the project's var directory (defence in depth: children cannot
   see it at all).

Then it checks, changing nothing: the sandbox's uid range is nobody's (no user, group or subordinate-id
range in it), files of the Python installation and virtualenv that others cannot read (reported; only when
something was changed, or with --check), an isolated child starting as one of those uids and importing
numpy, our simulator and the evaluation child, seeing only its own two processes, no network, no var/,
/root or /home, and a tiny evaluation passing end to end.

Not as root it installs and changes nothing; it checks that isolated children start. `--check` reports what
would change and runs no probe; exit status 1 if anything would.
"""

from __future__ import annotations

import argparse
import grp
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from engine.evaluator.sandbox import cgroups, isolation, seccomp
from engine.evaluator.sandbox.isolation import PACKAGE_DIR, PROJECT_ROOT, var_dir
from engine.evaluator.sandbox.process import child_environment
from engine.evaluator.sandbox.user import (
    ALLOW_ROOT_VARIABLE,
    LOCK_DIRECTORY,
    UIDS_VARIABLE,
    SandboxUnavailable,
    lease_uid,
    root_allowed,
    uid_range,
)

__all__ = ["PROJECT_ROOT", "main", "var_dir"]

# Imported by the probe inside the sandbox: what every child role needs.
_PROBE_IMPORTS = ("numpy", "engine.evaluator.child", "engine.evaluator.backends", "engine.platforms.nki.backend",
                  "engine.platforms.nki.roles", "engine.platforms.nki.simulator", "engine.platforms.nki.perf")

_PROBE_REFERENCE = '''
import numpy as np

def get_inputs():
    return [np.random.normal(size=(8, 8)).astype(np.float32), np.random.normal(size=(8, 8)).astype(np.float32)]

def forward(a, b):
    return a + b
'''
_PROBE_KERNEL = "import numpy as np\n\ndef kernel(a, b):\n    return a + b\n"

# The user `make sandbox` created before children ran in namespaces; reported, never removed here.
_OLD_USER = "accelopt-sandbox"


class SetupFailed(Exception):
    """The host is not ready and this step cannot make it so; the message says what to do."""


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
    for path in (sys.executable, sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, PACKAGE_DIR):
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


def ensure_tools(root: bool, check_only: bool) -> list[str]:
    """Install bubblewrap and libseccomp (the children's seccomp filter, seccomp.py) when missing (root with
    apt-get only); SetupFailed when they cannot be."""
    missing = [name for name, path in isolation.tools().items() if path is None]
    if "unshare" in missing:
        raise SetupFailed("`unshare` is missing: install util-linux (`apt-get install util-linux`)")
    packages = ["bubblewrap"] if missing else []
    if not seccomp.available():
        packages.append("libseccomp2")
    if not packages:
        return []
    commands = [["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", *packages]]
    shown = " && ".join(" ".join(c) for c in commands)
    if check_only:
        return [shown]
    if not root or shutil.which("apt-get") is None:
        raise SetupFailed(f"{' and '.join(packages)} {'is' if len(packages) == 1 else 'are'} not installed and "
                          f"this step cannot install {'it' if len(packages) == 1 else 'them'} "
                          f"({'not root' if not root else 'no apt-get'}): {isolation.INSTALL_HINT}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for command in commands:
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        if done.returncode != 0:
            raise SetupFailed(f"`{' '.join(command)}` failed (exit status {done.returncode}): "
                              f"{done.stderr.strip()[-2000:]}")
    if isolation.tools()["bwrap"] is None:
        raise SetupFailed("bubblewrap was installed but `bwrap` is not on PATH")
    seccomp.filter_program.cache_clear()
    if not seccomp.available():
        raise SetupFailed("libseccomp2 was installed but libseccomp.so.2 cannot be loaded")
    return [shown]


def _id_ranges(path: str) -> list[tuple[str, range]]:
    """Subordinate id ranges of /etc/subuid or /etc/subgid (name:first:count per line)."""
    ranges = []
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        parts = line.strip().split(":")
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            ranges.append((parts[0], range(int(parts[1]), int(parts[1]) + int(parts[2]))))
    return ranges


def uid_range_conflicts(uids: range) -> list[str]:
    """Users, groups and subordinate ranges that overlap the sandbox's uids (children would share them)."""
    found = [f"user {e.pw_name} (uid {e.pw_uid})" for e in pwd.getpwall() if e.pw_uid in uids]
    found += [f"group {e.gr_name} (gid {e.gr_gid})" for e in grp.getgrall() if e.gr_gid in uids]
    for path in ("/etc/subuid", "/etc/subgid"):
        found += [f"{path} range of {name} ({r.start}-{r.stop - 1})" for name, r in _id_ranges(path)
                  if r.start < uids.stop and uids.start < r.stop]
    return found


def ensure_lock_directory(check_only: bool) -> list[str]:
    if os.path.isdir(LOCK_DIRECTORY):
        return []
    if not check_only:
        os.makedirs(LOCK_DIRECTORY, mode=0o700, exist_ok=True)
    return [f"mkdir -m 0700 {LOCK_DIRECTORY}  (uid leases of running evaluation children)"]


def open_directories(check_only: bool, announce: Callable[[str], None] = print) -> list[str]:
    """Add o+x to each directory on the way to the interpreter and the project that lacks it, saying what
    and why *before* changing it. bubblewrap resolves every path it binds as the child's uid (its
    `--ro-bind-fd` too: it follows the descriptor's path), so there is no way to bind an interpreter
    that uid cannot reach; an interpreter outside a private home (/usr, /usr/local, /opt) needs none."""
    needed = paths_the_sandbox_needs()
    changes = []
    for directory in directories_to_open(needed):
        mode = stat.S_IMODE(os.stat(directory).st_mode)
        change = f"chmod o+x {directory}  (was {stat.filemode(mode | stat.S_IFDIR)}, no listing for others)"
        changes.append(change)
        exposed = reachable_neighbours(directory, needed)
        if check_only:
            continue
        announce(f"sandbox setup: changing {directory} outside the checkout: evaluation children run as uids of "
                 f"their own, which must reach the Python interpreter under it; `chmod o+x` lets any user enter "
                 f"it by name (never list it)"
                 + (f"; entries then readable by name: {', '.join(exposed)}" if exposed else "")
                 + ". To avoid it, install Python outside a private home (e.g. /usr/local), make the venv with "
                   f"it, and `chmod o-x {directory}`")
        os.chmod(directory, mode | stat.S_IXOTH)
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


# Run inside the sandbox by `make sandbox`: what a kernel would see if every Python guard were bypassed.
_INSIDE = '''
import json, os, socket, sys
import {imports}
report = {{"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
          "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()), "me": os.getpid(),
          "root": sorted(os.listdir("/")), "var": os.path.exists({var!r}), "cwd": os.getcwd(),
          "tmp": os.listdir("/tmp")}}
try:
    socket.create_connection(("127.0.0.1", 22), timeout=2).close()
    report["network"] = "connected"
except OSError as exc:
    report["network"] = exc.strerror or str(exc)
sys.__stdout__.write(json.dumps(report))
'''


def check_isolation(root: bool) -> str:
    """Start a child in the sandbox as a leased uid; SetupFailed naming what is not isolated."""
    isolation.reset()
    lease = lease_uid() if root else None
    try:
        isolation.probe(lease)
        code = _INSIDE.format(imports=", ".join(_PROBE_IMPORTS), var=str(var_dir()))
        argv = isolation.run_as(lease, isolation.command([sys.executable, "-s", "-B", "-P", "-c", code], 16 * 1024**2))
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False, cwd="/",
                              env=child_environment(isolation.SCRATCH))
    finally:
        if lease is not None:
            lease.release()
    if done.returncode != 0:
        raise SetupFailed(f"an isolated child failed (exit status {done.returncode}):\n{done.stderr.strip()[-3000:]}")
    report = json.loads(done.stdout)
    problems = []
    if lease is not None and (report["uid"], report["gid"], report["groups"]) != (lease.uid, lease.uid, []):
        problems.append(f"it runs as uid {report['uid']} gid {report['gid']} groups {report['groups']}, not "
                        f"{lease.uid} alone")
    if report["pids"] != sorted({1, report["me"]}):
        problems.append(f"it sees processes {report['pids']}")
    if report["network"] == "connected":
        problems.append("it reached 127.0.0.1")
    if report["var"] or {"home", "run", "sys"} & set(report["root"]):
        problems.append(f"it sees the host's var/ or / entries {report['root']}")
    if report["cwd"] != isolation.SCRATCH or set(report["tmp"]) - isolation.scratch_skeleton():
        problems.append(f"its scratch directory is {report['cwd']} holding {report['tmp']}")
    if problems:
        raise SetupFailed("the evaluation child is not isolated: " + "; ".join(problems))
    who = f"uid {report['uid']} (leased from {UIDS_VARIABLE})" if lease is not None else f"uid {report['uid']}"
    return (f"an isolated child runs as {who}, sees processes {report['pids']} only, no network "
            f"({report['network']}), / = {' '.join(report['root'])}")


def cgroup_bounds() -> str:
    """What bounds a child's resident memory and cores on this host (cgroups.py), said for the operator."""
    found = cgroups.hierarchy()
    if found is None:
        return ("note: no memory cgroup can be made here, so children are bounded by their address-space "
                "limit only (a cuda or neuron child's is huge), and a cuda or neuron child's cores not at all; "
                "run as root or delegate the memory and cpu controllers")
    cpu = cgroups.hierarchy("cpu")
    cores = (f"cuda and neuron children also get a cpu cgroup (v{cpu.version}) under {cpu.base}, bounding the "
             "cores they use at once" if cpu is not None else
             "note: no cpu cgroup can be made here, so a cuda or neuron child (up to 512 threads) may use every "
             "core; delegate the cpu controller")
    return f"each child gets a memory cgroup (v{found.version}) under {found.base}; {cores}"


def trivial_evaluation() -> None:
    from engine.evaluator import Limits, evaluate  # lazy: the NKI pipeline and simulator, for this check only

    result = evaluate(_PROBE_KERNEL, _PROBE_REFERENCE, backend="null",
                      limits=Limits(wall_seconds=60, cpu_seconds=60, infrastructure_retries=0))
    if not result.correct:
        raise SetupFailed(f"a trivial evaluation failed: {result.error_kind}: {result.error_message}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="report what would change; change nothing")
    check_only = parser.parse_args(argv).check
    say = "sandbox setup:"
    root = os.geteuid() == 0
    try:
        if root_allowed():
            print(f"{say} {ALLOW_ROOT_VARIABLE} is set: evaluation children run WITHOUT OS isolation, as this "
                  "process's user; nothing to do")
            return 0
        changes = ensure_tools(root, check_only)
        if root:
            conflicts = uid_range_conflicts(uid_range())
            if conflicts:
                raise SetupFailed(f"the sandbox uids {uid_range().start}-{uid_range().stop - 1} ({UIDS_VARIABLE}) "
                                  f"overlap {', '.join(conflicts[:5])}: choose a free range")
            changes += ensure_lock_directory(check_only)
            changes += open_directories(check_only)
            changes += close_var_dir(check_only)
        for change in changes:
            print(f"{say} {'would run' if check_only else 'ran'}: {change}" if not change.startswith("  ")
                  else f"{say} {change.strip()}")
        # The scan reads ~84,000 inodes (seconds on a loaded host): done when setting up or asked to check,
        # not on every `make test` of a prepared host.
        count, examples = unreadable_files([sys.base_prefix, sys.prefix]) if root and (changes or check_only) \
            else (0, [])
        if count:
            print(f"{say} warning: {count} files or directories of the Python installation cannot be read by "
                  f"other users (an import of them will fail in a child), e.g. {', '.join(examples)}")
        if check_only:
            if not changes:
                print(f"{say} nothing to change")
            return 1 if changes else 0
        checked = check_isolation(root)
        trivial_evaluation()
    except (SetupFailed, SandboxUnavailable) as exc:
        print(f"{say} FAILED: {exc}", file=sys.stderr)
        return 1
    print(f"{say} checked: {checked}; a trivial evaluation passes")
    print(f"{say} {cgroup_bounds()}")
    if root:
        try:
            pwd.getpwnam(_OLD_USER)
        except KeyError:
            pass
        else:
            print(f"{say} note: the user {_OLD_USER!r} is no longer used (children get uids of their own); "
                  f"`userdel {_OLD_USER}` removes it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
