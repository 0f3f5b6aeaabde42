"""NKIBench reference: RMSNorm without gain or epsilon on the rows of x (M x K), then x @ W (K x N)."""

import numpy as np

M = 4096
N = 2048
K = 1024


def get_inputs():
    x = np.random.normal(loc=0.0, scale=1.0, size=(M, K)).astype(np.float32)
    w = np.random.normal(loc=0.0, scale=1.0, size=(K, N)).astype(np.float32)
    return [x, w]


def forward(x, w):
    rms = np.sqrt(np.sum(np.square(x) / np.float32(x.shape[1]), axis=1, keepdims=True))
    return (x / rms) @ w


def transform_to_nki_inputs(inputs):
    # The kernel sees NKIBench's layout (AccelOpt
    # NKIBench/reference/rmsnorm_matmul_M4096_N2048_K1024_numpy_1.py), reshapes only: x as
    # (M // 128, 128, K), w as (K // 128, 128, N).
    _require_multiple("M", M, 128)
    _require_multiple("K", K, 128)
    x, w = inputs
    return [np.reshape(x, (M // 128, 128, K)), np.reshape(w, (K // 128, 128, N))]


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
