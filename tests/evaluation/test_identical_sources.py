"""Which kernel sources count as identical for the evaluation cache (engine.evaluator.identity, issue 38):
comments and spacing inside lines do not matter; anything that moves code to another line does, and a stored
result that quotes a line which differs is never reused."""

from __future__ import annotations

import dis
from types import CodeType

from engine.evaluator.identity import normalized_source_key, same_answer

KERNEL = '''import numpy as np


def kernel(a, b):
    """Add two tiles."""
    out = np.empty_like(a)
    for i in range(0, a.shape[0], 128):
        out[i:i + 128] = a[i:i + 128] + b[i:i + 128]
    return out
'''

# Comments and spacing inside lines, a comment line replaced by another on the same line: nothing moves.
RESTYLED = '''import numpy as np


def kernel(a,b):  # the sum
    """Add two tiles."""
    out=np.empty_like( a )
    for i in range(0, a.shape[0], 128):   # one tile of rows at a time
        out[i:i+128] = a[i:i+128]+b[i:i+128]
    return out\t\t
'''


def lines_and_code(code: CodeType) -> list[tuple]:
    """What running the code can depend on, line numbers included (columns left out), recursively."""
    rows: list[tuple] = []
    for instruction in dis.get_instructions(code):
        argval = instruction.argval
        rows.append((instruction.opname, repr(argval) if not isinstance(argval, CodeType) else "<code>",
                     instruction.positions.lineno if instruction.positions else None))
        if isinstance(argval, CodeType):
            rows.extend(lines_and_code(argval))
    return rows


def test_comments_and_spacing_inside_lines_leave_the_key_and_the_compiled_lines_unchanged():
    assert normalized_source_key(KERNEL) == normalized_source_key(RESTYLED) is not None
    assert lines_and_code(compile(KERNEL, "kernel.py", "exec")) == lines_and_code(compile(RESTYLED, "kernel.py", "exec"))


def test_anything_that_moves_a_line_or_changes_the_code_changes_the_key():
    moved = KERNEL.replace("    out = np.empty_like(a)\n", "    # allocate\n    out = np.empty_like(a)\n")
    renamed = KERNEL.replace("out", "result")
    other_tile = KERNEL.replace("128", "64")
    new_docstring = KERNEL.replace("Add two tiles.", "Add two tiles of rows.")
    keys = {normalized_source_key(s) for s in (KERNEL, moved, renamed, other_tile, new_docstring)}
    assert len(keys) == 5


def test_a_source_that_does_not_parse_has_no_key():
    assert normalized_source_key("def kernel(:\n") is None


def test_a_stored_result_quoting_a_line_that_differs_is_not_reused():
    traceback = ('File "kernel.py", line 8, in kernel\n'
                 "    out[i:i + 128] = a[i:i + 128] + b[i:i + 128]\nValueError: shapes do not match")
    assert same_answer(RESTYLED, KERNEL, ["shapes do not match", traceback]) is False
    # Quoting a line both sources share, or nothing at all, keeps the answer the same.
    assert same_answer(RESTYLED, KERNEL, ['File "kernel.py", line 9\n    return out']) is True
    assert same_answer(RESTYLED, KERNEL, ["relative L2 error 0.5 > 2e-05", ""]) is True
    assert same_answer(RESTYLED, KERNEL.replace("128", "64"), []) is False
