"""The cuda backend's kernel child without a GPU: every Triton kernel a solution launches is compiled for an
NVIDIA target (Triton's own pipeline: TTIR, TTGIR, LLVM IR, PTX, then its bundled ptxas to a cubin, written to
its cache) and not run, and Triton's launcher helper is built (gcc, against libcuda) as far as the host allows.

Why: the sandboxed cuda evaluation needs Triton's compile and build steps to pass the evaluation sandbox (the
audit guard's allowances, the private /tmp, the scrubbed environment); on an H200 they did not
(docs/benchmarks.md). All of that runs on a CPU, so `compile_triton` (engine/platforms/triton/pipeline.py) checks it on any
machine with the same child, guard, allowances, limits and environment as a cuda evaluation; only the GPU
itself (device nodes, libcuda's real driver, launches, timing) is left out.

`CompileOnlyDriver` stands in for Triton's CudaDriver in that child: it names the target (sm_90 by default)
and records each launch instead of making it. `build_launcher` is Triton's own CudaUtils() (the same gcc
command and cache as on a GPU); with no libcuda.so.1 it fails where a GPU host would not, and says so.
`write_libcuda_stub` writes a stand-in libcuda.so.1 (every call answers "no CUDA-capable device") so that
the build, link and dlopen of the helper can run here too.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

# Hopper's shared memory per block (opt-in): 227 KiB (CUDA C Programming Guide, compute capability 9.0).
_MAX_SHARED_BYTES = {90: 232448, 89: 101376, 86: 101376, 80: 166912}


class _Utils:
    """The parts of Triton's CudaUtils a compile needs, answered without a device."""

    def __init__(self, arch: int, compiled: list[dict[str, Any]]) -> None:
        self.arch = arch
        self.compiled = compiled
        self.first_cubin: tuple[str, bytes, int] | None = None  # (name, cubin, shared bytes)

    def get_device_properties(self, device: int) -> dict[str, int]:
        return {"max_shared_mem": _MAX_SHARED_BYTES.get(self.arch, 101376), "max_num_regs": 65536,
                "multiprocessor_count": 132, "warpSize": 32, "sm_clock_rate": 0, "mem_clock_rate": 0,
                "mem_bus_width": 0}

    def load_binary(self, name: str, kernel: bytes, shared: int, device: int) -> tuple[int, int, int, int, int]:
        """Called once per compiled kernel, after the launcher (which recorded it): its cubin's size."""
        self.compiled[-1]["cubin_bytes"] = len(kernel)
        if self.first_cubin is None:
            self.first_cubin = (name, bytes(kernel), shared)
        return 0, 0, 0, 0, 1024  # module, function, registers, spills, max threads per block

    def unload_module(self, module: int) -> None:
        pass


class CompileOnlyDriver:
    """Triton's active driver in a compile-only child: target `sm_<arch>`, launches recorded, not made."""

    def __init__(self, arch: int = 90) -> None:
        from triton.backends.compiler import GPUTarget

        self.target = GPUTarget("cuda", arch, 32)
        self.compiled: list[dict[str, Any]] = []  # one per kernel compiled: name, warps, stages, shared, cubin size
        self.utils = _Utils(arch, self.compiled)
        self.launches = 0
        driver = self

        class Launcher:
            def __init__(self, src: Any, metadata: Any) -> None:
                driver.compiled.append({"name": metadata.name, "num_warps": metadata.num_warps,
                                        "num_stages": metadata.num_stages, "shared_bytes": metadata.shared})

            def __call__(self, *args: Any) -> None:
                driver.launches += 1

        self.launcher_cls = Launcher

    @staticmethod
    def is_active() -> bool:
        return True

    def get_current_target(self) -> Any:
        return self.target

    def get_current_device(self) -> int:
        return 0

    def set_current_device(self, device: int) -> None:
        pass

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_device_capability(self, device: int = 0) -> tuple[int, int]:
        return divmod(self.target.arch, 10)

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("cpu")

    def map_python_to_cpp_type(self, ty: str) -> str:
        from triton.backends.nvidia.driver import ty_to_cpp

        return ty_to_cpp(ty)


def install(arch: int) -> CompileOnlyDriver:
    """Make a CompileOnlyDriver Triton's active driver in this process (before the audit guard)."""
    import triton.backends.nvidia.driver  # noqa: F401 - Triton's own module, imported before the guard
    from triton.runtime import driver as active

    driver = CompileOnlyDriver(arch)
    active.set_active(driver)  # type: ignore[arg-type]
    return driver


def build_launcher(kernel: tuple[str, bytes, int] | None = None) -> str:
    """Triton's launcher helper, built as a GPU host builds it at its first launch (gcc, the cache, dlopen
    with libcuda), then, when built and given a kernel (name, cubin, shared bytes), that cubin loaded through
    libcuda. Returns what happened."""
    from triton.backends.nvidia.driver import CudaUtils

    try:
        utils = CudaUtils()
    except AssertionError as exc:  # Triton's own check: no libcuda.so.1 on this host
        return "not built: " + str(exc).splitlines()[0]
    if kernel is None:
        return "built and loaded"
    try:
        utils.load_binary(*kernel, 0)
    except RuntimeError as exc:  # libcuda answered: as far as a host without a GPU goes
        return f"built and loaded; loading the cubin: {exc}"
    return "built and loaded; cubin loaded"


# Every libcuda entry point Triton's launcher helper (triton/backends/nvidia/driver.c) links against.
_LIBCUDA_CALLS = (
    "cuInit", "cuDeviceGet", "cuDeviceGetCount", "cuDeviceGetAttribute", "cuDevicePrimaryCtxRetain",
    "cuCtxGetCurrent", "cuCtxSetCurrent", "cuCtxGetDevice", "cuCtxGetLimit", "cuCtxSetLimit", "cuDriverGetVersion",
    "cuFuncGetAttribute", "cuFuncSetAttribute", "cuFuncSetCacheConfig", "cuLaunchKernelEx", "cuModuleGetFunction",
    "cuModuleLoadData", "cuModuleUnload", "cuOccupancyMaxActiveClusters", "cuPointerGetAttribute",
    "cuPointerGetAttributes", "cuStreamIsCapturing", "cuTensorMapEncodeIm2col", "cuTensorMapEncodeTiled",
)
_NO_DEVICE = 100  # CUDA_ERROR_NO_DEVICE


def write_libcuda_stub(directory: Path) -> Path:
    """Compile a stand-in libcuda.so.1 into `directory` (needs gcc): every call returns "no CUDA-capable
    device". Only for checking, on a machine without a GPU, that Triton's helper builds and loads."""
    directory.mkdir(parents=True, exist_ok=True)
    source = directory / "libcuda_stub.c"
    calls = "".join(f"int {name}(void) {{ return {_NO_DEVICE}; }}\n" for name in _LIBCUDA_CALLS)
    source.write_text(calls + 'int cuGetErrorString(int e, const char **s) { *s = "no CUDA-capable device is '
                      'detected (stub libcuda)"; return 0; }\n')
    library = directory / "libcuda.so.1"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(library), str(source)], check=True, capture_output=True)
    os.chmod(library, 0o755)
    return library
