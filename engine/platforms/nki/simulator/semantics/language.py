"""`neuronxcc.nki.language` (nl): tensors, loops, data movement and tile arithmetic.

Semantics follow the NKI language reference (SDK 2.26). Engines follow what the reference says each
operation lowers to: arithmetic between tiles runs on the Vector Engine, transcendental functions are
Scalar Engine activations, matmul/transpose use the Tensor Engine, load/store are DMAs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.platforms.nki.simulator.errors import NKICompileError, unsupported
from engine.platforms.nki.simulator.semantics import alu, axis_views, host_reads
from engine.platforms.nki.simulator.semantics import dtypes as dt
from engine.platforms.nki.simulator.semantics import isa as _isa
from engine.platforms.nki.simulator.semantics.indexing import IndexExpr, arange, ds, mgrid  # noqa: F401  (re-exported as nl.arange, ...)
from engine.platforms.nki.simulator.semantics.indirect import has_tile_index, tile_indices
from engine.platforms.nki.simulator.semantics.operands import (
    broadcast_full_shape,
    free_axes,
    mask_window,
    reduced_window,
    result_dtype,
)
from engine.platforms.nki.simulator.semantics.runtime import active, instruction
from engine.platforms.nki.simulator.semantics.tensors import (
    HBM,
    PRIVATE_HBM,
    PSUM,
    SBUF,
    SHARED_HBM,
    Access,
    Accumulate,
    Buffer,
    Derived,
    ParDim,
    Tensor,
    View,
)
from engine.platforms.nki.simulator.trace import Engine, LoopKind, MemorySpace

# -- dtypes and buffers -----------------------------------------------------------------------------
float32 = dt.float32
float16 = dt.float16
bfloat16 = dt.bfloat16
tfloat32 = dt.tfloat32
float8_e4m3 = dt.float8_e4m3
float8_e5m2 = dt.float8_e5m2
float8_e4m3fn = dt.float8_e4m3fn
float8_e8m0fnu = dt.float8_e8m0fnu
float8_e5m2_x4 = dt.float8_e5m2_x4
float8_e4m3fn_x4 = dt.float8_e4m3fn_x4
float4_e2m1fn_x4 = dt.float4_e2m1fn_x4
int8, int16, int32, int64 = dt.int8, dt.int16, dt.int32, dt.int64
uint8, uint16, uint32, uint64 = dt.uint8, dt.uint16, dt.uint32, dt.uint64
bool_ = dt.bool_

sbuf, psum, hbm, shared_hbm, private_hbm = SBUF, PSUM, HBM, SHARED_HBM, PRIVATE_HBM


def par_dim(size: int) -> ParDim:
    return ParDim(size)


class tile_size:  # noqa: N801 - the NKI name
    """Hardware tile limits (NKI language reference, nl.tile_size)."""

    pmax = 128
    psum_fmax = 512
    gemm_stationary_fmax = 128
    gemm_moving_fmax = 512
    psum_min_fmax = 1
    total_available_sbuf_size = 24 * 1024 * 1024 // 128
    # NKI 0.6 names (API reference, nki.language.tile_size): the PSUM bank in fp32 elements and bytes, and the
    # largest bn_stats input per partition.
    psum_bank_fmax = 512
    psum_bank_fmax_bytes = 2048
    bn_stats_fmax = 512


# -- tensor creation --------------------------------------------------------------------------------
def _buffer(buffer: Any) -> Buffer:
    return SBUF if buffer is None else buffer


@instruction("ndarray")
def ndarray(shape: Any, dtype: Any = float32, buffer: Any = None, name: str = "", **_: Any) -> Tensor:
    """Uninitialised tensor. HBM outputs start as NaN so unwritten output elements are visible."""
    sim = active("ndarray").begin("ndarray")
    buf = _buffer(buffer)
    return sim.declare("ndarray", shape, dtype, buf, name=name, poison=buf.space == MemorySpace.HBM)


@instruction("zeros")
def zeros(shape: Any, dtype: Any = float32, buffer: Any = None, name: str = "", **_: Any) -> Tensor:
    sim = active("zeros").begin("zeros")
    return sim.declare("zeros", shape, dtype, _buffer(buffer), name=name, fill=0)


@instruction("ones")
def ones(shape: Any, dtype: Any = float32, buffer: Any = None, name: str = "", **_: Any) -> Tensor:
    sim = active("ones").begin("ones")
    return sim.declare("ones", shape, dtype, _buffer(buffer), name=name, fill=1)


@instruction("full")
def full(shape: Any, fill_value: Any, dtype: Any = float32, buffer: Any = None, name: str = "",
         **_: Any) -> Tensor:
    sim = active("full").begin("full")
    return sim.declare("full", shape, dtype, _buffer(buffer), name=name, fill=fill_value)


@instruction("empty_like")
def empty_like(a: Any, dtype: Any = None, buffer: Any = None, name: str = "", **_: Any) -> Tensor:
    return ndarray(tuple(a.shape), dtype or a.dtype, buffer if buffer is not None else _memory_buffer(a), name)


@instruction("zeros_like")
def zeros_like(a: Any, dtype: Any = None, buffer: Any = None, name: str = "", **_: Any) -> Tensor:
    return zeros(tuple(a.shape), dtype or a.dtype, buffer if buffer is not None else _memory_buffer(a), name)


@instruction("ones_like")
def ones_like(a: Any, dtype: Any = None, buffer: Any = None, name: str = "", **_: Any) -> Tensor:
    return ones(tuple(a.shape), dtype or a.dtype, buffer if buffer is not None else _memory_buffer(a), name)


@instruction("full_like")
def full_like(a: Any, fill_value: Any, dtype: Any = None, buffer: Any = None, name: str = "", **_: Any) -> Tensor:
    return full(tuple(a.shape), fill_value, dtype or a.dtype,
                buffer if buffer is not None else _memory_buffer(a), name)


def _memory_buffer(a: Any) -> Buffer:
    t = a.base if isinstance(a, View) else a
    return t.buffer if isinstance(t, Tensor) else SBUF


@instruction("shared_constant")
def shared_constant(constant: Any, dtype: Any = None, **_: Any) -> Tensor:
    """A host constant placed in HBM (initialised)."""
    sim = active("shared_constant").begin("shared_constant")
    arr = np.asarray(constant)
    d = dt.as_dtype(dtype if dtype is not None else arr.dtype)
    t = Tensor(sim.fresh_name("constant"), arr.shape, d, SHARED_HBM, data=np.array(arr, dtype=d.storage),
               initialised=True)
    if sim.recorder is not None:
        sim.recorder.declared(t, ("const", t.data))  # host values fixed when the kernel was traced
    return sim.remember(t)


@instruction("shared_identity_matrix")
def shared_identity_matrix(n: int, dtype: Any = float32, **_: Any) -> Tensor:
    return shared_constant(np.identity(n), dtype)


# -- loops ------------------------------------------------------------------------------------------
class _Range:
    __slots__ = ("kind", "bounds")

    def __init__(self, kind: LoopKind, args: tuple[int, ...]) -> None:
        self.kind = kind
        self.bounds = range(*(int(a) for a in args))

    def __iter__(self) -> Any:
        return active("affine_range").loop(self.kind, self.bounds)

    def __len__(self) -> int:
        return len(self.bounds)


def affine_range(*args: int, **_: Any) -> _Range:
    """Iterations are independent; the only loop-carried dependence allowed is accumulation."""
    return _Range(LoopKind.AFFINE, args)


def sequential_range(*args: int, **_: Any) -> _Range:
    return _Range(LoopKind.SEQUENTIAL, args)


def static_range(*args: int, **_: Any) -> _Range:
    return _Range(LoopKind.STATIC, args)


# -- data movement ----------------------------------------------------------------------------------
@instruction("load")
def load(src: Any, mask: Any = None, dtype: Any = None, **_: Any) -> Tensor:
    """HBM -> SBUF (DMA)."""
    sim = active("load").begin("load")
    win = mask_window(mask)
    acc = sim.operand(src, win, on_chip=False)
    if acc.space != MemorySpace.HBM:
        raise NKICompileError("load", f"load reads HBM, but {acc.tensor.name!r} is in {acc.space.name}; "
                                      "use nl.copy between on-chip tiles")
    d = dt.as_dtype(dtype) if dtype is not None else getattr(src, "viewed_as", None) or acc.tensor.dtype
    values = sim.compute("convert", (d.name,), [acc])
    return sim.result(values, d, engine=Engine.DMA, reads=[acc], window=win, full_shape=acc.full_shape,
                      allowed=frozenset((MemorySpace.SBUF,)), flops=0)


@instruction("store")
def store(dst: Any, value: Any, mask: Any = None, **_: Any) -> None:
    """SBUF -> HBM (DMA)."""
    sim = active("store").begin("store")
    win = mask_window(mask)
    if isinstance(dst, View):
        items = tile_indices(sim, dst.items, "store") if has_tile_index(dst.items) else dst.items
        out = dst.base.access(items, win, "store")
    elif isinstance(dst, Tensor):
        out = dst.whole(win, "store")
    else:
        raise NKICompileError("store", f"store needs an HBM tensor destination, got {type(dst).__name__}")
    if out.space != MemorySpace.HBM:
        raise NKICompileError("store", f"store writes HBM, but the destination {out.tensor.name!r} is in "
                                       f"{out.space.name}")
    src = sim.operand(value, win)
    if isinstance(src, Access) and src.space == MemorySpace.PSUM:
        # The DMA reads SBUF; a PSUM tile (the nki-samples attention tutorial stores a matmul result)
        # goes through the copy the compiler inserts, and the trace shows it.
        src = sim.via_sbuf(src, "store")
    values = sim.compute("move", (), [src])
    sim.write(out, values, "store")
    sim.emit("store", Engine.DMA, out.tensor.dtype.name, out.partitions, out.free, 0,
             [src] if isinstance(src, Access) else [], [out], sim.line_no, sim.ctx)


@instruction("copy")
def copy(src: Any, mask: Any = None, dtype: Any = None, **_: Any) -> Tensor:
    sim = active("copy").begin("copy")
    win = mask_window(mask)
    acc = sim.operand(src, win)
    d = result_dtype(dtype, acc)
    values = sim.compute("convert", (d.name,), [acc])
    return sim.result(values, d, engine=Engine.VECTOR, reads=[acc], window=win, full_shape=acc.full_shape)


# -- elementwise ------------------------------------------------------------------------------------
def _binary_op(name: str) -> Any:
    fn = alu.binary(name, name)

    @instruction(name)
    def op(x: Any, y: Any, dtype: Any = None, mask: Any = None, **_: Any) -> Any:
        sim = active(name).begin(name)
        win = mask_window(mask)
        a = sim.operand(x, win)
        b = sim.operand(y, win)
        if not isinstance(a, Access) and not isinstance(b, Access):
            return fn(a, b)
        d = result_dtype(dtype, a, b)
        values = sim.compute("binary", (name, d.name), [a, b])
        reads = [r for r in (a, b) if isinstance(r, Access)]
        return sim.result(values, d, engine=Engine.VECTOR, reads=reads, window=win, full_shape=broadcast_full_shape(a, b))

    op.__name__ = name
    alu.register(op, name)
    return op


add = _binary_op("add")
subtract = _binary_op("subtract")
multiply = _binary_op("multiply")
divide = _binary_op("divide")
maximum = _binary_op("maximum")
minimum = _binary_op("minimum")
power = _binary_op("power")
equal = _binary_op("equal")
not_equal = _binary_op("not_equal")
greater = _binary_op("greater")
greater_equal = _binary_op("greater_equal")
less = _binary_op("less")
less_equal = _binary_op("less_equal")
logical_and = _binary_op("logical_and")
logical_or = _binary_op("logical_or")
logical_xor = _binary_op("logical_xor")
bitwise_and = _binary_op("bitwise_and")
bitwise_or = _binary_op("bitwise_or")
bitwise_xor = _binary_op("bitwise_xor")
left_shift = _binary_op("left_shift")
right_shift = _binary_op("right_shift")
fmod = _binary_op("mod")
abs_max = _binary_op("abs_max")


def _unary_op(name: str, engine: Engine = Engine.SCALAR) -> Any:
    fn = alu.unary(name, name)

    @instruction(name)
    def op(x: Any, dtype: Any = None, mask: Any = None, **_: Any) -> Any:
        sim = active(name).begin(name)
        win = mask_window(mask)
        a = sim.operand(x, win)
        if not isinstance(a, Access):
            return fn(np.float32(a))
        d = result_dtype(dtype, a)
        values = sim.compute("unary", (name, d.name), [a])
        return sim.result(values, d, engine=engine, reads=[a], window=win, full_shape=a.full_shape)

    op.__name__ = name
    alu.register(op, name)
    return op


exp = _unary_op("exp")
log = _unary_op("log")
sqrt = _unary_op("sqrt")
rsqrt = _unary_op("rsqrt")
square = _unary_op("square")
reciprocal = _unary_op("reciprocal")
tanh = _unary_op("tanh")
sigmoid = _unary_op("sigmoid")
silu = _unary_op("silu")
gelu = _unary_op("gelu")
gelu_apprx_tanh = _unary_op("gelu_apprx_tanh")
gelu_apprx_sigmoid = _unary_op("gelu_apprx_sigmoid")
relu = _unary_op("relu")
sin = _unary_op("sin")
cos = _unary_op("cos")
tan = _unary_op("tan")
arctan = _unary_op("arctan")
erf = _unary_op("erf")
softplus = _unary_op("softplus")
mish = _unary_op("mish")
abs = _unary_op("abs", Engine.VECTOR)  # noqa: A001 - the NKI name
negative = _unary_op("negative", Engine.VECTOR)
sign = _unary_op("sign", Engine.VECTOR)
ceil = _unary_op("ceil", Engine.VECTOR)
floor = _unary_op("floor", Engine.VECTOR)
trunc = _unary_op("trunc", Engine.VECTOR)
logical_not = _unary_op("logical_not", Engine.VECTOR)
invert = _unary_op("invert", Engine.VECTOR)
identity = _unary_op("identity")
alu.register(copy, "copy")


# -- reductions -------------------------------------------------------------------------------------
def _reduce_op(name: str, combine: str, mean: bool = False) -> Any:
    @instruction(name)
    def op(x: Any, axis: Any = None, dtype: Any = None, mask: Any = None, keepdims: bool = False,
           **_: Any) -> Tensor:
        sim = active(name).begin(name)
        win = mask_window(mask)
        a = sim.operand(x, win)
        d = result_dtype(dtype, a)
        axes = free_axes(axis, len(a.shape), name)
        alu.reducer(combine, name)
        count = 0
        if mean:
            count = 1
            for ax in axes:
                count *= a.full_shape[ax]
        out = sim.compute("reduce", (combine, axes, bool(keepdims), count, False, d.name), [a])
        full = list(a.full_shape)
        for ax in sorted(axes, reverse=True):
            if keepdims:
                full[ax] = 1
            else:
                del full[ax]
        return sim.result(out, d, engine=Engine.VECTOR, reads=[a], window=reduced_window(win, len(a.full_shape), axes,
                                                                                   bool(keepdims)),
                          full_shape=tuple(full), free=a.free, flops=a.size)

    op.__name__ = name
    return op


sum = _reduce_op("sum", "add")  # noqa: A001
prod = _reduce_op("prod", "multiply")
max = _reduce_op("max", "maximum")  # noqa: A001
min = _reduce_op("min", "minimum")  # noqa: A001
mean = _reduce_op("mean", "add", mean=True)
all = _reduce_op("all", "logical_and")  # noqa: A001
any = _reduce_op("any", "logical_or")  # noqa: A001
alu.register(sum, "add")
alu.register(max, "maximum")
alu.register(min, "minimum")
alu.register(prod, "multiply")


@instruction("loop_reduce")
def loop_reduce(x: Any, op: Any, loop_indices: Any, *, dtype: Any = None, mask: Any = None, **_: Any) -> Tensor:
    """dst = op(dst, x) across the listed loops; the first contribution initialises dst."""
    sim = active("loop_reduce").begin("loop_reduce")
    win = mask_window(mask)
    a = sim.operand(x, win)
    d = result_dtype(dtype, a)
    combine = alu.op_name(op, "loop_reduce")
    alu.binary(combine, "loop_reduce")
    tile = sim.result(sim.compute("convert", (d.name,), [a]), d, engine=Engine.VECTOR, reads=[a], window=win,
                      full_shape=a.full_shape)
    sim.pending.reduce = combine  # type: ignore[union-attr]
    return tile


# -- Tensor Engine ----------------------------------------------------------------------------------
@instruction("matmul")
def matmul(x: Any, y: Any, *, transpose_x: bool = False, mask: Any = None, **_: Any) -> Tensor:
    """x @ y (or x.T @ y): lowers to nc_matmul, with a Tensor Engine transpose of x unless transpose_x."""
    if not transpose_x:
        x = copy(_isa.nc_transpose(x))  # the transposed tile comes back to SBUF before it can be a matmul operand
    # nl.matmul takes tiles wherever they are: PSUM operands get the copy the compiler would insert.
    x, y = (copy(t) if _space_of(t) == MemorySpace.PSUM else t for t in (x, y))
    return _isa.nc_matmul(x, y, mask=mask, _op="matmul")


def _space_of(x: Any) -> MemorySpace | None:
    t = x.base if isinstance(x, View) else x
    if isinstance(t, Tensor):
        return t.alias.tensor.space if t.alias is not None else t.space
    return None


@instruction("transpose")
def transpose(x: Any, dtype: Any = None, mask: Any = None, **_: Any) -> Tensor:
    return _isa.nc_transpose(x, dtype=dtype, mask=mask)


# -- misc -------------------------------------------------------------------------------------------
def program_id(axis: int = 0) -> int:
    """Index of this SPMD program along `axis` (programs of a grid run one after another)."""
    program = active("program_id").program
    return program[axis] if axis < len(program) else 0


def num_programs(axis: int = 0) -> int:
    grid = active("num_programs").grid
    return grid[axis] if axis < len(grid) else 1


def program_ndim() -> int:
    return len(active("program_ndim").grid)


def nc(n: int) -> int:
    """nl.nc(n): spread a grid dimension over n NeuronCores; one simulated core runs them all."""
    return int(n)


def spmd_dim(*sizes: int) -> int:
    total = 1
    for size in sizes:
        total *= int(size)
    return total


def device_print(*_: Any, **__: Any) -> None:
    """Printing from the device is a no-op in the simulator."""


def broadcast_to(x: Any, shape: Any) -> Derived:
    return Derived(x, tuple(shape), "broadcast")


def where(condition: Any, x: Any, y: Any, dtype: Any = None, mask: Any = None, **_: Any) -> Tensor:
    sim = active("where").begin("where")
    win = mask_window(mask)
    c, a, b = (sim.operand(v, win) for v in (condition, x, y))
    d = result_dtype(dtype, a, b)
    values = sim.compute("where", (d.name,), [c, a, b])
    return sim.result(values, d, engine=Engine.VECTOR, reads=[r for r in (c, a, b) if isinstance(r, Access)],
                      window=win, full_shape=broadcast_full_shape(c, a, b))


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)

    def missing(*_: Any, **__: Any) -> Any:
        raise unsupported(f"nl.{name}")

    return missing


# -- tile methods and operators ---------------------------------------------------------------------
class TypedView(View):
    """`tensor.view(dtype)`: the whole tensor, which a load reads as `viewed_as` (types stored alike)."""

    __slots__ = ("viewed_as",)

    def __init__(self, base: Tensor, items: Any, viewed_as: dt.DType) -> None:
        super().__init__(base, items)
        self.viewed_as = viewed_as

    @property
    def dtype(self) -> dt.DType:
        return self.viewed_as


def _install_operators() -> None:
    def binop(fn: Any, reflected: bool = False) -> Any:
        if reflected:
            return lambda self, other: fn(other, self)
        return lambda self, other: fn(self, other)

    def iop(name: str) -> Any:
        def method(self: Any, other: Any) -> Any:
            if isinstance(self, View):
                return Accumulate(self, other, name)
            active(name).assign(self, (Ellipsis,), Accumulate(View(self, (Ellipsis,)), other, name))
            return self

        return method

    def getitem(self: Tensor, items: Any) -> View:
        return View(self, items)

    def setitem(self: Tensor, items: Any, value: Any) -> None:
        try:
            active("assign").assign(self, items, value)
        except (ValueError, TypeError, IndexError) as exc:
            raise NKICompileError("assign", f"writing {self.name!r}: {exc}") from exc

    def view_setitem(self: View, items: Any, value: Any) -> None:
        raise unsupported("assign", "assigning into a view of a view")

    def view_getitem(self: View, items: Any) -> View:
        # A view of a view: alias a temporary tensor onto the resolved region and index it.
        return View(Tensor.aliasing(self.access()), items)

    def t_broadcast(self: Any, shape: Any) -> Derived:
        return Derived(self, tuple(shape), "broadcast")

    def t_reshape(self: Any, shape: Any) -> Any:
        if isinstance(self, Tensor) and self.space == MemorySpace.HBM:
            t = Tensor(self.name, tuple(shape), self.dtype, self.buffer, data=self.data.reshape(shape),
                       initialised=self.init is None, scope=self.scope)
            if self.init is not None:
                t.init = self.init.reshape(shape)
            t.records = self.records
            return t
        return Derived(self, tuple(shape), "reshape")

    def t_view(self: Any, dtype: Any) -> View:
        # `hbm_tensor.view(nl.float8_e5m2)` reinterprets the bytes as another dtype (NkiTensor.view, NKI 0.6).
        # The simulator holds values, not bytes: it reads a tensor whose values are already held in the new
        # type's storage (an input built with dtype=nl.float8_e5m2, stored as float32) as that type, where a
        # load or DMA takes it, and refuses the rest.
        new = dt.as_dtype(dtype)
        if not (isinstance(self, Tensor) and self.space == MemorySpace.HBM):
            raise unsupported("view", "reinterpreting an on-chip tile's bytes; view the HBM tensor it came from")
        if new.storage != self.dtype.storage:
            raise unsupported("view", f"reinterpreting {self.dtype} bytes as {new}: the simulator holds values, "
                                      f"so only a view between types stored alike ({self.dtype.storage}) is simulated")
        return TypedView(self, (Ellipsis,), new)

    Tensor.view = t_view  # type: ignore[attr-defined]

    def derived_getitem(self: Derived, items: Any) -> View:
        # `tile.reshape(shape)[a:b, ...]` (the SDK's fully optimized matmul): the reshape of a tile stored
        # contiguously is a view of the same bytes, so it is indexed like a tile aliasing that view.
        if self.kind != "reshape" or not isinstance(self.source, (Tensor, View)):
            raise unsupported("index", f"indexing the result of {self.kind}; index the tile itself")
        acc = self.source.access() if isinstance(self.source, View) else self.source.access((Ellipsis,))
        array = acc.array.reshape(self.shape)
        init = acc.init.reshape(self.shape) if acc.init is not None else None
        if not np.shares_memory(array, acc.array) or (init is not None and not np.shares_memory(init, acc.init)):
            raise unsupported("index", "indexing a reshape of a tile that is not stored contiguously")
        reshaped = Access(acc.tensor, array, init, acc.box, tuple(self.shape), tuple(self.shape), acc.key, exact=False)
        return View(Tensor.aliasing(reshaped), items)

    Derived.__getitem__ = derived_getitem  # type: ignore[attr-defined]

    def t_transpose(self: Any) -> Derived:
        return Derived(self, tuple(reversed(self.shape)), "transpose")

    for cls in (Tensor, View, Derived):
        cls.__add__ = binop(add)
        cls.__radd__ = binop(add, True)
        cls.__sub__ = binop(subtract)
        cls.__rsub__ = binop(subtract, True)
        cls.__mul__ = binop(multiply)
        cls.__rmul__ = binop(multiply, True)
        cls.__truediv__ = binop(divide)
        cls.__rtruediv__ = binop(divide, True)
        cls.__pow__ = binop(power)
        cls.__neg__ = lambda self: multiply(self, -1.0)
        cls.broadcast_to = t_broadcast
        cls.T = property(t_transpose)
    for cls in (Tensor, View):
        cls.__iadd__ = iop("add")
        cls.__isub__ = iop("subtract")
        cls.__imul__ = iop("multiply")
        cls.__itruediv__ = iop("divide")
        cls.reshape = t_reshape
    Tensor.__getitem__ = getitem
    Tensor.__setitem__ = setitem
    View.__getitem__ = view_getitem
    View.__setitem__ = view_setitem
    Derived.reshape = t_reshape
    host_reads.install()
    axis_views.install()


_install_operators()
