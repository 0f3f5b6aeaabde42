"""When two kernel sources are the same kernel to an evaluation: `normalized_source_key` and `same_answer`.
Pure Python (ast and hashlib only).

The exact-source cache keys a result by the source's sha256; this key also matches sources that differ only
in comments and spacing inside lines, which no evaluation can tell apart (the proof is in the docstrings).
`benchmark.services.identical` answers a kernel from such a twin's stored result.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from collections.abc import Iterable


@functools.lru_cache(maxsize=256)  # a parse and a tree dump per call, asked again for every cached candidate
def normalized_source_key(source: str) -> str | None:
    """A digest of the source's syntax tree with each node's line numbers; None if it does not parse.

    Why this normalization: two sources with the same key compile to the same instructions on the same lines
    (tests/evaluation/test_identical_sources.py checks it), so an evaluation cannot tell them apart except by
    reading the source text. Kept: every node, every name,
    constant and docstring, and each node's first and last line, so an edit that moves code to another line
    (a comment line added or removed, a statement split) changes the key, and the error line, a traceback's
    line numbers and the performance model's per-line breakdown stay the same between two sources with the
    same key. Dropped: comments, blank space inside a line and column offsets (the one thing that reads a
    column, a traceback's carets, sits under a quoted line, which `same_answer` checks). The size limit (`engine.evaluator.static_check.MAX_SOURCE_BYTES`) also reads the text, but
    both sources are stored kernels, which the benchmark app refuses above that limit.

    What the text can still change is a traceback's quoted line (Python prints the line, its comment
    included) or a message that quotes one: `same_answer` checks that for each stored result before using it.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        # Columns go; lines stay (see above).
        for name in ("col_offset", "end_col_offset"):
            if hasattr(node, name):
                setattr(node, name, 0)
    dump = ast.dump(tree, annotate_fields=True, include_attributes=True)
    return hashlib.sha256(dump.encode("utf-8")).hexdigest()


def same_answer(source: str, twin_source: str, texts: Iterable[str]) -> bool:
    """Whether `twin_source`'s result, whose messages are `texts`, is exactly what `source` would get.

    Both must have the same `normalized_source_key`; then only a quoted source line can differ, so the answer
    is the same unless a line that differs between the two appears in the texts (a traceback quoting it).
    """
    key = normalized_source_key(source)
    if key is None or key != normalized_source_key(twin_source):
        return False
    own, twin = source.splitlines(), twin_source.splitlines()
    # A traceback quotes a line stripped of its indentation and trailing space: only then can it differ.
    differing = {twin[i].strip() for i in range(len(twin)) if i >= len(own) or own[i].strip() != twin[i].strip()}
    differing.discard("")
    joined = "\n".join(text for text in texts if text)
    return not any(line in joined for line in differing)
