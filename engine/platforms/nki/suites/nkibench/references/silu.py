"""NKIBench reference: SiLU, y = x * sigmoid(x), over an M x N float32 matrix."""

import numpy as np

M = 4096
N = 7168


def get_inputs():
    x = np.random.normal(loc=0.0, scale=1.0, size=(M, N)).astype(np.float32)
    return [x]


def forward(x):
    return x / (np.float32(1.0) + np.exp(-x))


def transform_to_nki_inputs(inputs):
    # The kernel sees NKIBench's layout (AccelOpt NKIBench/reference/silu_M4096_N7168_numpy_0.py): x as
    # (128, M // 128, N), a reshape, so row m is x[m // (M // 128), m % (M // 128)].
    _require_multiple("M", M, 128)
    (x,) = inputs
    return [np.reshape(x, (128, M // 128, N))]


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
