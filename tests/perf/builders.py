"""Hand-built traces for the performance-model tests: the shapes a simulator would record for small kernels."""

from __future__ import annotations

from benchmark.nki.trace import Engine, LoopInfo, LoopKind, MemorySpace, TensorInfo, Trace


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
