"""Triton kernels for the failure-kind tests, as sources: rmsnorm_h128 variants (7 rows in the small workload)."""

HEADER = '''
import torch
import triton
import triton.language as tl
'''

# For kernels that try what the sandbox must refuse: `attempt(name, action)` records "allowed" or "refused" per
# action, and the kernel raises the record as JSON (the test reads it from the failure's message).
ATTEMPTS = HEADER + '''
import json, os, subprocess


def _attempts():
    outcome = {}

    def attempt(name, action):
        try:
            action()
            outcome[name] = "allowed"
        except PermissionError:
            outcome[name] = "refused"

    return outcome, attempt
'''

# y = rmsnorm(x) * w, one row per program; SCALE and the store's mask vary per variant.
_ROW_KERNEL = HEADER + '''

@triton.jit
def _row(x_ptr, w_ptr, y_ptr, HIDDEN: tl.constexpr, BLOCK: tl.constexpr, SCALE: tl.constexpr):
    row = tl.program_id(0)
    col = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * HIDDEN + col{load_mask}).to(tl.float32)
    w = tl.load(w_ptr + col{w_mask}).to(tl.float32)
    y = x / tl.sqrt(tl.sum(x * x, axis=0) / HIDDEN + 1e-6) * w * SCALE
    tl.store(y_ptr + row * HIDDEN + col, y.to(tl.bfloat16){store_mask})
'''


def row_kernel(*, scale: float = 1.0, block: int = 128, load_masked: bool = True, store_masked: bool = True,
               destination: bool = False, extra: str = "") -> str:
    mask = ", mask=col < HIDDEN, other=0.0" if load_masked else ""
    source = _ROW_KERNEL.format(load_mask=mask, w_mask=mask, store_mask=", mask=col < HIDDEN" if store_masked else "")
    if destination:
        return source + f'''

def run(hidden_states, weight, output):
    {extra}
    _row[(hidden_states.shape[0],)](hidden_states, weight, output, HIDDEN=128, BLOCK={block}, SCALE={scale})
'''
    return source + f'''

def run(hidden_states, weight):
    {extra}
    out = torch.empty_like(hidden_states)
    _row[(hidden_states.shape[0],)](hidden_states, weight, out, HIDDEN=128, BLOCK={block}, SCALE={scale})
    return out
'''


CORRECT = row_kernel()
WRONG = row_kernel(scale=1.5)
# 256 columns of a 128-column row with no mask on the loads: the weight load and the last row's load read
# past the end of their tensors (the store stays masked).
OUT_OF_BOUNDS_READ = row_kernel(block=256, load_masked=False)
# The same with the store unmasked too, destination-passing (the output buffer is ours, so guarded): the
# last row writes past the end of the output.
OUT_OF_BOUNDS_WRITE = row_kernel(block=256, load_masked=False, store_masked=False, destination=True)
NEVER_WRITES = HEADER + '''

def run(hidden_states, weight, output):
    pass  # destination-passing, and the output is left as it came (NaN)
'''
MODIFIES_INPUT = row_kernel(extra="hidden_states.mul_(1.0)\n    hidden_states[0, 0] = 0.0")
RAISES = HEADER + '''

def run(hidden_states, weight):
    raise ValueError("shape not supported")
'''

# Remembers its first answer and returns it for every later call: right on the first seed only.
CACHES_ANSWERS = row_kernel(extra="if 'answer' in _CACHE:\n        return _CACHE['answer']").replace(
    "    return out\n", "    _CACHE['answer'] = out\n    return out\n") + "\n_CACHE = {}\n"
