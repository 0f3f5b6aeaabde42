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
    # NKIBench hands the kernel every input as get_inputs() makes it, in the same order and shapes
    # (AccelOpt NKIBench/reference/rope_single_freq_apply_B1_H64_N4096_D128_numpy_1.py).
    return list(inputs)


def transform_nki_outputs(outputs, reference):
    # NKIBench compares rope's output as the kernel returns it, without a reshape (AccelOpt
    # NKIBench/reference/rope_single_freq_apply_B1_H64_N4096_D128_numpy_1.py), so the kernel must return the
    # reference's (D, B*H*N) shape; the evaluation names a wrong one.
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
