"""trn1's lora HBM counters decoded (docs/history/performance-model.md, "perf-10 candidates: lora"): every byte named.

The NKIBench lora baseline (M 4096, N 12288, K 5120, R 128, fp32): x (v1) 84 MB, W (v2) 252 MB, A (v3) 2.6 MB,
B (v4) 6.3 MB, the shared identity 64 KiB, out (v5) 201 MB. Its second part is `for i13 in affine_range(12)`
(column blocks) around `for i14 in sequential_range(4)` (K chunks: load x's chunk, transpose it (v20), multiply by
W, accumulate into v22 with loop_reduce), then the epilogue (v23 = v22 + v16, transposed, stored). The spill unit
below is one [128, 512] fp32 tile (256 KiB). This prints trn1's bytes as the sum of named parts, and the model's
parts for program order with the products bounded as perf-9 does, and with the K loop run outermost.

    python measurements/lora_spill_decode.py
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

TILE = 128 * 512 * 4  # one [128, 512] fp32 tile
MB = 1e6
CSV = Path("/work/shared/calibration/trn1_nkibench_baselines.csv")
M, N, K, R = 4096, 12288, 5120, 128
X, W, A, B, OUT, IDENTITY = M * K * 4, K * N * 4, K * R * 4, R * N * 4, M * N * 4, 128 * 128 * 4
BLOCKS, CHUNKS = 12, 4  # i13 column blocks, i14 K chunks
X_T = X // TILE  # the transposed x: 320 tiles
ACC = OUT // TILE // BLOCKS  # one column block's accumulators (v22[i13]): 64 tiles
V16 = OUT // TILE  # the first part's x @ A @ B, added in each block's epilogue: 768 tiles


def measured() -> dict[str, int]:
    with CSV.open() as f:
        row = next(r for r in csv.DictReader(f) if r["problem"] == "lora")
    assert json.loads(row["shape"]) == {"K": K, "M": M, "N": N, "R": R}
    return {k: int(row[k]) for k in ("hbm_read_bytes", "hbm_write_bytes", "spill_save_bytes", "spill_reload_bytes")}


def parts(order: str) -> dict[str, tuple[int, int]]:
    """(tiles saved, tiles reloaded) per spilled tensor. `order`: "program" (i13 outer, the transposed x
    recomputed in every block, perf-9), or "k-outer" (i14 outside i13: the transposed x made once per chunk and
    kept across the 12 blocks, the epilogue after the whole K loop)."""
    if order == "program":
        # v22 saved after i14 = 0, 1, 2 and reloaded at the next; the final values go straight to the epilogue.
        return {"v16": (V16, V16), "v22 across i14": (3 * ACC * BLOCKS, 3 * ACC * BLOCKS)}
    return {"v16": (V16, V16), "v20 (transposed x)": (X_T, (BLOCKS - 1) * X_T),
            "v22 across i14": (3 * ACC * BLOCKS, 3 * ACC * BLOCKS),
            "v22 final, to the epilogue": (ACC * BLOCKS, ACC * BLOCKS)}


def main() -> None:
    m = measured()
    save, reload = m["spill_save_bytes"] // TILE, m["spill_reload_bytes"] // TILE
    assert m["spill_save_bytes"] == save * TILE and m["spill_reload_bytes"] == reload * TILE
    # Non-spill traffic: every input once, x once more (the second part's loads, hoisted out of i13), B once more
    # (loaded in each of the first part's two row halves); the output once.
    reads = X + W + A + B + IDENTITY + X + B
    print(f"trn1 hbm_read  {m['hbm_read_bytes']:>14,} = inputs + x + B {reads:,} + spill_reload {m['spill_reload_bytes']:,}"
          f" ({'exact' if reads + m['spill_reload_bytes'] == m['hbm_read_bytes'] else 'OFF'})")
    print(f"trn1 hbm_write {m['hbm_write_bytes']:>14,} = out {OUT:,} + spill_save {m['spill_save_bytes']:,}"
          f" ({'exact' if OUT + m['spill_save_bytes'] == m['hbm_write_bytes'] else 'OFF'})")
    print(f"trn1 spills in tiles: saved {save}, reloaded {reload}; reloaded - saved = {reload - save} = "
          f"{(reload - save) / X_T:g} x the transposed x ({X_T} tiles)")
    for order in ("program", "k-outer"):
        p = parts(order)
        s, r = sum(v[0] for v in p.values()), sum(v[1] for v in p.values())
        print(f"{order:8} saved {s:5} reloaded {r:5} (trn1 - this: {save - s:+}, {reload - r:+}) "
              + "; ".join(f"{k} {v[0]}/{v[1]}" for k, v in p.items()))
    print(f"k-outer leaves {ACC * BLOCKS - (save - sum(v[0] for v in parts('program').values()) - X_T)} of the "
          f"{ACC * BLOCKS} final accumulator tiles resident into the epilogue on trn1 (the model saves them all)")


if __name__ == "__main__":
    main()
