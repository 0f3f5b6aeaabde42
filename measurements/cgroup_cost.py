"""What a child's memory cgroup costs the parent: making it (limit, owner) and removing it, per child.

    .venv/bin/python measurements/cgroup_cost.py [--count 200]

The child's side is one `sh` exec (writing itself into the group), measured with --exec: an evaluation child
started through the shell against one started directly, both running `true`.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.evaluator.sandbox import cgroups  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=200)
    args = parser.parse_args()
    found = cgroups.hierarchy()
    if found is None:
        sys.exit("no memory cgroup can be made on this host")
    make = []
    for _ in range(args.count):
        t = time.perf_counter()
        cgroups.ChildCgroup.create(256 * 1024**2).remove()
        make.append(time.perf_counter() - t)
    plain, joined = [], []
    for _ in range(args.count // 4):
        group = cgroups.ChildCgroup.create(256 * 1024**2)
        for argv, times in ((["/bin/true"], plain), (group.joining(["/bin/true"]), joined)):
            t = time.perf_counter()
            subprocess.run(argv, check=True)
            times.append(time.perf_counter() - t)
        group.remove()
    print(f"cgroup v{found.version} under {found.base}")
    print(f"make + remove a group: median {statistics.median(make) * 1e3:.3f} ms over {len(make)}")
    print(f"start `true`: directly {statistics.median(plain) * 1e3:.2f} ms, joining a group first "
          f"{statistics.median(joined) * 1e3:.2f} ms (medians of {len(plain)})")


if __name__ == "__main__":
    main()
