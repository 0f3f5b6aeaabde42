"""Hand-built traces for the performance-model tests: the shapes a simulator would record for small kernels."""

from __future__ import annotations

from engine.platforms.nki.simulator.trace import Engine, LoopInfo, LoopKind, MemorySpace, TensorInfo, Trace


def hbm(trace: Trace, name: str, nbytes: int) -> int:
    return trace.add_tensor(TensorInfo(name, MemorySpace.HBM, (nbytes // 4,), "float32", -1, 0, nbytes))


def sbuf(trace: Trace, name: str, bytes_per_partition: int, space: MemorySpace = MemorySpace.SBUF) -> int:
    return trace.add_tensor(TensorInfo(name, space, (128, bytes_per_partition // 4), "float32", 0,
                                       bytes_per_partition, 128 * bytes_per_partition))


def streaming_kernel(tiles: int, free: int, *, kind: LoopKind = LoopKind.AFFINE, ops_per_tile: int = 1,
                     loads_per_tile: int = 1, resident: bool = False, engine: Engine = Engine.SCALAR) -> Trace:
    """out[t] = f(x[t]) tile by tile: load, `ops_per_tile` elementwise ops, store.

    `loads_per_tile` > 1 also loads the tile from extra copies of the input (redundant HBM traffic; copies,
    because the model, like the compiler, elides a repeated load of one region when SBUF can keep it). `resident` keeps every computed
    tile in one SBUF tensor that is read again at the end of the kernel (a working set that grows).
    """
    tr = Trace()
    tile_bytes = free * 4
    x = hbm(tr, "x", tiles * 128 * tile_bytes)
    copies = [x] + [hbm(tr, f"x_copy{k}", tiles * 128 * tile_bytes) for k in range(1, loads_per_tile)]
    out = hbm(tr, "out", tiles * 128 * tile_bytes)
    loop = tr.add_loop(LoopInfo(kind, tiles, 1))
    big = sbuf(tr, "resident", tiles * tile_bytes) if resident else -1
    for t in range(tiles):
        ctx = tr.context_id(((loop, t),))
        buf = sbuf(tr, f"in{t}", tile_bytes)
        lo = 0
        for src_tensor in copies:
            tr.append(engine=Engine.DMA, op="load", dtype="float32", partitions=128, free_elems=free,
                      hbm_read=128 * tile_bytes, sbuf_write=128 * tile_bytes, loop_ctx=ctx,
                      accesses=((src_tensor, False, 0, 1, t * 128 * tile_bytes, (t + 1) * 128 * tile_bytes),
                                (buf, True, 0, 128, lo, lo + tile_bytes)))
        src, src_lo = buf, lo
        for k in range(ops_per_tile):
            dst, dst_lo = (big, t * tile_bytes) if resident and k == 0 else (sbuf(tr, f"y{t}_{k}", tile_bytes), 0)
            tr.append(engine=engine, op="activation", dtype="float32", partitions=128, free_elems=free,
                      flops=128 * free, loop_ctx=ctx,
                      accesses=((src, False, 0, 128, src_lo, src_lo + tile_bytes),
                                (dst, True, 0, 128, dst_lo, dst_lo + tile_bytes)))
            src, src_lo = dst, dst_lo
        tr.append(engine=Engine.DMA, op="store", dtype="float32", partitions=128, free_elems=free,
                  hbm_write=128 * tile_bytes, sbuf_read=128 * tile_bytes, loop_ctx=ctx,
                  accesses=((src, False, 0, 128, src_lo, src_lo + tile_bytes),
                            (out, True, 0, 1, t * 128 * tile_bytes, (t + 1) * 128 * tile_bytes)))
    if resident:
        # A final reduction-like pass that reads the whole resident tensor keeps it live to the end.
        tr.append(engine=Engine.VECTOR, op="tensor_reduce", dtype="float32", partitions=128,
                  free_elems=tiles * free, accesses=((big, False, 0, 128, 0, tiles * tile_bytes),))
    return tr.freeze()


def dma_only_kernel(tiles: int, partitions: int, free: int, *, inner: int | None = None, stride: int = 1,
                    kind: LoopKind = LoopKind.AFFINE) -> Trace:
    """Copy `tiles` tiles of `partitions` x `free` fp32 from HBM to SBUF and back, nothing else.

    The input is a row-major (tiles * partitions, free * stride) tensor (or `inner` elements per row instead) and
    each partition row reads every `stride`-th element of its row: stride 1 is one contiguous buffer per
    partition, stride > 1 a gather of 4-byte runs. The same bytes move whatever the layout."""
    tr = Trace()
    row = inner if inner is not None else free * stride
    x = tr.add_tensor(TensorInfo("x", MemorySpace.HBM, (tiles * partitions, row), "float32", -1, 0,
                                 tiles * partitions * row * 4))
    out = hbm(tr, "out", tiles * partitions * free * 4)
    loop = tr.add_loop(LoopInfo(kind, tiles, 1))
    tile_bytes = partitions * free * 4
    for t in range(tiles):
        ctx = tr.context_id(((loop, t),))
        buf = tr.add_tensor(TensorInfo(f"b{t}", MemorySpace.SBUF, (partitions, free), "float32", 0, free * 4,
                                       tile_bytes))
        lo = t * partitions * row * 4
        hi = lo + ((partitions - 1) * row + (free - 1) * stride + 1) * 4
        tr.append(engine=Engine.DMA, op="load", dtype="float32", partitions=partitions, free_elems=free,
                  hbm_read=tile_bytes, sbuf_write=tile_bytes, loop_ctx=ctx,
                  accesses=((x, False, 0, 1, lo, hi), (buf, True, 0, partitions, 0, free * 4)))
        tr.append(engine=Engine.DMA, op="store", dtype="float32", partitions=partitions, free_elems=free,
                  hbm_write=tile_bytes, sbuf_read=tile_bytes, loop_ctx=ctx,
                  accesses=((buf, False, 0, partitions, 0, free * 4),
                            (out, True, 0, 1, t * tile_bytes, (t + 1) * tile_bytes)))
    return tr.freeze()


def reload_kernel(tiles: int, repeats: int, *, input_rows: int, free: int = 1024) -> Trace:
    """`repeats` passes over the same `tiles` tiles of x (each 128 x `free` fp32, loaded again every pass), one
    Scalar op per tile, every result stored: the loads repeat, the stores do not. x has `input_rows` rows of
    `free` elements; only the first tiles * 128 rows are read, so a larger x changes nothing but its size."""
    tr = Trace()
    tile_bytes = 128 * free * 4
    x = tr.add_tensor(TensorInfo("x", MemorySpace.HBM, (input_rows, free), "float32", -1, 0, input_rows * free * 4))
    out = hbm(tr, "out", repeats * tiles * tile_bytes)
    outer = tr.add_loop(LoopInfo(LoopKind.AFFINE, repeats, 1))
    inner = tr.add_loop(LoopInfo(LoopKind.AFFINE, tiles, 2))
    for r in range(repeats):
        for t in range(tiles):
            ctx = tr.context_id(((outer, r), (inner, t)))
            buf = sbuf(tr, f"x{r}_{t}", free * 4)
            y = sbuf(tr, f"y{r}_{t}", free * 4)
            tr.append(engine=Engine.DMA, op="load", dtype="float32", partitions=128, free_elems=free,
                      hbm_read=tile_bytes, sbuf_write=tile_bytes, loop_ctx=ctx,
                      accesses=((x, False, 0, 1, t * tile_bytes, (t + 1) * tile_bytes), (buf, True, 0, 128, 0, free * 4)))
            tr.append(engine=Engine.SCALAR, op="activation", dtype="float32", partitions=128, free_elems=free,
                      flops=128 * free, loop_ctx=ctx,
                      accesses=((buf, False, 0, 128, 0, free * 4), (y, True, 0, 128, 0, free * 4)))
            k = r * tiles + t
            tr.append(engine=Engine.DMA, op="store", dtype="float32", partitions=128, free_elems=free,
                      hbm_write=tile_bytes, sbuf_read=tile_bytes, loop_ctx=ctx,
                      accesses=((y, False, 0, 128, 0, free * 4), (out, True, 0, 1, k * tile_bytes, (k + 1) * tile_bytes)))
    return tr.freeze()


def ping_pong_kernel(tiles: int, free: int, *, pipelined: bool) -> Trace:
    """Per tile a chain Vector -> Scalar -> Vector: C (Vector, long) feeds A (Scalar, long) feeds B (Vector,
    short). In the plain program order C_t, A_t, B_t the Vector Engine waits for A_t before it reaches C_t+1;
    `pipelined` issues C_t+1 before A_t, B_t, as a software-pipelined kernel would."""
    tr = Trace()
    tile_bytes = free * 4
    loop = tr.add_loop(LoopInfo(LoopKind.AFFINE, tiles, 1))
    rows: list[list[dict]] = []
    for t in range(tiles):
        ctx = tr.context_id(((loop, t),))
        x, c, a, b = (sbuf(tr, f"{k}{t}", tile_bytes) for k in "xcab")
        def op(engine: Engine, name: str, elems: int, src: int, dst: int, ctx: int = ctx) -> dict:
            return dict(engine=engine, op=name, dtype="float32", partitions=128, free_elems=elems, loop_ctx=ctx,
                        accesses=((src, False, 0, 128, 0, tile_bytes), (dst, True, 0, 128, 0, tile_bytes)))
        rows.append([op(Engine.VECTOR, "tensor_scalar", free, x, c), op(Engine.SCALAR, "activation", free, c, a),
                     op(Engine.VECTOR, "tensor_scalar", free // 8, a, b)])
    order = ([rows[0][0]] + [r for t in range(tiles) for r in ((rows[t + 1][0],) if t + 1 < tiles else ())
                                                              + tuple(rows[t][1:])]) if pipelined else \
        [r for tile in rows for r in tile]
    for row in order:
        tr.append(**row)
    return tr.freeze()


def chain_kernel(ops: int, free: int, *, dependent: bool) -> Trace:
    """`ops` Vector tensor_tensor ops (not an op the compiler may move to Scalar) on 128 x `free` tiles, each
    reading the previous one's result (or all reading one input tile)."""
    tr = Trace()
    tile_bytes = free * 4
    src = sbuf(tr, "x", tile_bytes)
    for k in range(ops):
        dst = sbuf(tr, f"y{k}", tile_bytes)
        tr.append(engine=Engine.VECTOR, op="tensor_tensor", dtype="float32", partitions=128, free_elems=free,
                  accesses=((src, False, 0, 128, 0, tile_bytes), (dst, True, 0, 128, 0, tile_bytes)))
        if dependent:
            src = dst
    return tr.freeze()
