"""Kernels are parsed on several threads of one server at once (evaluations, the offline agents, pages): none
of those parses may fail because another ran beside it (CPython 3.11's AST converter, engine/ast_lock.py)."""

from __future__ import annotations

import ast
import gc
import threading
import time
from pathlib import Path

import pytest

SOURCE = (Path(__file__).resolve().parents[2] / "engine" / "platforms" / "nki" / "simulator" / "semantics"
          / "isa_v06.py").read_text()


@pytest.fixture
def collections_that_run_python():
    """A garbage collection every few allocations that runs Python code, as finalizers in a server do: the
    moment another thread can start a parse of its own in the middle of one."""
    callback = lambda phase, info: time.sleep(0)  # noqa: E731
    threshold = gc.get_threshold()
    gc.callbacks.append(callback)
    gc.set_threshold(50)
    yield
    gc.set_threshold(*threshold)
    gc.callbacks.remove(callback)


def test_parses_on_several_threads_at_once_never_fail(collections_that_run_python):
    errors: list[str] = []

    def parse_many() -> None:
        for _ in range(60):
            try:
                ast.parse(SOURCE)
            except SystemError as error:  # "AST constructor recursion depth mismatch"
                errors.append(str(error))

    threads = [threading.Thread(target=parse_many) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
