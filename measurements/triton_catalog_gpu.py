"""The Triton rewrite catalog on a real GPU (issue 24): every rewrite at every site of the catalog tests' small
kernels (tests/triton_agents/kernels.py), compiled by Triton for the GPU (the interpreter compiles nothing),
checked against the torch reference at GPU-sized shapes, and timed next to the kernel it rewrote.

Needs only Python 3, PyTorch and Triton; the repository root goes on sys.path (the catalog is pure Python).
Our own kernels on our own machine: they run in this process.

    PYTHONUNBUFFERED=1 python3 measurements/triton_catalog_gpu.py --out catalog_gpu.json

Timing: triton.testing.do_bench (median of its repetitions; it clears the L2 between them), the original and
the rewrite measured one after the other, `--rounds` times alternating (default 3), medians of the rounds.
A ratio is original / rewrite (> 1: the rewrite is faster). Shapes are not multiples of the blocks.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.testing  # noqa: E402

from engine.platforms.triton.rewrites import TRITON_CATALOG  # noqa: E402
from tests.triton_agents.kernels import CASES  # noqa: E402

# GPU-sized inputs per case (fp32, as the tests' references): sizes off the blocks on purpose.
SHAPES = {
    "add": lambda g: (torch.randn(2**26 + 3, generator=g), torch.randn(2**26 + 3, generator=g)),
    "row_sumsq": lambda g: (torch.randn(16384, 4099, generator=g),),
    "scale_autotuned": lambda g: (torch.randn(2**26 + 5, generator=g),),
    "rmsnorm_masked": lambda g: (torch.randn(262144, 96, generator=g), torch.randn(96, generator=g)),
}


def load(source: str, directory: Path, name: str):
    path = directory / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    assert torch.cuda.is_available(), "this check needs an NVIDIA GPU"
    print(f"GPU {torch.cuda.get_device_name(0)}, torch {torch.__version__}, triton {triton.__version__}", flush=True)
    rows = []
    workdir = Path(tempfile.mkdtemp(prefix="catalog_gpu_"))
    for case_name, case in CASES.items():
        gen = torch.Generator().manual_seed(0)
        inputs = tuple(t.cuda() for t in SHAPES[case_name](gen))
        expected = case.reference(*inputs)
        original = load(case.source, workdir, f"{case_name}_original")
        for rewrite in TRITON_CATALOG:
            for index, site in enumerate(rewrite.sites(case.source)):
                row = {"case": case_name, "rewrite": rewrite.name, "site": site.description}
                started = time.monotonic()
                try:
                    module = load(rewrite.apply(case.source, index), workdir, f"{case_name}_{rewrite.name}_{index}")
                    got = module.run(*inputs)
                    torch.cuda.synchronize()
                    ok = got.shape == expected.shape and torch.allclose(got, expected, rtol=1e-4, atol=1e-4)
                    row["status"] = "correct" if ok else "incorrect"
                    if ok:
                        before, after = [], []
                        for _ in range(args.rounds):
                            before.append(triton.testing.do_bench(lambda o=original, x=inputs: o.run(*x)))
                            after.append(triton.testing.do_bench(lambda m=module, x=inputs: m.run(*x)))
                        row["ms_before"], row["ms_after"] = statistics.median(before), statistics.median(after)
                        row["ratio"] = row["ms_before"] / row["ms_after"]
                except Exception as exc:  # a failed rewrite is a result
                    row["status"] = f"failed: {type(exc).__name__}: {str(exc)[:200]}"
                row["seconds"] = round(time.monotonic() - started, 1)
                rows.append(row)
                timing = (f"{row['ms_before']:.4f} -> {row['ms_after']:.4f} ms ({row['ratio']:.2f}x)"
                          if "ratio" in row else "")
                print(f"{case_name:16} {rewrite.name:20} {row['status'][:60]:12} {timing}  [{site.description}]",
                      flush=True)
                if args.out:
                    Path(args.out).write_text(json.dumps({"gpu": torch.cuda.get_device_name(0), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
