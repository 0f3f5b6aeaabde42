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
    # The baseline kernel takes every input in its natural layout.
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
