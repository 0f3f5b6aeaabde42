"""CPU the offline Planner spends listing rewrite sites: every rewrite of the NKI catalog asked about each of the
14 NKIBench baselines, `--repeats` times over (a server's runs ask about the same start kernels again and again).
This work runs in the server process and holds its GIL while it runs.

    .venv/bin/python measurements/offline_plan_cost.py [--case full] [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.agents.rewrites import catalog_for  # noqa: E402
from engine.platforms.nki.suites import load_suite  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", default="full", choices=("full", "mini"))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    sources = [spec.baseline_for(args.case) for spec in load_suite("nkibench").problems]
    catalog = catalog_for("nki")
    sites, started = 0, time.process_time()
    for _ in range(args.repeats):
        for source in sources:
            sites += sum(len(rewrite.sites(source)) for rewrite in catalog)
    print(f"{len(sources)} {args.case} baselines x {len(catalog)} rewrites x {args.repeats}: "
          f"{time.process_time() - started:.2f} s of CPU, {sites} sites")


if __name__ == "__main__":
    main()
