"""NKIBench reference: grouped-query attention with a full (non-causal) softmax.

q: B x N x QH x D, k and v: B x N x KH x D; query head h uses key/value head h // (QH // KH).
The output is B x QH x N x D.
"""

import numpy as np

B = 1
N = 4096
QH = 16
KH = 8
D = 128


def get_inputs():
    q = np.random.normal(loc=0.0, scale=1.0, size=(B, N, QH, D)).astype(np.float32)
    k = np.random.normal(loc=0.0, scale=1.0, size=(B, N, KH, D)).astype(np.float32)
    v = np.random.normal(loc=0.0, scale=1.0, size=(B, N, KH, D)).astype(np.float32)
    return [q, k, v]


def forward(q, k, v):
    batch, seq, q_heads, dim = q.shape
    group = q_heads // k.shape[2]
    scale = np.float32(1.0 / np.sqrt(dim))
    out = np.empty((batch, q_heads, seq, dim), dtype=np.float32)
    # One head at a time keeps the N x N score matrix to a single head's worth of memory.
    for b in range(batch):
        for h in range(q_heads):
            scores = (q[b, :, h, :] @ k[b, :, h // group, :].T) * scale
            scores -= np.max(scores, axis=1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= np.sum(scores, axis=1, keepdims=True)
            out[b, h] = scores @ v[b, :, h // group, :]
    return out


def transform_to_nki_inputs(inputs):
    # The kernel sees NKIBench's layout (AccelOpt
    # NKIBench/reference/gqa_full_B1_N4096_QH16_KH8_D128_numpy_2.py), reshapes only: q as
    # (B * N // 128, 128, QH, D), k as (B, N // 512, 4, 128, KH, D) (positions in groups of four 128-row
    # tiles), v as (B, N // 128, 128, KH * D) (each position's heads side by side).
    _require_multiple("N", N, 512)
    q, k, v = inputs
    return [
        np.reshape(q, (B * N // 128, 128, QH, D)),
        np.reshape(k, (B, N // 512, 4, 128, KH, D)),
        np.reshape(v, (B, N // 128, 128, KH * D)),
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
