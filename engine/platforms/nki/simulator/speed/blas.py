"""Pin numpy's BLAS to one thread while a kernel runs.

A kernel's matmuls are small tiles (at most 128x128 by 128x512); OpenBLAS's thread hand-off costs more
than the arithmetic on such tiles, and on a loaded machine it costs 20x (measured: 1.5 ms single-threaded
vs 36 ms with two threads for one 128x128x512 tile). Works through ctypes on the OpenBLAS numpy loaded;
a no-op when the library or its symbols are not found.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from contextlib import contextmanager

_SETTERS = ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_", "openblas_set_num_threads")
_GETTERS = ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_", "openblas_get_num_threads")


def _openblas() -> tuple[object, object] | None:
    try:
        maps = open("/proc/self/maps").read()
    except OSError:
        return None
    paths = {line.split()[-1] for line in maps.splitlines() if "openblas" in line and line.split()[-1].startswith("/")}
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        setter = next((getattr(lib, n) for n in _SETTERS if hasattr(lib, n)), None)
        getter = next((getattr(lib, n) for n in _GETTERS if hasattr(lib, n)), None)
        if setter is not None and getter is not None:
            return setter, getter
    return None


@contextmanager
def single_threaded_blas() -> Iterator[None]:
    import numpy  # noqa: F401  (make sure the library is loaded)

    found = _openblas()
    if found is None:
        yield
        return
    setter, getter = found
    before = int(getter())  # type: ignore[operator]
    setter(1)  # type: ignore[operator]
    try:
        yield
    finally:
        setter(before)  # type: ignore[operator]
