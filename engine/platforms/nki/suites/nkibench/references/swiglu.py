"""NKIBench reference: SwiGLU MLP, (silu(x @ W_gate) * (x @ W_up)) @ W_down."""

import numpy as np

M = 4096
N = 3072
K = 1024


def get_inputs():
    x = np.random.normal(loc=0.0, scale=1.0, size=(M, K)).astype(np.float32)
    w_up = np.random.normal(loc=0.0, scale=1.0, size=(K, N)).astype(np.float32)
    w_down = np.random.normal(loc=0.0, scale=1.0, size=(N, K)).astype(np.float32)
    w_gate = np.random.normal(loc=0.0, scale=1.0, size=(K, N)).astype(np.float32)
    return [x, w_up, w_down, w_gate]


def forward(x, w_up, w_down, w_gate):
    gate = x @ w_gate
    # exp(-gate) overflows to inf for very negative gates; silu's limit there is 0, which is what we get.
    with np.errstate(over="ignore"):
        hidden = gate / (np.float32(1.0) + np.exp(-gate)) * (x @ w_up)
    return hidden @ w_down


def transform_to_nki_inputs(inputs):
    # The kernel sees NKIBench's layout (AccelOpt NKIBench/reference/swiglu_M4096_N3072_K1024_numpy_2.py),
    # reshapes only: x as (M // 512, 4, 128, K // 128, 128) (rows in groups of four 128-row tiles), w_up and
    # w_gate as (K // 128, 128, N), w_down as (N // 128, 128, K).
    _require_multiple("M", M, 512)
    _require_multiple("K", K, 128)
    _require_multiple("N", N, 128)
    x, w_up, w_down, w_gate = inputs
    return [
        np.reshape(x, (M // 512, 4, 128, K // 128, 128)),
        np.reshape(w_up, (K // 128, 128, N)),
        np.reshape(w_down, (N // 128, 128, K)),
        np.reshape(w_gate, (K // 128, 128, N)),
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
