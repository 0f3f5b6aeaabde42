"""The `neuron` backend: a kernel compiled, run, timed and profiled on a real NeuronCore, in the sandbox.

Where each step runs, and the Neuron SDK call it makes (names and semantics from the Neuron SDK docs,
`nki.baremetal`, `nki.benchmark`, "Profiling NKI kernels with Neuron Profile", and from how AccelOpt's
accelopt/kernel_wrapper.py uses them):

* parent, `placement`: leases one NeuronCore for the attempt (cores.py), makes the attempt's artefact
  directory, and declares what the kernel and profile children share beyond the sandbox: the Neuron device
  nodes, the driver's sysfs entries, aws-neuronx-tools (read-only), the artefact directory, and
  `NEURON_RT_VISIBLE_CORES=<core>` with `NEURON_RT_EXEC_TIMEOUT`.
* kernel child, `run`, once per seed: `nki.baremetal(kernel, save_neff_name=..., additional_compile_opt=...)`
  compiles the kernel into a NEFF and runs it on the core; the first seed also passes `save_trace_name`, so
  the run leaves its execution trace (NTFF) for the profiler. The outputs go back to the parent, which checks
  them exactly as for the simulator (same seeds, tolerance and anti-gaming checks).
* kernel child, `measure`, once every seed was correct: `nki.benchmark(warmup=5, iters=20, ...)` runs the NEFF
  through neuron-bench; each call is one measurement, the 50th percentile of its per-iteration device
  latencies (`benchmark_result.nc_latency.get_latency_percentile(50)`, in microseconds). Five measurements,
  the 1% spread rule, up to three attempts, the median (`backends.summarise_timings`; docs/evaluation.md).
* profile child, `measured_profile`: `neuron-profile view --output-format summary-json -n kernel.neff -s
  kernel.ntff`, parsed into the simulator's counter names and marked measured (summary.py).

Failures map onto the taxonomy as failures.py says; a NeuronCore that failed with an infrastructure error is
set aside and the attempt is retried on another one.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from engine.evaluator.backend_base import (
    MAX_TIMING_ATTEMPTS,
    MEASUREMENT_REPEATS,
    TIMED_ITERATIONS,
    WARMUP_ITERATIONS,
    BackendImplementation,
    BackendRun,
    BackendUnavailable,
    Placement,
    ProfileReport,
    UnstableTiming,
    as_output_tuple,
    summarise_timings,
)
from engine.evaluator.result import ErrorKind
from engine.evaluator.sandbox.guards import GuardAllowances, GuardViolation
from engine.evaluator.sandbox.isolation import SandboxExtras, isolation_required
from engine.evaluator.sandbox.process import Limits
from engine.platforms.nki.neuron import cores, summary
from engine.platforms.nki.neuron.failures import DEVICE_LOST_MARK, NeuronFailure, classified
from engine.platforms.nki.neuron.host import NeuronHost, artefact_root
from engine.platforms.registry import Backend

# Where the attempt's artefact directory appears inside the children (under the opt-out: its host path).
ARTEFACT_MOUNT = "/accelopt-neuron"
# What the parent tells its children through their environment (nothing else of ours reaches them).
ENV_ARTEFACTS = "ACCELOPT_NEURON_ARTEFACTS"
ENV_PROFILER = "ACCELOPT_NEURON_PROFILE"
ENV_COMPILE_OPTIONS = "ACCELOPT_NEURON_COMPILE_OPTIONS"
ENV_DEV_DIR = "ACCELOPT_NEURON_DEV_DIR"
ENV_READ_ROOTS = "ACCELOPT_NEURON_READ_ROOTS"
ENV_EXECUTABLES = "ACCELOPT_NEURON_EXECUTABLES"

# The SDK compiles in the child and starts the compiler and neuron-bench: room for that, in the child only.
SDK_PROCESSES = 512  # RLIMIT_NPROC counts threads too, per uid (each child has a uid of its own)
SDK_OPEN_FILES = 4096
SDK_FILE_BYTES = 16 * 1024**3  # a NEFF and an NTFF of a full-size kernel
SDK_SCRATCH_BYTES = 2 * 1024**3  # the compiler's work directory in the child's private /tmp
# Cores the kernel and profile children may use at once (their cpu cgroup): a NeuronCore's share of the host's
# vCPUs on both trn1 sizes (trn1.2xlarge: 8 vCPUs, 2 NeuronCores; trn1.32xlarge: 128 vCPUs, 32 NeuronCores;
# the EC2 instance-type table), so a child with 512 threads cannot slow the evaluations timed beside it.
SDK_CPUS = 4.0
# The runtime ends an execution that runs longer than this (NRT_TIMEOUT, the runtime's default is 30 s),
# well before the child's own wall clock would.
EXEC_TIMEOUT_S = 30


def _runtime_path(host: NeuronHost) -> str:
    # The SDK finds neuronx-cc (the venv's bin, or <SDK path>/bin after `pip install --target`) and
    # neuron-bench/neuron-profile (the tools' bin) on PATH.
    sdk_bins = [os.path.join(p, "bin") for p in host.sdk_path if os.path.isdir(os.path.join(p, "bin"))]
    return os.pathsep.join([os.path.join(host.tools_dir, "bin"), *sdk_bins, os.path.dirname(sys.executable),
                            "/usr/local/bin", "/usr/bin", "/bin"])


class NeuronBackend(BackendImplementation):
    """Real Trainium through the Neuron SDK. Exercised here only against test doubles (tests/neuron): the
    calls, the parsing, the pinning and the failure mapping are proven, the hardware's behaviour is not."""

    name = Backend.NEURON.value
    measures = True

    def __init__(self) -> None:
        self._runs = 0
        self._last_inputs: list[Any] | None = None
        self._nodes: tuple[str, ...] = ()  # the device nodes the kernel child saw before the guard went up

    # -- parent -------------------------------------------------------------------------------------

    def version(self) -> str:
        try:
            found = NeuronHost.from_environment().sdk_version()
        except ValueError:
            found = None
        return f"neuronx-cc {found}" if found else "neuronx-cc unavailable"

    @contextlib.contextmanager
    def placement(self, limits: Limits, platform: str) -> Iterator[Placement]:
        try:
            host = NeuronHost.from_environment(platform)
        except ValueError as exc:
            raise BackendUnavailable(f"neuron backend misconfigured: {exc}") from None
        problems = host.problems()
        if problems:
            raise BackendUnavailable("neuron backend not available on this host: " + "; ".join(problems))
        try:
            lease = cores.lease_core(host.cores(), host.lock_dir, wait_s=limits.wall_seconds)
        except cores.NoCoreFree as exc:
            raise BackendUnavailable(f"no NeuronCore for this evaluation: {exc}") from None
        directory = tempfile.mkdtemp(prefix=f"core{lease.core}-{secrets.token_hex(4)}-", dir=artefact_root(host))
        # The children run as uids of their own (when we are root): they must be able to write here.
        os.chmod(directory, 0o777)
        try:
            yield self._placement(host, limits, lease.core, directory)
        except BaseException as exc:
            if getattr(exc, "retry", False) and DEVICE_LOST_MARK in _message(exc):
                lease.quarantine()  # the core went bad: the retry leases another one
            raise
        finally:
            lease.release()
            if not host.keep_artefacts:
                shutil.rmtree(directory, ignore_errors=True)

    def _placement(self, host: NeuronHost, limits: Limits, core: int, directory: str) -> Placement:
        isolated = isolation_required()
        inside = ARTEFACT_MOUNT if isolated else directory
        tools = (host.tools_dir,) if os.path.isdir(host.tools_dir) else ()
        profiler_dir = os.path.dirname(host.profiler)
        read_only = [*tools, *([profiler_dir] if not any(_under(profiler_dir, t) for t in tools) else []),
                     *host.sysfs_paths()]
        devices = tuple((node, f"/dev/{os.path.basename(node)}") for node in host.device_nodes())
        artefacts = ((directory, inside),)
        profile_env = {"PATH": _runtime_path(host), ENV_ARTEFACTS: inside, ENV_PROFILER: host.profiler}
        kernel_env = {
            **profile_env,
            ENV_DEV_DIR: "/dev" if isolated else host.dev_dir,
            ENV_READ_ROOTS: os.pathsep.join([*read_only, *host.sdk_path]),
            ENV_EXECUTABLES: ",".join(host.executables),
            "NEURON_RT_VISIBLE_CORES": str(core),  # the runtime reserves this core, and only it, for the child
            "NEURON_RT_EXEC_TIMEOUT": str(EXEC_TIMEOUT_S),
            # AccelOpt's setting (kernel_wrapper.py): no automatic casting to lower precision by the compiler,
            # so an fp32 problem stays fp32 on the device (we have no trace to check it there).
            "NEURON_CC_FLAGS": "--auto-cast=none",
            ENV_COMPILE_OPTIONS: host.compile_options,
        }
        sdk_limits = dict(processes=SDK_PROCESSES, cpus=SDK_CPUS, open_files=SDK_OPEN_FILES, file_bytes=SDK_FILE_BYTES,
                          scratch_bytes=max(limits.scratch_bytes, SDK_SCRATCH_BYTES),
                          memory_bytes=max(limits.memory_bytes, host.memory_bytes))
        # The kernel child gets the devices, the SDK and the tools; the profile child (neuron-profile reads the
        # files offline) only the tools and the files.
        tools_only = tuple((path, path) for path in read_only if path not in host.sysfs_paths())
        return Placement(
            kernel_limits=replace(limits, **sdk_limits),
            profile_limits=replace(limits, **sdk_limits),
            kernel_extras=SandboxExtras(devices=devices, read_only=tuple((path, path) for path in read_only),
                                        read_write=artefacts, environment=tuple(kernel_env.items()),
                                        python_path=host.sdk_path),
            profile_extras=SandboxExtras(read_only=tools_only, read_write=artefacts,
                                         environment=tuple(profile_env.items())),
            artefacts=inside,
        )

    # -- kernel child -------------------------------------------------------------------------------

    def guard_allowances(self) -> GuardAllowances | None:
        artefacts = os.environ.get(ENV_ARTEFACTS, "")
        roots = [r for r in os.environ.get(ENV_READ_ROOTS, "").split(os.pathsep) if r]
        executables = tuple(e for e in os.environ.get(ENV_EXECUTABLES, "").split(",") if e)
        return GuardAllowances(
            read_roots=(*roots, artefacts, "/proc"),
            write_roots=(artefacts, tempfile.gettempdir()),
            executables=executables,
            native_code=True,
        )

    def prepare(self) -> None:
        if importlib.util.find_spec("neuronxcc") is None:
            raise BackendUnavailable("neuron backend not available on this host (neuronxcc is not importable)")
        if not os.environ.get("NEURON_RT_VISIBLE_CORES"):
            raise BackendUnavailable("the kernel child was not pinned to a NeuronCore (NEURON_RT_VISIBLE_CORES)")
        self._nodes = self._device_nodes()
        if not self._nodes:
            raise BackendUnavailable(f"{DEVICE_LOST_MARK}: no Neuron device is visible in the evaluation sandbox "
                                     "(/dev/neuron*)", retry=True)

    def _device_nodes(self) -> tuple[str, ...]:
        directory = os.environ.get(ENV_DEV_DIR, "/dev")
        try:
            names = sorted(n for n in os.listdir(directory) if n.startswith("neuron") and n[6:].isdigit())
        except OSError:
            return ()
        return tuple(os.path.join(directory, n) for n in names)

    def _artefact(self, name: str) -> str:
        return os.path.join(os.environ.get(ENV_ARTEFACTS) or tempfile.gettempdir(), name)

    def run(self, kernel: Callable[..., Any], inputs: Sequence[np.ndarray], platform: str) -> BackendRun:
        import neuronxcc.nki as nki  # the Neuron SDK

        self._runs += 1
        first = self._runs == 1
        # Every run saves its NEFF, so a failure tells whether compiling finished; the first run's NEFF and
        # trace are the ones profiled.
        neff = self._artefact(summary.PROFILED_NEFF if first else f"seed{self._runs}.neff")
        options: dict[str, Any] = {"save_neff_name": neff,
                                   "additional_compile_opt": os.environ.get(ENV_COMPILE_OPTIONS, "")}
        if first:
            options["save_trace_name"] = self._artefact(summary.PROFILED_NTFF)
        self._last_inputs = list(inputs)
        with self._classified(neff):
            outputs = nki.baremetal(kernel, **options)(*inputs)
        return BackendRun(outputs=as_output_tuple(outputs))

    def measure(self, kernel: Callable[..., Any], platform: str) -> float:
        import neuronxcc.nki as nki  # lazy: the Neuron SDK, on a Neuron host only

        if self._last_inputs is None:
            raise BackendUnavailable("measure before any run: the kernel has no inputs to be timed on")
        timed = nki.benchmark(warmup=WARMUP_ITERATIONS, iters=TIMED_ITERATIONS,
                              additional_compile_opt=os.environ.get(ENV_COMPILE_OPTIONS, ""))(kernel)
        last: UnstableTiming | None = None
        for _ in range(MAX_TIMING_ATTEMPTS):
            samples = []
            for _ in range(MEASUREMENT_REPEATS):
                with self._classified(None):
                    timed(*self._last_inputs)
                    # nc_latency: neuron-bench's device latencies, in microseconds.
                    samples.append(float(timed.benchmark_result.nc_latency.get_latency_percentile(50)) / 1000.0)
            try:
                return summarise_timings(samples)
            except UnstableTiming as exc:
                last = exc
        raise UnstableTiming(f"{last} on each of {MAX_TIMING_ATTEMPTS} attempts")

    @contextlib.contextmanager
    def _classified(self, neff: str | None) -> Iterator[None]:
        """Turn an SDK exception into the NeuronFailure of its kind (failures.py); ours pass through."""
        try:
            yield
        except GuardViolation as exc:
            if _kernel_on_stack(exc):
                raise  # the kernel tried it: rejected
            # The SDK itself was refused: our configuration (GuardAllowances), never the kernel's fault.
            raise BackendUnavailable(f"the evaluation sandbox refused the Neuron SDK itself ({exc}); if the SDK "
                                     "needs it, allow it (ACCELOPT_NEURON_EXECUTABLES, docs/operations.md)") from None
        except (MemoryError, NeuronFailure, BackendUnavailable):
            raise  # the generic rules: resource_limit
        except ImportError as exc:
            if "not allowed" in str(exc):
                raise
            raise classified(exc, neff_written=neff is not None and os.path.exists(neff),
                             device_nodes=self._nodes) from None
        except Exception as exc:  # noqa: BLE001 - every SDK failure is classified
            written = neff is None or os.path.exists(neff)  # timing runs an already compiled kernel
            raise classified(exc, neff_written=written, device_nodes=self._nodes) from None

    def classify(self, exc: BaseException) -> ErrorKind | None:
        return exc.kind if isinstance(exc, NeuronFailure) else None

    # -- profile child ------------------------------------------------------------------------------

    def measured_profile(self, artefacts: str, platform: str) -> ProfileReport:
        profiler = os.environ.get(ENV_PROFILER, "neuron-profile")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": tempfile.gettempdir()}
        try:
            document = summary.run_profiler(profiler, artefacts, env)
            profile = summary.parse_summary(document)
        except summary.ProfilerMissing as exc:
            raise BackendUnavailable(str(exc)) from None
        except (summary.ProfilerFailed, summary.SummaryError) as exc:
            raise BackendUnavailable(str(exc), retry=True) from None
        return ProfileReport(latency_ms=None, profile=profile, timeline=None, perf_model_version="")


# The file name the kernel child compiles the kernel's source under (child.KERNEL_FILENAME; not imported from
# there, which imports the backends; tests/neuron checks the two agree).
KERNEL_FILENAME = "<kernel>"


def _kernel_on_stack(exc: BaseException) -> bool:
    """Whether the kernel's own code was running when `exc` was raised (its frames are in the traceback)."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == KERNEL_FILENAME:
            return True
        tb = tb.tb_next
    return False


def _message(exc: BaseException) -> str:
    """The message of a pipeline stop (its result's) or of any exception."""
    result = getattr(exc, "result", None)
    return str(getattr(result, "error_message", "") or exc)


def _under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")
