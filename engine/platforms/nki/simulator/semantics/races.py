"""The `affine_range` race rule: two iterations of one affine loop must not write overlapping regions.

Every exact write inside a loop is filed under its tensor (`Tensor.records`) with its box and loop nest.
A write overlapping an earlier one from another iteration of the same affine loop is a race
(NKIRuntimeError), except when both accumulate (PSUM accumulation, `loop_reduce`). Records of loops that
have ended can no longer race and are dropped.
"""

from __future__ import annotations

from engine.platforms.nki.simulator.errors import NKIRuntimeError
from engine.platforms.nki.simulator.semantics.tensors import Access
from engine.platforms.nki.simulator.trace import LoopKind


class RaceCheck:
    """Checks and files writes. `loop_kind`, `loop_open` and `loop_line` are the simulator's loop tables
    (by loop execution id), shared, not copied: they grow as loops start."""

    def __init__(self, loop_kind: list[LoopKind], loop_open: list[bool], loop_line: list[int]) -> None:
        self.loop_kind = loop_kind
        self.loop_open = loop_open
        self.loop_line = loop_line

    def write(self, dst: Access, accumulate: bool, op: str, nest: tuple) -> None:
        """File the write of `dst` made in loop nest `nest`; raise if it races with an earlier one."""
        if not nest or not dst.exact:
            return
        t = dst.tensor
        self.file(t.records, t.race_key_len, t.name, dst.box, dst.key, accumulate, op, nest)

    def file(self, records_of: dict, key_len: int, name: str, box: tuple, key: tuple | None, accumulate: bool,
             op: str, nest: tuple) -> None:
        """The rule itself, on plain data: a write of `box` (its tensor's coordinates; `key`: its leading
        `key_len` indices when all are pinned, else None) into the tensor whose records are `records_of`.
        The simulator files every exact write here (`write`), the verifier every write of a recorded program
        (replay_checks.py), so the two apply one rule."""
        # Buckets: a write whose leading (race-key) axes are all pinned goes under those indices; any other
        # goes under "*", in a sub-bucket keyed the same way with None for each axis it spans. Only
        # buckets whose keys agree on every axis pinned in both can hold an overlapping write, which keeps
        # a kernel storing thousands of tiles through an unpinned axis from comparing each with all.
        star = records_of.get("*")
        if key is None:
            part = tuple(lo if hi - lo == 1 else None for lo, hi in box[:key_len])
            lists = [records for k, records in records_of.items() if k != "*" and _agree(k, part)]
            if star:
                lists.extend(records for k, records in star.items() if _agree(k, part))
        else:
            lists = [records_of.get(key, ())]
            if star:
                lists.extend(records for k, records in star.items() if _agree(k, key))
        loop_kind = self.loop_kind
        for records in lists:
            for rbox, rnest, racc in records:
                if accumulate and racc:
                    continue
                if rnest is nest:
                    continue
                overlap = True
                for (alo, ahi), (blo, bhi) in zip(rbox, box, strict=True):
                    if alo >= bhi or blo >= ahi:
                        overlap = False
                        break
                if not overlap:
                    continue
                for k in range(min(len(rnest), len(nest))):
                    if rnest[k] != nest[k]:
                        loop_id = nest[k][0]
                        if rnest[k][0] == loop_id and loop_kind[loop_id] == LoopKind.AFFINE:
                            self._race(name, box, op, loop_id, rnest[k][1], nest[k][1])
                        break
        if key is None:
            if star is None:
                records_of["*"] = star = {}
            records = star.get(part)
            if records is None:
                star[part] = records = []
        else:
            records = records_of.get(key)
            if records is None:
                records_of[key] = records = []
        if records:
            if len(records) == 1:
                last = records[0]
                if last[0] == box and last[2] == accumulate and self.loop_open[last[1][0][0]]:
                    records[0] = (box, nest, accumulate)  # the common case: accumulating into one tile
                    return
            open_ = self.loop_open
            # Drop records outside every open loop (they can no longer race) and records the new write
            # covers with the same accumulate flag (the new record stands for them).
            records[:] = [r for r in records if open_[r[1][0][0]] and not (
                r[2] == accumulate and _inside(r[0], box))]
        records.append((box, nest, accumulate))

    def _race(self, name: str, box: tuple, op: str, loop_id: int, it_a: int, it_b: int) -> None:
        region = ", ".join(f"{lo}:{hi}" for lo, hi in box)
        raise NKIRuntimeError(op, f"iterations {it_a} and {it_b} of the affine_range loop at line "
                                  f"{self.loop_line[loop_id]} both write tensor {name!r} [{region}]; "
                                  "use sequential_range for a loop-carried dependency, or index the "
                                  "destination by the loop variable")


def _agree(a: tuple, b: tuple) -> bool:
    """Two race-bucket keys that can name the same element: equal on every axis both pin (None spans).
    Keys of different lengths come from differently shaped views of one HBM tensor (`reshape`): their
    coordinates cannot be compared."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x is not None and y is not None and x != y:
            return False
    return True


def _inside(inner: tuple, outer: tuple) -> bool:
    for (ilo, ihi), (olo, ohi) in zip(inner, outer, strict=True):
        if ilo < olo or ihi > ohi:
            return False
    return True
