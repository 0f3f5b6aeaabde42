"""The importable NKI namespaces: `neuronxcc.nki.*` (SDK 2.26) and top-level `nki.*` (SDK 2.30).

`install()` puts module objects into `sys.modules` for this process only. It refuses to shadow a real
Neuron installation: if `neuronxcc` (or `nki`) is importable from disk, kernels must run against it.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from typing import Any

from engine.platforms.nki.simulator.errors import NKICompileError
from engine.platforms.nki.simulator.semantics import isa, isa_dst, language
from engine.platforms.nki.simulator.semantics.isa_v06 import DESTINATION, FUNCTIONAL, LANGUAGE, language_ops
from engine.platforms.nki.simulator.semantics.isa_v06_more import DESTINATION_MORE, returning_instruction
from engine.platforms.nki.simulator.simulate import jit, simulate_kernel
from engine.platforms.nki.simulator.trace import LoopKind

_MARK = "__nki_simulator__"


class typing_ns:  # noqa: N801 - holder for nki.typing names
    """Annotation-only types (nt.tensor, nt.mutable_tensor ...): the simulator ignores annotations."""


def _typing_module(name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    for attr in ("tensor", "mutable_tensor", "scalar", "tile", "ndarray"):
        setattr(mod, attr, type(attr, (), {"__class_getitem__": classmethod(lambda cls, item: cls)}))
    setattr(mod, _MARK, True)
    return mod


def _alias(name: str, source: types.ModuleType, extra: dict[str, Any] | None = None) -> types.ModuleType:
    """A module named `name` exposing `source`'s public names, then `extra` (and the unsupported-op fallback)."""
    mod = types.ModuleType(name, source.__doc__)
    for attr in dir(source):
        if not attr.startswith("__"):
            setattr(mod, attr, getattr(source, attr))
    for attr, value in (extra or {}).items():
        setattr(mod, attr, value)
    fallback = getattr(source, "__getattr__", None)
    if fallback is not None:
        mod.__getattr__ = fallback  # type: ignore[attr-defined]
    setattr(mod, _MARK, True)
    return mod


def _unrolled(*args: int, **_: Any) -> Any:
    """The 2.30 loop iterators: deprecated aliases of Python range, unrolled while tracing."""
    return language._Range(LoopKind.STATIC, args)


def _compiler_module(name: str) -> types.ModuleType:
    """nki.compiler: allocation and scheduling hints. The simulator allocates lazily and keeps program
    order, so the hints only have to exist."""
    mod = types.ModuleType(name)

    class _Allocator:
        def __init__(self, buffer: Any) -> None:
            self.buffer = buffer

        def mod_alloc(self, *_: Any, **__: Any) -> Any:
            return self.buffer

        def alloc(self, *_: Any, **__: Any) -> Any:
            return self.buffer

        def auto_alloc(self, *_: Any, **__: Any) -> Any:
            return self.buffer

    mod.sbuf = _Allocator(language.sbuf)  # type: ignore[attr-defined]
    mod.psum = _Allocator(language.psum)  # type: ignore[attr-defined]

    def passthrough(func: Any = None, **_: Any) -> Any:
        return func if func is not None else (lambda f: f)

    mod.skip_middle_end_transformations = passthrough  # type: ignore[attr-defined]
    mod.enable_stack_allocator = passthrough  # type: ignore[attr-defined]
    mod.force_auto_alloc = passthrough  # type: ignore[attr-defined]
    mod.no_reorder = lambda *a, **k: None  # type: ignore[attr-defined]
    setattr(mod, _MARK, True)
    return mod


def _collectives_module(name: str) -> types.ModuleType:
    """nki.collectives: importable, every name refused with the reason. Collectives exchange data between
    NeuronCores (ranks); the simulator runs one NeuronCore per kernel, so it simulates none of them."""
    mod = types.ModuleType(name, "NKI collectives: refused by the CPU simulator (one NeuronCore, no ranks)")

    def refuse(attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)

        def missing(*_: Any, **__: Any) -> Any:

            raise NKICompileError(f"nki.collectives.{attr}", "collectives are not simulated: the CPU simulator runs "
                                                             "one NeuronCore, with no other ranks to exchange with")

        return missing

    mod.__getattr__ = refuse  # type: ignore[attr-defined]
    setattr(mod, _MARK, True)
    return mod


def _decorator(func: Any = None, **options: Any) -> Any:
    return jit(func, **options)


def _instructions_return_handles(mod: types.ModuleType) -> None:
    """0.6 destination-first instructions return an NkiInstruction (for `.depends_on`) rather than None."""
    for attr in dir(mod):
        value = getattr(mod, attr)
        if getattr(value, "nki_name", None) is not None or (
                isinstance(value, types.FunctionType) and value.__module__.endswith("isa_dst")):
            setattr(mod, attr, returning_instruction(value))


def _top(name: str) -> types.ModuleType:
    mod = types.ModuleType(name, "NKI CPU simulator (engine.platforms.nki.simulator)")
    mod.jit = jit  # type: ignore[attr-defined]
    mod.trace = _decorator  # type: ignore[attr-defined]
    mod.baremetal = _decorator  # type: ignore[attr-defined]
    mod.benchmark = _decorator  # type: ignore[attr-defined]
    mod.profile = _decorator  # type: ignore[attr-defined]
    mod.simulate_kernel = simulate_kernel  # type: ignore[attr-defined]
    mod.simulate = lambda kernel: (lambda *a, **k: simulate_kernel(kernel, *a, **k))  # type: ignore[attr-defined]
    mod.__path__ = []  # type: ignore[attr-defined]  # a package, so `import nki.language` works
    setattr(mod, _MARK, True)
    return mod


def build() -> dict[str, types.ModuleType]:
    """The module objects, by import name."""
    mods: dict[str, types.ModuleType] = {}
    neuronxcc = types.ModuleType("neuronxcc", "NKI CPU simulator stand-in for the Neuron compiler package")
    neuronxcc.__path__ = []  # type: ignore[attr-defined]
    setattr(neuronxcc, _MARK, True)
    old = _top("neuronxcc.nki")
    extra_language = {**LANGUAGE, **language_ops()}
    old.language = _alias("neuronxcc.nki.language", language, extra_language)  # type: ignore[attr-defined]
    old.isa = _alias("neuronxcc.nki.isa", isa, FUNCTIONAL)  # type: ignore[attr-defined]
    old.typing = _typing_module("neuronxcc.nki.typing")  # type: ignore[attr-defined]
    old.compiler = _compiler_module("neuronxcc.nki.compiler")  # type: ignore[attr-defined]
    neuronxcc.nki = old  # type: ignore[attr-defined]
    mods.update({"neuronxcc": neuronxcc, "neuronxcc.nki": old, "neuronxcc.nki.language": old.language,
                 "neuronxcc.nki.isa": old.isa, "neuronxcc.nki.typing": old.typing,
                 "neuronxcc.nki.compiler": old.compiler})
    new = _top("nki")
    new.language = _alias("nki.language", language, extra_language)  # type: ignore[attr-defined]
    for loop in ("affine_range", "sequential_range", "static_range"):
        setattr(new.language, loop, _unrolled)
    new.isa = _alias("nki.isa", isa_dst, {**DESTINATION, **DESTINATION_MORE})  # type: ignore[attr-defined]
    _instructions_return_handles(new.isa)
    new.typing = _typing_module("nki.typing")  # type: ignore[attr-defined]
    new.compiler = _compiler_module("nki.compiler")  # type: ignore[attr-defined]
    new.collectives = _collectives_module("nki.collectives")  # type: ignore[attr-defined]
    mods.update({"nki": new, "nki.language": new.language, "nki.isa": new.isa, "nki.typing": new.typing,
                 "nki.compiler": new.compiler, "nki.collectives": new.collectives})
    return mods


def _real(name: str) -> bool:
    """Whether `name` is importable from disk (not one of our stand-ins)."""
    present = sys.modules.get(name)
    if present is not None:
        return not getattr(present, _MARK, False)
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def install() -> None:
    """Make the NKI namespaces importable in this process (idempotent)."""
    for top in ("neuronxcc", "nki"):
        if _real(top):
            raise RuntimeError(f"a real {top!r} package is importable in this environment; refusing to shadow the "
                               "Neuron SDK with the CPU simulator (use the hardware backend, or a clean virtualenv)")
    sys.modules.update(build())


def uninstall() -> None:
    """Remove our stand-ins from sys.modules (tests use this to keep processes clean)."""
    for name in list(sys.modules):
        if getattr(sys.modules[name], _MARK, False):
            del sys.modules[name]
