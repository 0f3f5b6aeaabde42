"""Peak memory of the parent when the kernel pads its reply with an array nobody asked for (issue 35, mechanism 6).

    .venv/bin/python measurements/reply_memory.py                 # 1024 MiB of padding
    .venv/bin/python measurements/reply_memory.py --pad-mib 0     # the same kernel, honest reply

Evaluates a 128x512 add on the simulator backend, every Python guard off, with a kernel that wraps its
child's `run` to add `program.padding` (zeros: the child's own memory barely grows) to its reply. Before
issue 35 the reply budget admitted unknown `program.*` arrays and the parent read them whole before the
verifier ignored them; now the listing is checked before any array is read. Prints the parent's peak RSS
(ru_maxrss) before and after, the outcome and the wall time. Run it in a fresh process.
"""

from __future__ import annotations

import argparse
import resource
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.evaluator import Limits, evaluate  # noqa: E402

REFERENCE = textwrap.dedent('''
    import numpy as np

    def get_inputs():
        return [np.random.normal(size=(128, 512)).astype(np.float32) for _ in range(2)]

    def forward(a, b):
        return a + b

    def transform_to_nki_inputs(inputs):
        return inputs

    def transform_nki_outputs(k_res, ref):
        return [np.reshape(k_res, ref.shape)]
''')

KERNEL = '''
import sys

import numpy as np
import neuronxcc.nki as nki
import neuronxcc.nki.language as nl

PAD = {pad} * 1024**2
child = sys.modules["__main__"]  # the child runs as `python -m engine.evaluator.child`
honest_run = child.KernelRole.run


def padded_run(self, header, arrays):
    reply, out = honest_run(self, header, arrays)
    if PAD:
        out["program.padding"] = np.zeros(PAD, dtype=np.uint8)
    return reply, out


child.KernelRole.run = padded_run


@nki.jit
def kernel(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.add(nl.load(a), nl.load(b)))
    return out
'''


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pad-mib", type=int, default=1024)
    args = parser.parse_args()
    before = peak_mib()
    started = time.monotonic()
    result = evaluate(KERNEL.format(pad=args.pad_mib), REFERENCE, backend="simulator", seeds=(1, 2, 3),
                      limits=Limits(memory_bytes=4 * 1024**3), _guards={"static": False, "imports": False,
                                                                         "audit": False})
    wall = time.monotonic() - started
    outcome = "correct" if result.correct else f"{result.error_kind.value}: {result.error_message[:140]}"
    print(f"padding {args.pad_mib} MiB: parent peak RSS {before:.0f} MiB before, {peak_mib():.0f} MiB after; "
          f"{outcome}; {wall:.2f} s")


if __name__ == "__main__":
    main()
