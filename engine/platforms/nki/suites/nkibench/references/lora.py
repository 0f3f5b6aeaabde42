"""NKIBench reference: LoRA projection x @ W + (x @ A) @ B with a rank-R adapter."""

import numpy as np

M = 4096
N = 12288
K = 5120
R = 128


def get_inputs():
    x = np.random.normal(loc=0.0, scale=1.0, size=(M, K)).astype(np.float32)
    w = np.random.normal(loc=0.0, scale=1.0, size=(K, N)).astype(np.float32)
    a = np.random.normal(loc=0.0, scale=1.0, size=(K, R)).astype(np.float32)
    b = np.random.normal(loc=0.0, scale=1.0, size=(R, N)).astype(np.float32)
    return [x, w, a, b]


def forward(x, w, a, b):
    return x @ w + (x @ a) @ b


def transform_to_nki_inputs(inputs):
    # The kernel sees NKIBench's layout (AccelOpt NKIBench/reference/lora_M4096_N12288_K5120_R128_numpy_1.py),
    # reshapes only: x as (M // 512, 4, 128, K // 128, 128) (rows in groups of four 128-row tiles), w as
    # (K // 128, 128, N), a as (K // 128, 128, R), b as it is (R, N).
    _require_multiple("M", M, 512)
    _require_multiple("K", K, 128)
    x, w, a, b = inputs
    return [
        np.reshape(x, (M // 512, 4, 128, K // 128, 128)),
        np.reshape(w, (K // 128, 128, N)),
        np.reshape(a, (K // 128, 128, R)),
        np.reshape(b, (R, N)),
    ]


def _require_multiple(name, value, factor):
    # NKIBench's layout splits this dimension into tiles; a case whose shape does not divide cannot use it.
    if value % factor:
        raise ValueError(f"{name} = {value} must be a multiple of {factor} for NKIBench's input layout")


def transform_nki_outputs(outputs, reference):
    # Compare each kernel output in the shape of the matching reference output (NKIBench reshapes, so a
    # kernel may return the same elements in a tiled shape).
    outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    references = reference if isinstance(reference, (tuple, list)) else (reference,)
    if len(outputs) != len(references):
        raise ValueError(f"kernel returned {len(outputs)} output(s); the reference has {len(references)}")
    for index, (out, ref) in enumerate(zip(outputs, references, strict=True)):
        if np.size(out) != ref.size:
            raise ValueError(f"output {index} has shape {np.shape(out)}; expected {ref.shape}")
    return [np.reshape(out, ref.shape) for out, ref in zip(outputs, references, strict=True)]
