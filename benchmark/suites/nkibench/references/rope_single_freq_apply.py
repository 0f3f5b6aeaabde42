"""NKIBench reference: rotary position embedding, feature-major layout (D rows, B*H*N columns)."""

import numpy as np

B = 1
H = 64
N = 4096
D = 128


def get_inputs():
    x = np.random.normal(loc=0.0, scale=1.0, size=(D, B * H * N)).astype(np.float32)
    freqs_cos = np.random.normal(loc=0.0, scale=1.0, size=(D // 2, B * H * N)).astype(np.float32)
    freqs_sin = np.random.normal(loc=0.0, scale=1.0, size=(D // 2, B * H * N)).astype(np.float32)
    return [x, freqs_cos, freqs_sin]


def forward(x, freqs_cos, freqs_sin):
    half = x.shape[0] // 2
    first, second = x[:half], x[half:]
    rotated_first = first * freqs_cos - second * freqs_sin
    rotated_second = first * freqs_sin + second * freqs_cos
    return np.concatenate([rotated_first, rotated_second], axis=0)


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
