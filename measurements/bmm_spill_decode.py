"""trn1's bmm spill counters decoded (docs/history/performance-model.md, "perf-9 candidates: bmm hbm_read"): the reloads of a
product kept across an outer loop, under furthest-next-use eviction.

The NKIBench bmm baseline's transposed lhs is 64 blocks of 256 KiB, one per (batch, row block), made in the first of
four column-block passes and read in each. trn1 counts spill_save 12,582,912 B (48 blocks) and spill_reload
33,816,576 B (129 blocks). This prints, for a fixed set of `pinned` blocks plus a `window` of blocks over the others
chosen by Belady's rule, the reloads per later pass and the blocks ever evicted.

    python measurements/bmm_spill_decode.py            # 16 pinned + 5 window: 43 per pass, 129 in all
    python measurements/bmm_spill_decode.py --pinned 0 --window 21
"""

from __future__ import annotations

import argparse

BLOCK = 256 * 1024


def belady(blocks: int, window: int, passes: int) -> tuple[list[int], int]:
    """Reloads in each pass of a cyclic read of `blocks` blocks through `window` slots (furthest next use leaves),
    and how many distinct blocks were ever evicted. The first pass makes the blocks (no reloads)."""
    seq = [b for _ in range(passes) for b in range(blocks)]
    resident: set[int] = set()
    made: set[int] = set()
    evicted: set[int] = set()
    per_pass = [0] * passes
    for t, block in enumerate(seq):
        if block in resident:
            continue
        if block in made:
            per_pass[t // blocks] += 1
        made.add(block)
        if len(resident) >= window:
            def next_use(b: int, t: int = t) -> int:
                return next((u for u in range(t + 1, len(seq)) if seq[u] == b), len(seq))
            victim = max(resident, key=next_use)
            resident.remove(victim)
            evicted.add(victim)
        resident.add(block)
    return per_pass, len(evicted)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=64)
    parser.add_argument("--pinned", type=int, default=16)
    parser.add_argument("--window", type=int, default=5)
    parser.add_argument("--passes", type=int, default=4)
    args = parser.parse_args()
    per_pass, evicted = belady(args.blocks - args.pinned, args.window, args.passes)
    reloads = sum(per_pass)
    print(f"reloads per pass {per_pass}: {reloads} blocks = {reloads * BLOCK:,} B (trn1: 33,816,576); "
          f"blocks outside the pinned set {args.blocks - args.pinned} = {(args.blocks - args.pinned) * BLOCK:,} B, "
          f"ever evicted {evicted} (trn1 saves 12,582,912)")


if __name__ == "__main__":
    main()
