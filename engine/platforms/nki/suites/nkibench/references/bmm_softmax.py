"""NKIBench reference: row softmax of a batched matmul, softmax(lhs[b] @ rhs[b], axis=-1)."""

import numpy as np

B = 16
K = 64
M = 4096
N = 4096


def get_inputs():
    lhs = np.random.normal(loc=0.0, scale=1.0, size=(B, M, K)).astype(np.float32)
    rhs = np.random.normal(loc=0.0, scale=1.0, size=(B, K, N)).astype(np.float32)
    return [lhs, rhs]


def forward(lhs, rhs):
    scores = np.matmul(lhs, rhs)
    scores -= np.max(scores, axis=2, keepdims=True)
    np.exp(scores, out=scores)
    scores /= np.sum(scores, axis=2, keepdims=True)
    return scores


def transform_to_nki_inputs(inputs):
    # NKIBench hands the kernel every input as get_inputs() makes it, in the same order and shapes
    # (AccelOpt NKIBench/reference/bmm_softmax_B16_K64_M4096_N4096_numpy_1.py).
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
