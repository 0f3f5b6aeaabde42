"""Kernels (and one reference) that are wrong in each way a user can get wrong, for silu:mini (M=256 N=512).

The kernel receives x in NKIBench's silu layout, (128, M // 128, N) = (128, 2, 512).

Each case: the source, the error kind the user must see, and words the message must contain. The API
and CLI tests run every case through the real sandboxed pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass

HEADER = """import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
"""


def _kernel(body: str) -> str:
    return HEADER + "\n\n@nki.jit\ndef kernel(x):\n" + body


@dataclass(frozen=True)
class BadInput:
    name: str
    kernel: str
    kind: str
    words: tuple[str, ...]
    line: int | None = None
    reference: str | None = None  # replaces the problem's reference when set
    # Sandbox limits for this case (Django settings): short enough that the test does not wait long.
    limits: tuple[tuple[str, int], ...] = ()


GOOD_TILE_LOOP = """    parts, per_part, cols = x.shape
    out = nl.ndarray((parts, per_part, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(per_part):
        tile = nl.load(x[0:parts, i, 0:cols])
        nl.store(out[0:parts, i, 0:cols], value=nl.silu(tile))
    return out
"""

BROKEN_REFERENCE = """import numpy as np

M = 256
N = 512


def get_inputs():
    return [np.random.normal(size=(M, N)).astype(np.float32)]


def forward(x):
    return x * undefined_scale


def transform_to_nki_inputs(inputs):
    return [np.reshape(inputs[0], (128, M // 128, N))]


def transform_nki_outputs(outputs, reference):
    return [outputs]
"""

BAD_INPUTS = (
    BadInput("syntax_error", _kernel("    return x +\n"), "rejected", ("syntax error",), line=8),
    BadInput("no_kernel_function", HEADER + "\nSCALE = 2.0\n", "rejected", ("no kernel function",)),
    BadInput(
        "forbidden_import", "import os\n" + _kernel(GOOD_TILE_LOOP), "rejected", ("import of 'os'",), line=1
    ),
    BadInput(
        "kernel_raises",
        _kernel("""    rows, cols = x.shape[0] * x.shape[1], x.shape[2]
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.load(x.reshape((rows, cols))[0:256, 0:cols])
    nl.store(out[0:256, 0:cols], value=tile)
    return out
"""),
        "compile_error", ("256", "128"), line=10,
    ),
    BadInput(
        "kernel_fails_at_run_time",
        _kernel("""    rows, cols = x.shape[0] * x.shape[1], x.shape[2]
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(rows // 128):
        tile = nl.ndarray((128, cols), dtype=x.dtype, buffer=nl.sbuf)
        nl.store(out[i * 128:(i + 1) * 128, 0:cols], value=nl.silu(tile))
    return out
"""),
        "runtime_error", ("uninitialised", "line 12"), line=12,
    ),
    BadInput(
        "wrong_output_shape",
        _kernel("""    parts, per_part, cols = x.shape
    out = nl.ndarray((parts, per_part, cols // 2), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(per_part):
        tile = nl.load(x[0:parts, i, 0:cols // 2])
        nl.store(out[0:parts, i, 0:cols // 2], value=nl.silu(tile))
    return out
"""),
        "incorrect", ("shape",),
    ),
    BadInput(
        "wrong_values", _kernel(GOOD_TILE_LOOP.replace("nl.silu(tile)", "nl.sigmoid(tile)")), "incorrect",
        ("relative L2 error",),
    ),
    BadInput(
        "too_slow",
        _kernel("""    total = 0
    while True:
        total += 1
    return x
"""),
        "timeout", ("limit",), limits=(("ACCELOPT_EVALUATION_TIMEOUT_S", 5),),
    ),
    BadInput(
        "too_much_memory",
        _kernel("""    hoard = []
    while True:
        hoard.append(np.ones((64, 1024, 1024), dtype=np.float32))
    return x
"""),
        "resource_limit", ("memory",), limits=(("ACCELOPT_EVALUATION_MEMORY_MB", 1024),),
    ),
    BadInput(
        "broken_reference", _kernel(GOOD_TILE_LOOP), "infrastructure_error", ("reference", "undefined_scale"),
        reference=BROKEN_REFERENCE,
    ),
)
