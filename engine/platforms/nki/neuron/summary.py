"""The measured profile: `neuron-profile view --output-format summary-json` on the NEFF and trace (NTFF) that
`nki.baremetal` saved, parsed into the counter names our performance model uses.

How AccelOpt reads it (accelopt/kernel_wrapper.py): the summary is a JSON object with one entry per profiled
NEFF; it takes the first entry, whose `total_time` is the kernel's time in seconds and whose other fields
include NKIBench's saved counters (`hbm_read_bytes`, ..., `*_engine_active_time_percent`; NKIBench's
save_fields.json). Those are the names of `engine.platforms.nki.perf.profile.COUNTER_NAMES`, the simulator's names, so a
measured profile and a simulated one are read alike by the Planner, the kernel page and the leaderboard.
The `*_percent` fields are fractions of the kernel's time (0.41 is 41%), in neuron-profile as in the model.

Runs in the profile child: only our code and the profiler see the files.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from collections.abc import Mapping
from typing import Any

from engine.platforms.nki.perf.profile import COUNTER_NAMES

# Every profile of a measured result says where its numbers come from (the simulator's have no such key).
MEASURED_KEY = "measured_by"
MEASURED_VALUE = "neuron-profile summary-json"

# The files of one attempt, in its artefact directory: the first seed's compiled kernel and its trace.
PROFILED_NEFF = "kernel.neff"
PROFILED_NTFF = "kernel.ntff"
SUMMARY_FILE = "summary.json"  # the profiler's output, kept next to them

PROFILER_TIMEOUT_S = 600.0


class SummaryError(ValueError):
    """The profiler's output is not a summary we can read."""


def summary_command(profiler: str, neff: str, ntff: str) -> list[str]:
    """The command AccelOpt runs (kernel_wrapper.py), as an argument list: no shell, no redirection."""
    return [profiler, "view", "--output-format", "summary-json", "-n", neff, "-s", ntff]


def parse_summary(document: Any) -> dict[str, Any]:
    """The counters of a summary-json document under our names, marked measured. Missing or non-numeric
    counters are left out rather than guessed; a document with none of them is refused."""
    if not isinstance(document, Mapping) or not document:
        raise SummaryError("neuron-profile's summary is not a JSON object with an entry per profiled NEFF")
    entry = next(iter(document.values()))  # the first (and, for one kernel, only) NEFF, as AccelOpt reads it
    if not isinstance(entry, Mapping):
        raise SummaryError("neuron-profile's summary entry is not an object of fields")
    profile: dict[str, Any] = {}
    for name in COUNTER_NAMES:
        value = entry.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if math.isfinite(float(value)):
            profile[name] = float(value)
    if not profile:
        fields = sorted(entry)[:20]
        raise SummaryError(f"neuron-profile's summary has none of the counters we read (its fields: {fields})")
    profile[MEASURED_KEY] = MEASURED_VALUE
    return profile


def profiled_time_ms(document: Any) -> float | None:
    """`total_time` of the first entry in ms (the profiled run's own time; the reported latency is the
    timed median, not this)."""
    try:
        value = next(iter(document.values()))["total_time"]
    except (AttributeError, KeyError, StopIteration, TypeError):
        return None
    return float(value) * 1e3 if isinstance(value, int | float) and not isinstance(value, bool) else None


class ProfilerMissing(Exception):
    pass


class ProfilerFailed(Exception):
    pass


def run_profiler(profiler: str, artefacts: str, env: Mapping[str, str]) -> Any:
    """Run neuron-profile on the attempt's NEFF and trace and return the parsed JSON document."""
    neff, ntff = os.path.join(artefacts, PROFILED_NEFF), os.path.join(artefacts, PROFILED_NTFF)
    missing = [p for p in (neff, ntff) if not os.path.isfile(p)]
    if missing:
        raise ProfilerFailed(f"the kernel child left no {' and no '.join(os.path.basename(p) for p in missing)} "
                             "(nki.baremetal was asked to save them on the first seed)")
    try:
        done = subprocess.run(summary_command(profiler, neff, ntff), capture_output=True, timeout=PROFILER_TIMEOUT_S,
                              cwd=artefacts, env=dict(env), check=False)
    except (FileNotFoundError, PermissionError) as exc:
        raise ProfilerMissing(f"neuron-profile cannot be run at {profiler} ({exc.strerror}): install "
                              "aws-neuronx-tools, or set ACCELOPT_NEURON_PROFILE") from None
    except subprocess.TimeoutExpired:
        raise ProfilerFailed(f"neuron-profile did not finish within {PROFILER_TIMEOUT_S:g} s") from None
    if done.returncode != 0:
        tail = done.stderr.decode("utf-8", "replace").strip()[-2000:]
        raise ProfilerFailed(f"neuron-profile exited with status {done.returncode}: {tail}")
    try:
        document = json.loads(done.stdout)
    except ValueError as exc:
        raise ProfilerFailed(f"neuron-profile's summary-json is not JSON: {exc}") from None
    try:
        with open(os.path.join(artefacts, SUMMARY_FILE), "wb") as handle:  # kept with the NEFF for a person
            handle.write(done.stdout)
    except OSError:
        pass
    return document
