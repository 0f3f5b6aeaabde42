"""Two processes for one kernel: the halves of a top-level `affine_range` loop run side by side.

The iterations of an `affine_range` loop are independent by contract, so the simulator may run the
second half of a top-level one in a forked child while the parent runs the first half, then merge what
the child did into the parent: its writes to tensors that outlive the loop, its instruction trace, its
counters. The merged state is exactly what running the iterations in order would have produced (the
same trace, the same values), or the kernel is simulated again in one process (`ParallelFallback`).

Only loops whose body provably touches nothing but tensors are split (`parallel_loops`): Python state
the child changes (a list it appends to, a counter, a variable read after the loop) would otherwise be
lost. At run time the merge falls back whenever the halves interact: a region written by both (a race,
or an accumulation across the loop), a region the child read that the parent wrote (a dependency
across iterations), or any error in the child's half (the one-process run reports it with the usual
message and line).
"""

from __future__ import annotations

import ast
import inspect
import math
import mmap
import os
import pickle
import signal
import sys
import textwrap
from itertools import chain
from typing import Any, NamedTuple

import numpy as np

from .memory import in_shared_memory

# Names a loop body may call through: the NKI namespaces and numpy (pure functions).
_MODULE_ROOTS = ("neuronxcc", "nki", "numpy", "math")
_SIMULATOR_PACKAGE = __name__.rsplit(".", 1)[0]  # kernels in our tests import the simulator's modules directly
# Tensor methods that only read (`reshape` is not one: it makes a writable alias of HBM storage).
_PURE_METHODS = frozenset(("broadcast_to",))
# Builtins without side effects that kernels use inside loops.
_PURE_BUILTINS = frozenset(("range", "len", "int", "float", "min", "max", "abs", "slice", "tuple"))


class ParallelFallback(Exception):
    """The halves of a split loop interacted, or the child failed: simulate again in one process."""


class SplitLoop(NamedTuple):
    """What the simulator needs to know of a loop it may split."""

    inner: frozenset[int]  # the lines of the loops it holds (itself included): where its own tensors live
    reductions: frozenset[int]  # the lines of its max/min `loop_reduce` statements across its iterations


def parallel_loops(func: Any) -> dict[int, SplitLoop]:
    """The top-level `affine_range` loops of `func` that may be split, by the line of each one's iterator
    call."""
    try:
        source = textwrap.dedent(inspect.getsource(func))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return {}
    fn = tree.body[0] if tree.body else None
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return {}
    offset = func.__code__.co_firstlineno - 1
    modules = _module_names(func, tree)
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    # Top-level names bound once, by a call into an NKI module (a declaration or an on-chip tile).
    bound: dict[str, int] = {}
    for stmt in fn.body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                bound[node.id] = bound.get(node.id, 0) + 1
    declared = set()
    for stmt in fn.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                and isinstance(stmt.value, ast.Call) and _module_call(stmt.value, modules) \
                and bound.get(stmt.targets[0].id) == 1:
            declared.add(stmt.targets[0].id)
    tensors = declared | {p for p in params if p not in bound}
    loops: dict[int, SplitLoop] = {}

    def splittable(loop: ast.For, others: list[ast.AST], reductions: list[ast.Call], combinable: bool) -> bool:
        if not (_is_affine_range(loop.iter, modules) and not loop.orelse):
            return False
        local = _stored(loop)
        # Names the rest of the kernel reads (another loop reusing `i` as its own loop variable does not
        # count: the loop binds it before its body reads it).
        outside = set()
        for other in others:
            their_vars = _for_targets(other)
            outside |= {n.id for n in ast.walk(other) if isinstance(n, ast.Name) and n.id not in their_vars}
        if local & (outside | tensors | params):
            return False  # the loop rebinds a name the rest of the kernel sees
        made = {n.targets[0].id for n in ast.walk(loop) if isinstance(n, ast.Assign) and len(n.targets) == 1
                and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Call) and _module_call(n.value, modules)}
        loop_vars = _for_targets(loop)
        rules = _Rules(modules, tensors | made)
        # `dst[...] = w_tile` with a tile made before the loop: the first iteration may take over that
        # result while it still waits for a destination, which a split would have committed already.
        claims = any(isinstance(n, (ast.Assign, ast.AugAssign)) and isinstance(n.value, ast.Name)
                     and n.value.id not in local for n in ast.walk(loop))
        return not claims and all(rules.statement(s) for s in loop.body) and combinable \
            and _writes_follow(loop, made, reductions) and _bound_before_read(loop.body, set(loop_vars), local - loop_vars)

    for stmt in fn.body:
        if not isinstance(stmt, ast.For) or not isinstance(stmt.target, ast.Name):
            continue
        reductions, combinable = _reductions_over(stmt, stmt.target.id)
        if splittable(stmt, [s for s in fn.body if s is not stmt], reductions, combinable):
            inner = frozenset(node.iter.lineno + offset for node in ast.walk(stmt) if isinstance(node, ast.For))
            reduction_lines = frozenset(line + offset for node in ast.walk(stmt) if isinstance(node, ast.Assign)
                                        and any(node.value is call for call in reductions)
                                        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1))
            loops[stmt.iter.lineno + offset] = SplitLoop(inner, reduction_lines)
    return loops


def _module_names(func: Any, tree: ast.AST) -> set[str]:
    """Names the kernel can see that are bound to the NKI modules or numpy (globals, or imports in its body)."""
    names = set()
    for name, value in getattr(func, "__globals__", {}).items():
        mod = getattr(value, "__name__", None) if inspect.ismodule(value) else None
        if mod and (mod.split(".")[0] in _MODULE_ROOTS or mod.startswith(_SIMULATOR_PACKAGE)):
            names.add(name)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            module = node.module if isinstance(node, ast.ImportFrom) else None
            for alias in node.names:
                root = (module or alias.name).split(".")[0]
                if root in _MODULE_ROOTS:
                    names.add(alias.asname or alias.name.split(".")[0])
    return names


def _root(node: ast.AST) -> ast.Name | None:
    while isinstance(node, (ast.Attribute, ast.Call)):
        node = node.value if isinstance(node, ast.Attribute) else node.func
    return node if isinstance(node, ast.Name) else None


def _module_call(call: ast.Call, modules: set[str]) -> bool:
    root = _root(call.func)
    if root is None:
        return False
    if isinstance(call.func, ast.Name):
        return call.func.id in _PURE_BUILTINS or call.func.id in modules
    return root.id in modules


def _is_affine_range(node: ast.AST, modules: set[str]) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
        and node.func.attr == "affine_range" and _module_call(node, modules)


def _bound_before_read(body: list[ast.stmt], bound: set[str], local: set[str]) -> bool:
    """Each of the loop's own names is assigned in an iteration before that iteration reads it: a value
    carried from one iteration to the next would be missing in the child's first one. Names bound inside
    an inner block count as bound only there."""
    for stmt in body:
        if isinstance(stmt, ast.For):
            if not _reads_bound(stmt.iter, bound, local):
                return False
            if not _bound_before_read(stmt.body, {*bound, *_stored(stmt.target)}, local):
                return False
        elif isinstance(stmt, ast.If):
            if not (_reads_bound(stmt.test, bound, local) and _bound_before_read(stmt.body, set(bound), local)
                    and _bound_before_read(stmt.orelse, set(bound), local)):
                return False
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            # `acc += tile` on a tile this iteration made is fine; `n += 1` on a carried count is not
            if (stmt.target.id in local and stmt.target.id not in bound) or not _reads_bound(stmt.value, bound, local):
                return False
        else:
            value = getattr(stmt, "value", None)
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [getattr(stmt, "target", None)]
            if value is not None and not _reads_bound(value, bound, local):
                return False
            for dst in targets:
                if dst is None:
                    continue
                if isinstance(dst, ast.Subscript):
                    if not (_reads_bound(dst.value, bound, local) and _reads_bound(dst.slice, bound, local)):
                        return False
                bound |= _stored(dst)
            if isinstance(stmt, (ast.Expr, ast.Assert)) and not _reads_bound(stmt, bound, local):
                return False
    return True


def _stored(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _for_targets(node: ast.AST) -> set[str]:
    return {n.target.id for n in ast.walk(node) if isinstance(n, ast.For) and isinstance(n.target, ast.Name)}


def _reads_bound(node: ast.AST, bound: set[str], local: set[str]) -> bool:
    return all(n.id in bound for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
               and n.id in local)


# Operator names (as written: `np.max`, `nl.maximum`) of reductions the halves can combine (`IDEMPOTENT`).
_IDEMPOTENT_NAMES = frozenset(("max", "min", "maximum", "minimum", "amax", "amin"))


def _reductions_over(loop: ast.For, var: str) -> tuple[list[ast.Call], bool]:
    """The `nl.loop_reduce(..., loop_indices=[.., var, ..])` calls in the loop, accumulations across its
    iterations, and whether each combines with max or min, which the halves can do apart (any other
    operator would make them one long chain)."""
    calls = []
    for node in ast.walk(loop):
        if isinstance(node, ast.Call) and any(
                k.arg == "loop_indices" and any(isinstance(n, ast.Name) and n.id == var for n in ast.walk(k.value))
                for k in node.keywords):
            calls.append(node)
    combinable = True
    for call in calls:
        op = next((k.value for k in call.keywords if k.arg == "op"), call.args[1] if len(call.args) > 1 else None)
        if not (isinstance(op, ast.Attribute) and op.attr in _IDEMPOTENT_NAMES):
            combinable = False
    return calls, combinable


def _writes_follow(loop: ast.For, local: set[str], reductions: list[ast.Call]) -> bool:
    """Every write to a tensor from outside the loop is indexed by the loop variable (or by a name computed
    from it): otherwise all iterations write one region (an accumulation, or a race), and the halves
    could not be merged. The destinations of `reductions` (max/min across the loop) are exempt: the
    merge combines them."""
    var = loop.target.id  # type: ignore[union-attr]
    follows = {var}
    assigns = [n for n in ast.walk(loop) if isinstance(n, (ast.Assign, ast.AugAssign))]
    changed = True
    while changed:
        changed = False
        for node in assigns:
            value_names = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)}
            if value_names & follows:
                for dst in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    for n in ast.walk(dst):
                        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id not in follows:
                            follows.add(n.id)
                            changed = True
    written = []
    for node in ast.walk(loop):
        if isinstance(node, ast.Assign) and any(node.value is call for call in reductions):
            continue
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            written += [d for d in (node.targets if isinstance(node, ast.Assign) else [node.target])
                        if isinstance(d, ast.Subscript)]
        elif isinstance(node, ast.Call):
            # nl.store(dst[...], ...), and the ISA's dst= form
            first = node.args[:1] if isinstance(node.func, ast.Attribute) and node.func.attr == "store" else []
            written += [a for a in (*first, *(k.value for k in node.keywords if k.arg == "dst"))
                        if isinstance(a, ast.Subscript)]
    for dst in written:
        if isinstance(dst.value, ast.Name) and dst.value.id in local:
            continue  # a tensor the iteration made itself
        if not any(isinstance(n, ast.Name) and n.id in follows for n in ast.walk(dst.slice)):
            return False
    return True


class _Rules:
    """What a splittable loop body may do: bind names of its own, write elements of tensors (declared by
    the kernel, given to it, or made by an NKI call in the iteration), call the NKI modules, numpy and
    pure builtins and the read-only tensor methods, and read anything."""

    def __init__(self, modules: set[str], writable: set[str]) -> None:
        self.modules = modules
        self.writable = writable  # tensors the kernel declared or was given, and those the iteration makes

    def statement(self, stmt: ast.stmt) -> bool:
        if isinstance(stmt, ast.For):
            return not stmt.orelse and self._target(stmt.target) and self.expression(stmt.iter) \
                and all(self.statement(s) for s in stmt.body)
        if isinstance(stmt, ast.If):
            return self.expression(stmt.test) and all(self.statement(s) for s in (*stmt.body, *stmt.orelse))
        if isinstance(stmt, ast.Expr):
            return self.expression(stmt.value)
        if isinstance(stmt, ast.Assert):
            return self.expression(stmt.test) and (stmt.msg is None or self.expression(stmt.msg))
        if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            dsts = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            value = stmt.value
            return all(self._target(d) for d in dsts) and (value is None or self.expression(value))
        return isinstance(stmt, ast.Pass)

    def _target(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            return True  # one of the loop's own names (checked by the caller)
        if isinstance(node, (ast.Tuple, ast.List)):
            return all(self._target(e) for e in node.elts)
        if isinstance(node, ast.Subscript):
            return isinstance(node.value, ast.Name) and node.value.id in self.writable and self.expression(node.slice)
        return False

    def expression(self, node: ast.AST) -> bool:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                if isinstance(sub.func, ast.Name):
                    if sub.func.id not in _PURE_BUILTINS and sub.func.id not in self.modules:
                        return False
                else:
                    root = _root(sub.func)
                    if root is None:
                        return False
                    if root.id not in self.modules and not (isinstance(sub.func, ast.Attribute)
                                                            and sub.func.attr in _PURE_METHODS):
                        return False  # a method of a Python object (`lst.append`), or a tensor alias (`reshape`)
                    if any(isinstance(n, ast.Attribute) and n.attr == "random" for n in ast.walk(sub.func)):
                        return False  # numpy's random generator: state the child would advance alone
            elif isinstance(sub, (ast.Lambda, ast.NamedExpr, ast.Yield, ast.YieldFrom, ast.Await, ast.ListComp,
                                  ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                return False
        return True


Boxes = set | dict | np.ndarray | None  # boxes of one tensor (None: none), or `box_array`'s array of them
# Boxes of different ranks (views of one storage in two shapes): one box of no axes, which meets any box.
_MIXED = np.zeros((1, 0, 2), dtype=np.int64)


def box_array(boxes: Boxes) -> np.ndarray:
    """Boxes of one tensor (tuples of (lo, hi) per axis) as an (n, axes, 2) array."""
    if isinstance(boxes, np.ndarray):
        return boxes
    if not boxes:
        return np.zeros((0, 0, 2), dtype=np.int64)
    axes = len(next(iter(boxes)))
    if any(len(box) != axes for box in boxes):
        return _MIXED
    # Flattened through iterators: about 2.5x faster than np.array on the nested tuples.
    flat = np.fromiter(chain.from_iterable(chain.from_iterable(boxes)), dtype=np.int64, count=len(boxes) * axes * 2)
    return flat.reshape(len(boxes), axes, 2)


def overlapping(a: Boxes, b: Boxes) -> bool:
    """Whether a box of `a` overlaps a box of `b`."""
    if a is None or b is None or not len(a) or not len(b):
        return False
    boxes_a, boxes_b = box_array(a), box_array(b)
    if boxes_a.shape[1:] != boxes_b.shape[1:]:
        return True  # boxes of different ranks: views of one storage in two shapes, so assume they meet
    # The common case: on some axis (the one the split loop's variable indexes) the halves lie apart.
    apart = (boxes_a[:, :, 1].max(axis=0) <= boxes_b[:, :, 0].min(axis=0)) | \
        (boxes_b[:, :, 1].max(axis=0) <= boxes_a[:, :, 0].min(axis=0))
    if apart.any():
        return False
    step = max(1, 2**22 // max(1, boxes_b.size))  # compare in slices of a few MB
    for chunk in range(0, len(boxes_a), step):
        part = boxes_a[chunk:chunk + step, None]
        if np.all((part[..., 0] < boxes_b[None, :, :, 1]) & (boxes_b[None, :, :, 0] < part[..., 1]), axis=2).any():
            return True
    return False


class Split:
    """One top-level loop split in two: what each side records while its half runs.

    Both sides record the boxes they write in tensors that existed before the split (by serial); the
    child also records the boxes it reads, and the accesses whose values the parent needs (writes to
    tensors that outlive the loop, per `liveness`)."""

    def __init__(self, serial: int, loop: SplitLoop, child: bool, pid: int, fd: int) -> None:
        self.serial = serial  # tensors with a smaller serial existed before the split
        self.inner = loop.inner  # the lines of the split loop and of the loops inside it
        self.reductions = loop.reductions  # lines of the max/min reductions across it
        self.child = child
        self.pid = pid
        self.fd = fd
        self.writes: dict[int, set[tuple]] = {}
        self.reads: dict[int, set[tuple]] = {}
        # `loop_reduce` contributions with an idempotent operator (max, min), box -> operator: the halves
        # may both reduce into one region, and the merge combines their values with the operator.
        self.reduced: dict[int, dict[tuple, str]] = {}
        # child: reduced boxes it found uninitialised and treated as the first half's, as one process
        # would have found them (the merge checks the first half did reduce into each).
        self.presumed: dict[int, set[tuple]] = {}
        self.filing = True  # False while a reduction above is committed: its accesses are filed by `reduce`
        self.alias_read = False  # read shared memory through a tensor made over it later (`out.reshape`)
        self.views: list[Any] = []  # child: Accesses written in tensors the parent keeps using
        self.fresh: set[str] = set()  # child: tile names drawn from the simulator's counter
        self.tid_serial: dict[int, int] = {}  # trace tensor id -> serial, for ids given out after the split
        self.unmergeable = ""  # child: why its writes cannot be carried over (the parent then falls back)
        self.start: dict[str, Any] = {}  # the simulator's counters at the split
        self.shared: set[int] = set()  # serials of tensors whose storage both processes share
        self.exchange: Exchange | None = None

    def wrote(self, acc: Any) -> None:
        if self.filing and _note(self.writes, acc, self.serial):
            self._hand_over(acc)

    def _hand_over(self, acc: Any) -> None:
        """child: keep a write whose values the parent needs (a tensor that outlives the loop)."""
        t = acc.tensor
        if self.child and not (t.home is not None and t.home in self.inner):
            if not acc.exact or not hasattr(acc, "array") or hasattr(acc, "index"):
                self.unmergeable = f"an indirect write to tensor {t.name!r}"
            else:
                self.views.append(acc)

    def reduce(self, acc: Any, op: str, presumed: bool) -> None:
        """File a `loop_reduce` with an idempotent `op` (see `IDEMPOTENT`) into `acc`, of a tensor from
        before the split."""
        t = acc.tensor
        box = acc.box or ((0, 1),)
        ops = self.reduced.get(t.serial)
        if ops is None:
            self.reduced[t.serial] = ops = {}
        if ops.setdefault(box, op) != op:
            self.unmergeable = f"two operators reduce into one region of tensor {t.name!r}"
        if presumed:
            self.presumed.setdefault(t.serial, set()).add(box)
        self._hand_over(acc)

    def read(self, acc: Any) -> None:
        # The child's reads are checked against the parent's writes; the parent's only matter where the
        # child's writes reach them, in shared storage.
        if not self.filing:
            return
        t = acc.tensor
        if self.child or t.serial in self.shared:
            _note(self.reads, acc, self.serial)
        data = t.data
        if not self.alias_read and t.serial not in self.shared and data is not None and data.base is not None \
                and in_shared_memory(data):
            self.alias_read = True


# `loop_reduce` operators whose partial results combine exactly in any grouping: op(op(x, a), op(x, b))
# equals op(op(x, a), b), so each half may start from the value before the split.
IDEMPOTENT = frozenset(("maximum", "minimum"))


def _note(table: dict[int, set[tuple]], acc: Any, serial: int) -> bool:
    """File the access's box under its tensor, if that tensor is from before the split (`serial`)."""
    t = acc.tensor
    if t.serial >= serial:
        return False
    boxes = table.get(t.serial)
    if boxes is None:
        table[t.serial] = boxes = set()
    boxes.add(acc.box or ((0, 1),))
    return True


_MAP_NORESERVE = 0x4000  # Linux; not in Python's mmap module before 3.13


class Exchange:
    """Memory shared with a split's child, mapped before the fork: the child copies the values it wrote
    into it, and the parent uses them in place (a block it lacks becomes a view of this memory).
    Address space only: pages exist once written."""

    SIZE = 1 << 36

    def __init__(self) -> None:
        self.buf = mmap.mmap(-1, self.SIZE, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS | _MAP_NORESERVE)
        self.address = np.frombuffer(self.buf, dtype=np.uint8, count=1).ctypes.data
        self.used = 0

    def zeros(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """Fresh zeroed storage in the shared memory (a child's new block, `memory.BlockPool.take`)."""
        nbytes = math.prod(shape) * dtype.itemsize
        start = -(-self.used // 64) * 64
        if start + nbytes > self.SIZE:
            raise MemoryError("the exchange memory is full")
        self.used = start + nbytes
        return self.get((start, dtype.str, tuple(shape)))

    def put(self, values: np.ndarray) -> tuple[int, str, tuple[int, ...]] | None:
        """Where `values` are in the shared memory: in place if they already are (a block made by
        `zeros`), else copied in; None when the region is full."""
        if values.flags.c_contiguous:
            offset = values.ctypes.data - self.address
            if 0 <= offset and offset + values.nbytes <= self.SIZE:
                return offset, values.dtype.str, tuple(values.shape)
        start = -(-self.used // 64) * 64
        if start + values.nbytes > self.SIZE:
            return None
        self.used = start + values.nbytes
        self.get((start, values.dtype.str, values.shape))[...] = values
        return start, values.dtype.str, tuple(values.shape)

    def get(self, where: tuple[int, str, tuple[int, ...]]) -> np.ndarray:
        start, dtype, shape = where
        return np.frombuffer(self.buf, dtype=dtype, count=math.prod(shape), offset=start).reshape(shape)


def share_storage(t: Any) -> bool:
    """Move an HBM tensor nothing has written yet (an output) into memory a forked child shares, so the
    child's writes need no copying back. False when something else holds a view of its storage."""
    data = t.data
    if data is None or t.blocks is not None or t.init is None or data.base is not None or data.nbytes < 2**20 \
            or sys.getrefcount(data) > 3 or t.init.any():
        return False
    buf = mmap.mmap(-1, data.nbytes, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
    t.data = np.frombuffer(buf, dtype=data.dtype).reshape(data.shape)  # zeros, like the calloc'd original
    return True


def storage_cut(t: Any, acc: Any) -> tuple[Any, int, tuple[int, ...], tuple[int, ...]] | None:
    """Where an access's view sits in its tensor's storage: (block key or None, element offset, shape,
    element strides), or None when the view is not inside that storage."""
    view = acc.array
    if t.blocks is not None:
        entry = t.blocks.get(acc.key) if acc.key is not None else None
        if not entry or entry[0] is None:  # never touched, or evicted
            return None
        base, key = entry[0], acc.key
    else:
        base, key = t.data, None
    if base is None or not np.shares_memory(base, view) or view.dtype != base.dtype:
        return None
    item = view.itemsize
    offset = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    if offset % item or any(s % item for s in view.strides):
        return None
    return key, offset // item, tuple(view.shape), tuple(s // item for s in view.strides)


def cut_view(base: np.ndarray, offset: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    """The view `storage_cut` described, on another array with the same layout."""
    from numpy.lib.stride_tricks import as_strided

    flat = base.reshape(-1)
    item = base.itemsize
    return as_strided(flat[offset:] if offset else flat, shape=shape, strides=tuple(s * item for s in strides))


def reap(split: Split, *, kill: bool) -> None:
    """Wait for a split's child (killing it first when its work is not wanted)."""
    if kill:
        try:
            os.kill(split.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            os.close(split.fd)
        except OSError:
            pass
    try:
        os.waitpid(split.pid, 0)
    except ChildProcessError:
        pass


def child_exit(split: Split, payload: dict[str, Any], code: int = 0) -> None:
    """Send the child's results to the parent and end the child process at once (no cleanup: the
    kernel's caller must not go on running in it)."""
    try:
        with os.fdopen(split.fd, "wb") as pipe:
            pickle.dump(payload, pipe, protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException:  # noqa: BLE001 - the parent sees a broken pipe and falls back
        code = 2
    os._exit(code)
