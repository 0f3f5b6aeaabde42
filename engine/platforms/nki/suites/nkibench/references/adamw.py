"""NKIBench reference: one AdamW step (t=1) on theta given gradient g and moments m, v."""

import numpy as np

M = 10944
N = 2048

LEARNING_RATE = 1e-3
BETA1 = 0.9
BETA2 = 0.999
EPSILON = 1e-8
WEIGHT_DECAY = 0.01
STEP = 1


def get_inputs():
    theta = np.random.normal(loc=0.0, scale=1.0, size=(M, N)).astype(np.float32)
    g = np.random.normal(loc=0.0, scale=1.0, size=(M, N)).astype(np.float32)
    m = np.random.normal(loc=0.0, scale=1.0, size=(M, N)).astype(np.float32)
    v = np.abs(np.random.normal(loc=0.0, scale=1.0, size=(M, N))).astype(np.float32)
    return [theta, g, m, v]


def forward(theta, g, m, v):
    decayed = theta * np.float32(1.0 - LEARNING_RATE * WEIGHT_DECAY)
    m_new = np.float32(BETA1) * m + np.float32(1.0 - BETA1) * g
    v_new = np.float32(BETA2) * v + np.float32(1.0 - BETA2) * (g * g)
    m_hat = m_new / np.float32(1.0 - BETA1**STEP)
    v_hat = v_new / np.float32(1.0 - BETA2**STEP)
    return decayed - np.float32(LEARNING_RATE) * m_hat / (np.sqrt(v_hat) + np.float32(EPSILON))


def transform_to_nki_inputs(inputs):
    # NKIBench hands the kernel every input as get_inputs() makes it, in the same order and shapes
    # (AccelOpt NKIBench/reference/adamw_M10944_N2048_numpy_1.py).
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
