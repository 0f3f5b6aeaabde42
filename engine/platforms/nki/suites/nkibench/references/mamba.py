"""NKIBench reference: Mamba selective scan over M time steps, C channels, S states."""

import numpy as np

M = 7168
C = 256
S = 16

# Inputs scaled by 64 make exp(delta * A) and the recurrence overflow, so the evaluation's "scaled"
# distribution would compare overflow patterns, not the scan; check plain and zeroed inputs only.
EVAL_DISTRIBUTIONS = ("reference", "zeros")


def get_inputs():
    delta = np.random.normal(loc=0.0, scale=0.05, size=(C, M)).astype(np.float32)
    u = np.random.normal(loc=0.0, scale=0.05, size=(C, M)).astype(np.float32)
    a = np.random.normal(loc=0.0, scale=0.05, size=(C, S)).astype(np.float32)
    b = np.random.normal(loc=0.0, scale=0.05, size=(S, M)).astype(np.float32)
    c = np.random.normal(loc=0.0, scale=0.05, size=(S, M)).astype(np.float32)
    return [delta, u, a, b, c]


def forward(delta, u, a, b, c):
    channels, steps = delta.shape
    # decay[c, s, t] = exp(delta[c, t] * a[c, s]); drive[c, s, t] = delta[c, t] * b[s, t] * u[c, t]
    decay = np.exp(delta[:, None, :] * a[:, :, None])
    drive = (delta * u)[:, None, :] * b[None, :, :]
    state = np.zeros((channels, a.shape[1]), dtype=np.float32)
    out = np.empty((channels, steps), dtype=np.float32)
    for t in range(steps):
        state = decay[:, :, t] * state + drive[:, :, t]
        out[:, t] = np.sum(state * c[None, :, t], axis=1)
    return out


def transform_to_nki_inputs(inputs):
    # NKIBench hands the kernel every input as get_inputs() makes it, in the same order and shapes
    # (AccelOpt NKIBench/reference/mamba_M7168_C256_S16_numpy_1.py).
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
