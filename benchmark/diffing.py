"""Side-by-side line diffs of two kernel sources, for the run pages (kernel vs parent) and the memory
pages (slow vs fast). Pure Python: rows for a template, no HTML here."""

from __future__ import annotations

import difflib
from dataclasses import dataclass


@dataclass(frozen=True)
class DiffRow:
    kind: str  # "same", "changed", "removed" (left only), "added" (right only)
    left_number: int | None
    left: str
    right_number: int | None
    right: str


def side_by_side(old: str, new: str) -> list[DiffRow]:
    """Every line of both sources, aligned; changed blocks pair their lines up in order."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    rows: list[DiffRow] = []
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            rows.extend(DiffRow("same", i + 1, old_lines[i], j + 1, new_lines[j]) for i, j in zip(range(i1, i2), range(j1, j2), strict=True))
            continue
        for offset in range(max(i2 - i1, j2 - j1)):
            i, j = i1 + offset, j1 + offset
            left = (i + 1, old_lines[i]) if i < i2 else (None, "")
            right = (j + 1, new_lines[j]) if j < j2 else (None, "")
            kind = "changed" if left[0] and right[0] else ("removed" if left[0] else "added")
            rows.append(DiffRow(kind, left[0], left[1], right[0], right[1]))
    return rows


def changed_line_count(rows: list[DiffRow]) -> int:
    return sum(1 for row in rows if row.kind != "same")
