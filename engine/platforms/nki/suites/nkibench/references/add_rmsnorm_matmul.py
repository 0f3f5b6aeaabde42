"""NKIBench reference: residual add x + z, RMSNorm with gain g and epsilon eps, then @ W."""

import numpy as np

M = 4096
N = 2048
K = 1024


def get_inputs():
    x = np.random.normal(loc=0.0, scale=1.0, size=(M, K)).astype(np.float32)
    w = np.random.normal(loc=0.0, scale=1.0, size=(K, N)).astype(np.float32)
    eps = 1e-5
    z = np.random.normal(loc=0.0, scale=1.0, size=(M, K)).astype(np.float32)
    g = np.random.normal(loc=0.0, scale=1.0, size=(K,)).astype(np.float32)
    return [x, w, eps, z, g]


def forward(x, w, eps, z, g):
    y = x + z
    mean_square = np.mean(np.square(y), axis=1, keepdims=True)
    normalized = y / np.sqrt(mean_square + np.float32(eps)) * g
    return normalized @ w


def transform_to_nki_inputs(inputs):
    # NKIBench hands the kernel every input as get_inputs() makes it, in the same order and shapes
    # (AccelOpt NKIBench/reference/add_rmsnorm_matmul_M4096_N2048_K1024_numpy_1.py).
    return list(inputs)


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
