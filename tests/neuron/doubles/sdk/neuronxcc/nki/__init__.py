"""Test double of `neuronxcc.nki` for the neuron backend's contract tests (tests/neuron only).

What it stands in for, with the signatures the Neuron SDK documents:

* `language`, `isa`, `typing`, `compiler`, `jit`: the CPU simulator's NKI namespaces, so kernels trace and
  compute their outputs as they would on the device.
* `baremetal(kernel, save_neff_name=, save_trace_name=, additional_compile_opt=)(*inputs)`: runs the kernel
  on the simulator (an NKI rule it breaks fails here, before any NEFF exists, as a compile error does),
  writes a stand-in NEFF and, when asked, a stand-in trace (NTFF), and returns the numpy outputs.
* `benchmark(warmup=, iters=, additional_compile_opt=)(kernel)`: a callable that starts `neuron-bench` (the
  double in tools/bin) as the real one does and keeps its per-iteration latencies in
  `benchmark_result.nc_latency.get_latency_percentile(p)`, in microseconds.

Every call is appended to `calls.jsonl` in the attempt's artefact directory, with the NeuronCore the process
was pinned to (`NEURON_RT_VISIBLE_CORES`) and the device nodes it could see: the tests read it back.

Latencies and the profile come from `recorded/trn1_nkibench_summary.json` (the real trn1 measurements of
measurements/data/trn1_nkibench_baselines.csv) when the inputs have the shapes of an NKIBench case (full or
mini),
otherwise from the kernel's module-level `NEURON_DOUBLE` dict, which tests use to steer the device:
`latency_us` (a number or a list, one per benchmark call), `hold_s` (sleep in baremetal), `start` (a
program baremetal starts, as the compiler would), and
`fail`: {"at": "run" | "measure", "status": "NRT_...", "hang": bool, "on_cores": ["0", ...]}.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from engine.platforms.nki.simulator import simulate as _simulate
from engine.platforms.nki.simulator.semantics import namespaces as _namespaces

_modules = _namespaces.build()
language = _modules["neuronxcc.nki.language"]
isa = _modules["neuronxcc.nki.isa"]
typing = _modules["neuronxcc.nki.typing"]
compiler = _modules["neuronxcc.nki.compiler"]
jit = _modules["neuronxcc.nki"].jit
trace = _modules["neuronxcc.nki"].trace  # AccelOpt's NKIBench kernels import it (a decorator, like jit)
simulate_kernel = _modules["neuronxcc.nki"].simulate_kernel
for _name in ("language", "isa", "typing", "compiler"):
    sys.modules[f"neuronxcc.nki.{_name}"] = _modules[f"neuronxcc.nki.{_name}"]

RECORDED = Path(__file__).resolve().parents[2] / "recorded" / "trn1_nkibench_summary.json"
DEFAULT_LATENCY_US = 100.0
_benchmark_calls = 0


def _artefacts() -> str:
    return os.environ.get("ACCELOPT_NEURON_ARTEFACTS") or os.environ.get("TMPDIR", "/tmp")


def _devices() -> list[str]:
    # Stat, not a listing: the kernel child's guard refuses to list /dev, as it should.
    return [f"/dev/neuron{n}" for n in range(16) if os.path.exists(f"/dev/neuron{n}")]


def _record(call: str, **details: Any) -> None:
    entry = {"call": call, "pid": os.getpid(), "time": time.time(),
             "NEURON_RT_VISIBLE_CORES": os.environ.get("NEURON_RT_VISIBLE_CORES"),
             "NEURON_RT_EXEC_TIMEOUT": os.environ.get("NEURON_RT_EXEC_TIMEOUT"),
             "NEURON_CC_FLAGS": os.environ.get("NEURON_CC_FLAGS"), "devices": _devices(), **details}
    with open(os.path.join(_artefacts(), "calls.jsonl"), "a") as handle:
        handle.write(json.dumps(entry) + "\n")


def _function(kernel: Any) -> Any:
    return getattr(kernel, "func", kernel)  # an @nki.jit kernel wraps its function


def _steering(kernel: Any) -> dict[str, Any]:
    return dict(getattr(_function(kernel), "__globals__", {}).get("NEURON_DOUBLE", {}))


def _shapes(inputs: tuple[Any, ...]) -> list[Any]:
    return [list(np.shape(a)) if isinstance(a, np.ndarray) else "scalar" for a in inputs]


def _names(code: Any) -> set[str]:
    """Every name a code object and the code nested in it refer to."""
    found = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            found |= _names(const)
    return found


def _recorded_case(kernel: Any, inputs: tuple[Any, ...]) -> tuple[str | None, dict[str, Any] | None]:
    """The NKIBench case whose mini or full inputs have these shapes, and its recorded summary. bmm and
    bmm_softmax take the same inputs: a kernel that computes an exp is taken for bmm_softmax."""
    recorded = json.loads(RECORDED.read_text())
    shapes = _shapes(inputs)
    found = [(key, case) for key, case in recorded["cases"].items()
             if shapes in (case["mini_input_shapes"], case["full_input_shapes"])]
    if len(found) > 1:
        softmax = "exp" in _names(_function(kernel).__code__)
        found = [(key, case) for key, case in found if ("softmax" in case["problem"]) == softmax]
    if len(found) != 1:
        return None, None
    key, case = found[0]
    return key, case["summary"]


def _fail(steering: dict[str, Any], at: str) -> None:
    failure = steering.get("fail") or {}
    if failure.get("at") != at:
        return
    cores = failure.get("on_cores")
    if cores is not None and os.environ.get("NEURON_RT_VISIBLE_CORES") not in cores:
        return
    if failure.get("hang"):
        time.sleep(3600)  # a device that never answers: the runtime's timeout or the sandbox's wall clock ends it
    status = failure.get("status", "NRT_FAILURE")
    raise RuntimeError(f"nrt_execute failed on NeuronCore {os.environ.get('NEURON_RT_VISIBLE_CORES')}: {status}")


def baremetal(kernel: Any = None, **options: Any) -> Any:
    if kernel is None:
        return lambda k: baremetal(k, **options)

    def run(*inputs: Any) -> Any:
        steering = _steering(kernel)
        _record("baremetal", options=options, input_shapes=_shapes(inputs), kernel=_function(kernel).__name__)
        time.sleep(float(steering.get("hold_s", 0)))
        if steering.get("start"):  # the SDK starting a program the sandbox does not allow it
            subprocess.run([steering["start"]], capture_output=True, check=False)
        simulation = _simulate(kernel, list(inputs))  # compiling: an NKI rule broken raises here, no NEFF yet
        case, recorded = _recorded_case(kernel, inputs)
        outputs = simulation.outputs
        latency_us = _latencies(steering, recorded, 0)
        stand_in = {"double": "neff", "case": case, "kernel": _function(kernel).__name__,
                    "input_shapes": _shapes(inputs), "latency_us": latency_us, "summary": recorded,
                    "input_bytes": int(sum(a.nbytes for a in inputs if isinstance(a, np.ndarray))),
                    "output_bytes": int(sum(np.asarray(o).nbytes for o in outputs))}
        with open(options["save_neff_name"], "w") as handle:
            json.dump(stand_in, handle)
        _fail(steering, "run")
        if options.get("save_trace_name"):
            with open(options["save_trace_name"], "w") as handle:
                json.dump({"double": "ntff", "neff": os.path.basename(options["save_neff_name"])}, handle)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    return run


def _latencies(steering: dict[str, Any], recorded: dict[str, Any] | None, call: int) -> float:
    configured = steering.get("latency_us")
    if isinstance(configured, list):
        return float(configured[call % len(configured)])
    if configured is not None:
        return float(configured)
    if recorded is not None:
        return float(recorded["total_time"]) * 1e6
    return DEFAULT_LATENCY_US


class _Latency:
    def __init__(self, latencies_us: list[float]) -> None:
        self.latencies_us = latencies_us

    def get_latency_percentile(self, percentile: int) -> float:
        return float(np.percentile(self.latencies_us, percentile))


class _Result:
    def __init__(self, latencies_us: list[float]) -> None:
        self.nc_latency = _Latency(latencies_us)


class _Benchmark:
    def __init__(self, kernel: Any, options: dict[str, Any]) -> None:
        self.kernel = kernel
        self.options = options
        self.benchmark_result: _Result | None = None

    def __call__(self, *inputs: Any) -> None:
        global _benchmark_calls
        steering = _steering(self.kernel)
        _record("benchmark", options=self.options, input_shapes=_shapes(inputs))
        _fail(steering, "measure")
        _, recorded = _recorded_case(self.kernel, inputs)
        latency = _latencies(steering, recorded, _benchmark_calls)
        _benchmark_calls += 1
        # As nki.benchmark does, the timing itself is neuron-bench's (here: the double in tools/bin).
        done = subprocess.run(["neuron-bench", "--warmup", str(self.options.get("warmup", 0)), "--iters",
                               str(self.options.get("iters", 1)), "--latency-us", repr(latency)],
                              capture_output=True, check=True)
        self.benchmark_result = _Result(json.loads(done.stdout)["latencies_us"])


def benchmark(kernel: Any = None, **options: Any) -> Any:
    if kernel is None:
        return lambda k: _Benchmark(k, options)
    return _Benchmark(kernel, options)
