"""`ast.parse` from several threads at once, made safe for this interpreter.

CPython 3.11 keeps the counter its AST converter uses to bound recursion in state shared by every thread
(gh-106905, gh-95185). When Python code runs in the middle of a conversion (a garbage collection's
callbacks or finalizers) another thread can start a conversion of its own, and one of them fails with
"SystemError: AST constructor recursion depth mismatch". The server parses kernels on several threads at
once (the evaluation pool's static checks, the offline agents' thread, pages that read a kernel's imports),
and the soak met it: an evaluation ended as an infrastructure error. `install()` makes every `ast.parse` of
the process take one lock; a parse takes milliseconds, so they wait little.
"""

from __future__ import annotations

import ast
import threading
from typing import Any

_LOCK = threading.Lock()
_PARSE = ast.parse


def _parse_one_at_a_time(*args: Any, **kwargs: Any) -> Any:
    with _LOCK:
        return _PARSE(*args, **kwargs)


def install() -> None:
    """Serialize `ast.parse` in this process (idempotent)."""
    ast.parse = _parse_one_at_a_time  # type: ignore[assignment]
