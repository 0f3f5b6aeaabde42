"""What the evaluation cascade (issue 38) saved in a campaign: per run, the run page's counts and the seconds
its evaluations took on the mini and on the full shapes.

    DATABASE_URL=sqlite:///DIR/db.sqlite3 .venv/bin/python measurements/cascade_savings.py [--campaign ID]

Run it on the database of a finished `manage.py campaign ... --wait` (the last campaign by default). The
counts are `optimizer.services.evaluation_savings` (the run's checkpoint totals); the seconds are the
`wall_time_s` of the Evaluation rows of the kernels each run wrote, by the case of their problem (a row
answered from an identical source's result has none). Prints one JSON line per run and a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "accelopt_site.settings")

import django  # noqa: E402

django.setup()

from django.db.models import Count, Sum  # noqa: E402

from benchmark.models import Evaluation  # noqa: E402
from campaigns.models import Campaign  # noqa: E402
from optimizer import services  # noqa: E402


def run_row(run) -> dict:
    saved = services.evaluation_savings(run)
    assert saved is not None, f"run {run.pk} has no counts (not started, or older than issue 38)"
    seconds = {case: (total or 0.0, count) for case, total, count in
               Evaluation.objects.filter(kernel__run_id=run.pk).values_list("kernel__problem__case")
               .annotate(total=Sum("wall_time_s"), count=Count("id")).values_list("kernel__problem__case", "total", "count")}
    full_s, full_n = seconds.get("full", (0.0, 0))
    mini_s, mini_n = seconds.get("mini", (0.0, 0))
    return {"run": run.pk, "problem": run.problem.address, "status": run.status, "mini_first": saved.mini_first,
            "results": saved.evaluations, "full_size": saved.full_size, "mini": saved.mini,
            "repeated": saved.repeated, "cached": saved.cached, "normalized": saved.normalized,
            "mini_stopped": saved.mini_stopped, "mini_passed": saved.mini_passed,
            "full_rows": full_n, "full_s": round(full_s, 1), "mini_rows": mini_n, "mini_s": round(mini_s, 1),
            "best_speedup": run.best_speedup}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaign", type=int, help="campaign id (default: the last one)")
    args = parser.parse_args()
    campaign = (Campaign.objects.get(pk=args.campaign) if args.campaign else Campaign.objects.order_by("-pk").first())
    rows = [run_row(entry.run) for entry in campaign.entries.select_related("run__problem").order_by("pk") if entry.run]
    for row in rows:
        print(json.dumps(row))
    print("\n| problem | full-size evaluations (s) | mini evaluations (s) | repeated | cached | identical | "
          "stopped at mini | passed mini | speedup |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['problem']} | {r['full_size']} ({r['full_s']}) | {r['mini']} ({r['mini_s']}) | {r['repeated']} | "
              f"{r['cached']} | {r['normalized']} | {r['mini_stopped']} | {r['mini_passed']} | "
              f"{r['best_speedup'] or 0:.3f} |")
    total = {k: sum(r[k] for r in rows) for k in ("full_size", "mini", "repeated", "cached", "normalized",
                                                  "mini_stopped", "mini_passed", "full_s", "mini_s")}
    print(f"\ntotal: {json.dumps(total)}")


if __name__ == "__main__":
    main()
