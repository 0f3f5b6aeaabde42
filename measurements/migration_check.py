"""The Migrate action on NKIBench's 14 baselines: does each migrate, stay correct, and cost the same? (issue 34)

For each problem's mini case: the legacy baseline and its NKI 0.6 migration (engine.platforms.nki.migration)
are evaluated by the simulator pipeline on the same fixed seeds, and the script prints both verdicts, the
simulated latencies and their ratio, and whether the relative L2 errors are identical (the same output values).

    python measurements/migration_check.py [--case mini|full] [--only SLUG] [--seeds 1 2 3]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.evaluator.reference_pipeline import evaluate  # noqa: E402
from engine.platforms.nki.migration import MigrationError, migrate_source  # noqa: E402
from engine.platforms.nki.suites.loader import load_suite  # noqa: E402

SEEDS = (1, 2, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="mini")
    parser.add_argument("--only", default="")
    parser.add_argument("--seeds", type=int, nargs=3, default=SEEDS)
    args = parser.parse_args()
    migrated = 0
    for spec in load_suite().problems:
        if args.only and spec.slug != args.only:
            continue
        legacy = spec.baseline_for(args.case)
        try:
            migration = migrate_source(legacy)
        except MigrationError as error:
            print(f"{spec.slug:24} refused: {error}")
            continue
        reference = spec.reference_source(args.case)
        old = evaluate(legacy, reference, seeds=tuple(args.seeds))
        new = evaluate(migration.source, reference, seeds=tuple(args.seeds))
        same = old.relative_l2_errors == new.relative_l2_errors
        ratio = new.latency_ms / old.latency_ms if old.latency_ms and new.latency_ms else float("nan")
        migrated += bool(new.correct and same)
        print(f"{spec.slug:24} {len(migration.changes):2} changes  legacy {old.latency_ms or 0:.5f} ms "
              f"({'correct' if old.correct else old.error_kind})  NKI 0.6 {new.latency_ms or 0:.5f} ms "
              f"({'correct' if new.correct else new.error_kind})  x{ratio:.3f}  same errors: {same}")
    print(f"{migrated} migrated, correct, with the legacy kernel's errors")


if __name__ == "__main__":
    main()
