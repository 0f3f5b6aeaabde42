"""The Trainium host as this process sees it: where the Neuron devices, tools and SDK are, which NeuronCores
evaluations may use, and the settings that say so (all `ACCELOPT_NEURON_*`, read from the environment;
docs/operations.md, "Running on a Trainium instance").

Read in the parent, before an evaluation's children start. Pure Python: no Django, no Neuron SDK import.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

# NeuronCores per Neuron device, by platform: trn1 has 2 NeuronCore-v2 per Trainium device ([ARCH-V2] in
# engine/platforms/nki/hardware.py); trn2 has 8 NeuronCore-v3, each addressed on its own with the logical NeuronCore
# size 1 that the compile options below ask for ([ARCH-V3]).
CORES_PER_DEVICE = {"trn1": 2, "trn2": 8}

# AccelOpt compiles every kernel with these options (accelopt/kernel_wrapper.py); the calibration CSVs were
# measured with them, so the same options keep our measurements comparable with theirs.
DEFAULT_COMPILE_OPTIONS = "--disable-dge --logical-nc-config=1"
# The programs the SDK may start from the kernel child: the compiler, the benchmark runner behind
# nki.benchmark, the profiler. Anything else is refused by the Python guard (GuardAllowances).
DEFAULT_EXECUTABLES = ("neuronx-cc", "neuron-bench", "neuron-profile")
SDK_DISTRIBUTION = "neuronx-cc"  # the pip distribution of the `neuronxcc` package

_DEVICE_NODE = re.compile(r"^neuron(\d+)$")


class HostConfigError(ValueError):
    """An ACCELOPT_NEURON_* variable holds something we cannot read; the message names it."""


def _text(env: Mapping[str, str], name: str, default: str = "") -> str:
    return env.get(name, "").strip() or default


def _flag(env: Mapping[str, str], name: str) -> bool:
    value = env.get(name, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    raise HostConfigError(f"{name} must be 1/0, true/false, yes/no or on/off; got {env[name]!r}")


def _positive(env: Mapping[str, str], name: str, default: int) -> int:
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise HostConfigError(f"{name} must be a whole number; got {text!r}") from None
    if value < 1:
        raise HostConfigError(f"{name} must be at least 1; got {value}")
    return value


def parse_core_list(text: str, name: str = "ACCELOPT_NEURON_CORES") -> tuple[int, ...]:
    """"0-3,8,10-11" -> (0, 1, 2, 3, 8, 10, 11): NEURON_RT_VISIBLE_CORES' own range notation, listed."""
    cores: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not match:
            raise HostConfigError(f"{name} must list NeuronCores like 0-31 or 0,2,4-7; got {text!r}")
        first, last = int(match.group(1)), int(match.group(2) or match.group(1))
        if last < first:
            raise HostConfigError(f"{name}: the range {part!r} runs backwards")
        cores.extend(range(first, last + 1))
    return tuple(sorted(set(cores)))


@dataclass(frozen=True)
class NeuronHost:
    platform: str
    dev_dir: str  # where the device nodes neuron0, neuron1, ... are (/dev)
    tools_dir: str  # aws-neuronx-tools: bin/neuron-profile, bin/neuron-bench, lib/
    profiler: str  # the neuron-profile executable
    sdk_path: tuple[str, ...]  # extra directories holding the neuronxcc package (none: it is in the venv)
    artefact_root: str  # per-attempt directories for the NEFF, the trace and the profile summary
    keep_artefacts: bool
    lock_dir: str  # one lock file per NeuronCore (the core pool) and quarantine marks
    compile_options: str
    memory_bytes: int  # address-space limit of the kernel and profile children (the runtime maps the device)
    cores_per_device: int
    executables: tuple[str, ...]
    configured_cores: tuple[int, ...] = field(default=())  # ACCELOPT_NEURON_CORES; empty: every core found

    @classmethod
    def from_environment(cls, platform: str = "trn1", env: Mapping[str, str] | None = None) -> NeuronHost:
        env = os.environ if env is None else env
        tools = _text(env, "ACCELOPT_NEURON_TOOLS_DIR", "/opt/aws/neuron")
        profiler = _text(env, "ACCELOPT_NEURON_PROFILE")
        if not profiler:
            bundled = os.path.join(tools, "bin", "neuron-profile")
            profiler = bundled if os.path.exists(bundled) else (shutil.which("neuron-profile") or bundled)
        root = os.geteuid() == 0
        lock_default = "/run/accelopt-neuron" if root else os.path.join(tempfile.gettempdir(),
                                                                        f"accelopt-neuron-locks-{os.getuid()}")
        cores_text = _text(env, "ACCELOPT_NEURON_CORES")
        return cls(
            platform=platform,
            dev_dir=_text(env, "ACCELOPT_NEURON_DEV_DIR", "/dev"),
            tools_dir=tools,
            profiler=os.path.abspath(profiler),
            sdk_path=tuple(os.path.abspath(p) for p in _text(env, "ACCELOPT_NEURON_SDK_PATH").split(os.pathsep) if p),
            artefact_root=_text(env, "ACCELOPT_NEURON_ARTEFACT_DIR",
                                os.path.join(tempfile.gettempdir(), "accelopt-neuron")),
            keep_artefacts=_flag(env, "ACCELOPT_NEURON_KEEP_ARTEFACTS"),
            lock_dir=_text(env, "ACCELOPT_NEURON_LOCK_DIR", lock_default),
            compile_options=_text(env, "ACCELOPT_NEURON_COMPILE_OPTIONS", DEFAULT_COMPILE_OPTIONS),
            memory_bytes=_positive(env, "ACCELOPT_NEURON_MEMORY_MB", 64 * 1024) * 1024**2,
            cores_per_device=_positive(env, "ACCELOPT_NEURON_CORES_PER_DEVICE", CORES_PER_DEVICE.get(platform, 2)),
            executables=tuple(e.strip() for e in _text(env, "ACCELOPT_NEURON_EXECUTABLES",
                                                       ",".join(DEFAULT_EXECUTABLES)).split(",") if e.strip()),
            configured_cores=parse_core_list(cores_text) if cores_text else (),
        )

    # -- what is there ------------------------------------------------------------------------------

    def devices(self) -> tuple[int, ...]:
        """The Neuron devices present: the numbers N of the nodes dev_dir/neuronN."""
        try:
            names = os.listdir(self.dev_dir)
        except OSError:
            return ()
        return tuple(sorted(int(m.group(1)) for n in names if (m := _DEVICE_NODE.match(n))))

    def device_nodes(self) -> tuple[str, ...]:
        return tuple(os.path.join(self.dev_dir, f"neuron{n}") for n in self.devices())

    def cores(self) -> tuple[int, ...]:
        """The NeuronCores evaluations may use: ACCELOPT_NEURON_CORES, or every core of every device found."""
        if self.configured_cores:
            return self.configured_cores
        return tuple(core for device in self.devices()
                     for core in range(device * self.cores_per_device, (device + 1) * self.cores_per_device))

    def sdk_version(self) -> str | None:
        """The installed neuronx-cc version, looked up on sys.path and the SDK path (None: not installed)."""
        for dist in importlib.metadata.distributions(path=[*self.sdk_path, *sys.path]):
            if (dist.metadata["Name"] or "").lower().replace("_", "-") == SDK_DISTRIBUTION:
                return dist.version
        return None

    def sysfs_paths(self) -> tuple[str, ...]:
        """The driver's sysfs entries for the devices, when present (the runtime may read them)."""
        candidates = ("/sys/class/neuron_device", "/sys/devices/virtual/neuron_device")
        return tuple(p for p in candidates if os.path.isdir(p))

    def problems(self) -> list[str]:
        """Why evaluations cannot run on the neuron backend here (empty: they can)."""
        found = []
        if not self.devices():
            found.append(f"no Neuron device: no {os.path.join(self.dev_dir, 'neuron*')} node (a trn1 or trn2 "
                         "instance with the aws-neuronx-dkms driver has /dev/neuron0 and up)")
        elif not self.cores():
            found.append("ACCELOPT_NEURON_CORES lists no NeuronCore")
        if self.sdk_version() is None:
            found.append("the Neuron compiler is not installed: `pip install neuronx-cc` (the neuronxcc package) "
                         "into this virtualenv, from https://pip.repos.neuron.amazonaws.com")
        if not os.access(self.profiler, os.X_OK):
            found.append(f"neuron-profile not found at {self.profiler}: install aws-neuronx-tools (it provides "
                         "/opt/aws/neuron/bin/neuron-profile), or set ACCELOPT_NEURON_PROFILE")
        return found


def neuron_unavailable(platform: str) -> str | None:
    """Why the neuron backend cannot evaluate `platform` kernels on this host (None: it can): the backend's
    host check, which its registry definition names and the pages ask before offering it."""
    try:
        problems = NeuronHost.from_environment(platform).problems()
    except ValueError as error:
        problems = [f"misconfigured: {error}"]
    return f"the neuron backend cannot run here: {'; '.join(problems)}" if problems else None


def artefact_root(host: NeuronHost) -> Path:
    """The directory holding per-attempt artefact directories; traversable by the children's uids, not listable."""
    root = Path(host.artefact_root)
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o711)
    return root
