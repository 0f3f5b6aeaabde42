"""Block storage for on-chip tensors with leading block axes, and the recycling of blocks that look dead.

Compiler-style kernels declare on-chip tensors with leading block axes (`(86, 2, par_dim(128), 1024)`)
and give every loop iteration its own block, so a kernel writes gigabytes of fresh memory that the
device holds in a few megabytes. Such a tensor stores one array per block (`Tensor.blocks`: block key ->
`Block`), made when the block is first touched. At the end of every iteration of a tensor's home loop
(liveness.py; the outermost loop when the source does not tell), the blocks of it touched in that
iteration are *retired*: they keep their values, and touching one again revives it. Once more than
`RETIRED_BLOCK_BYTES` are retired, the oldest are *evicted*, blocks retired once before blocks revived
at least once: their arrays are reused for new blocks of the same shape (init masks cleared, or refilled
for `nl.zeros`/`nl.full` tensors). Touching an evicted block, a tile aliasing one, or a blocked tensor
across several blocks raises `BlockRecyclingMiss`, and the simulation starts over with plain storage,
so results never depend on the guess.

What the rest of the simulator asks of a `BlockRecycler`:
- the runtime: `stores_by_block` and `adopt` (a declaration), `end_iteration` (a home loop's iteration ended);
- a tensor access (tensors.py): `block` (the block an access cuts into) and `revisit` (a tile aliasing one);
- a write (runtime.py): `mark_written` (which elements of a block are written now);
- a split loop (parallel.py): `take`, `mask`, `adopt_shared` and `share_new_blocks`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from engine.platforms.nki.simulator.errors import BlockRecyclingMiss
from engine.platforms.nki.simulator.semantics.addressing import apply_recipe
from engine.platforms.nki.simulator.semantics.tensors import ON_CHIP, Access, Buffer, ParDim, Tensor
from engine.platforms.nki.simulator.speed.liveness import LIVE

# Retired blocks kept with their values before their storage is reused.
RETIRED_BLOCK_BYTES = 64 * 2**20
_SCALARS = (int, float, bool, np.generic)


class Block:
    """The storage of one block of a blocked tensor."""

    __slots__ = ("data", "init", "retired", "revived", "mask", "shared")

    def __init__(self, data: Any, init: np.ndarray | None, mask: np.ndarray | None = None, *,
                 retired: bool = False, shared: bool = False) -> None:
        self.data = data
        # Which elements are written: None once every element is (or for a filled tensor); a read-only
        # all-False view while nothing is; else `mask`, the mask's storage (made at the first partial
        # write, kept when the block's storage is reused).
        self.init = init
        self.mask = mask
        self.retired = retired  # its home iteration ended: values kept until it is evicted
        self.revived = False  # touched again after it was retired (evicted after blocks retired only once)
        self.shared = shared  # storage a split loop's two processes share: never given to another tensor


# An evicted block. Marked retired, so that an access's quick check sends it to the recycler, which raises.
EVICTED = Block(None, None, retired=True)


class Arena:
    """Zeroed storage for many small, long-lived arrays, carved from large chunks.

    A block is a few hundred KiB; allocated on its own, every 4 KiB page of it faults on first touch
    (measured here: 2.6-3.4 s per GiB of 256 KiB blocks). numpy asks for transparent huge pages on
    allocations of 4 MiB and more, so blocks carved from one 64 MiB chunk fault a 2 MiB page at a time
    (0.9-1.3 s per GiB, same machine and load). Chunks are never freed piecemeal: only storage that
    lives until the simulation ends comes from here."""

    CHUNK_BYTES = 64 * 2**20
    ALIGN = 64

    def __init__(self) -> None:
        self.chunk: np.ndarray | None = None
        self.offset = 0

    def zeros(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if nbytes * 4 > self.CHUNK_BYTES:  # big enough for numpy's own huge-page allocation
            return np.zeros(shape, dtype=dtype)
        if self.chunk is None or self.offset + nbytes > self.CHUNK_BYTES:
            self.chunk = np.zeros(self.CHUNK_BYTES, dtype=np.uint8)
            self.offset = 0
        start = self.offset
        self.offset = start + (nbytes + self.ALIGN - 1) // self.ALIGN * self.ALIGN
        return self.chunk[start:start + nbytes].view(dtype).reshape(shape)


class BlockRecycler:
    """Stores blocked tensors block by block and reuses the storage of blocks that are dead (see above)."""

    def __init__(self, retired_limit: int | None = None) -> None:
        self.retired_limit = RETIRED_BLOCK_BYTES if retired_limit is None else retired_limit
        self.free: dict[tuple, list[tuple[np.ndarray, np.ndarray | None]]] = {}
        # Retired blocks in retirement order: retired once, and revived ones.
        self.retired: dict[tuple[int, tuple[int, ...]], tuple[Tensor, tuple[int, ...], Block]] = {}
        self.retired_revived: dict[tuple[int, tuple[int, ...]], tuple[Tensor, tuple[int, ...], Block]] = {}
        self.retired_bytes = 0
        # Blocks touched since their home loop's iteration began, per home (None: not known, outermost).
        self.touched: dict[int | None, list[tuple[Tensor, tuple[int, ...], Block]]] = {}
        self.arena = Arena()
        self.home: dict[int, int | None] = {}  # id(tensor) -> its home loop's line (liveness.py)
        # A split loop's child: new blocks of the tensors whose values go to the parent are made in the
        # memory the two share (`share_new_blocks`), so handing them over copies nothing.
        self.outgoing: Callable[[Tensor], bool] | None = None
        self.outgoing_arena: Any = None

    # -- declarations -----------------------------------------------------------------------------
    @staticmethod
    def stores_by_block(shape: tuple[Any, ...], buffer: Buffer, fill: Any) -> bool:
        """Whether a declared tensor is stored block by block: on chip, with leading block axes before its
        par_dim, and unfilled or filled with a scalar."""
        return (buffer.space in ON_CHIP and (fill is None or isinstance(fill, _SCALARS))
                and not any(isinstance(s, ParDim) for s in shape[:1]) and any(isinstance(s, ParDim) for s in shape))

    def adopt(self, t: Tensor, home: int | None = None) -> None:
        """Give an on-chip tensor with leading block axes per-block storage. `home`: the line of the loop
        whose iterations its blocks die with, LIVE, or None when the source does not tell."""
        t.data = None
        t.init = None
        t.blocks = {}
        t.recycler = self
        self.home[id(t)] = home

    # -- accesses ---------------------------------------------------------------------------------
    def block(self, t: Tensor, key: tuple[int, ...]) -> Block:
        """The block an access of `t` cuts into, when it is not a live one: made now, or revived."""
        block = t.blocks.get(key)  # type: ignore[union-attr]
        if block is None:
            return self.take(t, key)
        if block is EVICTED:
            raise BlockRecyclingMiss(f"block {key} of tensor {t.name!r} is used after it was recycled")
        if block.retired:
            self.revive(t, key, block)
        return block

    def revisit(self, t: Tensor, key: tuple[int, ...]) -> None:
        """A tile aliasing block `key` of `t` is used again: the block must still hold its values."""
        block = t.blocks.get(key)  # type: ignore[union-attr]
        if block is None or block is EVICTED:
            raise BlockRecyclingMiss(f"a tile aliasing a recycled block of {t.name!r} is used")
        if block.retired:
            self.revive(t, key, block)

    def mark_written(self, t: Tensor, dst: Access) -> None:
        """`dst`, an access into one block of `t`, was written: mark its elements (a write of the whole
        block drops the block's mask, so later accesses skip it)."""
        block = t.blocks[dst.key]  # type: ignore[index]
        size = block.data.size
        whole = size == dst.array.size and dst.exact and _volume(dst.box) == size
        if dst.init.flags.writeable:  # type: ignore[union-attr]
            dst.init[...] = True  # type: ignore[index]
        elif not whole:
            dst.init = apply_recipe(self.mask(block), dst.recipe)  # type: ignore[arg-type]
            dst.init[...] = True
        if whole:
            block.init = dst.init = None

    def take(self, t: Tensor, key: tuple[int, ...]) -> Block:
        """A new block `key` of `t`: reused storage of an evicted block of the same shape, else fresh."""
        shape = t.shape[len(key):]
        storage = np.dtype(t.dtype.storage)
        fill = t.fill
        free = self.free.get((shape, storage))
        shared = False
        if free:
            data, mask = free.pop()
            if fill is not None:
                data.fill(fill)
        else:
            shared = self.outgoing is not None and self.outgoing(t)
            arena = self.outgoing_arena if shared else self.arena
            data, mask = arena.zeros(shape, storage), None
            if fill is not None and fill != 0:
                data.fill(fill)
        # A block of an uninitialised tensor starts with nothing written: a read-only view of False, so
        # reads fail without touching memory; the first write drops it (the whole block) or stores a
        # mask (part of it; `mark_written`). The old values of a reused block stay, unreadable.
        block = Block(data, None if fill is not None else _nothing_written(shape), mask, shared=shared)
        t.blocks[key] = block  # type: ignore[index]
        self._touch(t, key, block)
        return block

    def mask(self, block: Block) -> np.ndarray:
        """A block's first partial write: its init mask, all False, as real storage."""
        mask = block.mask
        if mask is None:
            mask = block.mask = self.arena.zeros(block.data.shape, np.dtype(np.bool_))
        else:
            mask.fill(False)
        block.init = mask
        return mask

    def _touch(self, t: Tensor, key: tuple[int, ...], block: Block) -> None:
        home = self.home.get(id(t))
        if home == LIVE:
            return  # never retired
        touched = self.touched.get(home)
        if touched is None:
            self.touched[home] = touched = []
        touched.append((t, key, block))

    def revive(self, t: Tensor, key: tuple[int, ...], block: Block) -> None:
        (self.retired_revived if block.revived else self.retired).pop((id(t), key))
        block.retired = False
        block.revived = True
        self.retired_bytes -= _block_bytes(block)
        self._touch(t, key, block)

    # -- the end of an iteration ------------------------------------------------------------------
    def end_iteration(self, home: int | None) -> None:
        """An iteration of the loop at line `home` ended (None: of an outermost loop, which ends every
        home): retire the blocks whose home it is, then evict the oldest beyond the limit. Blocks that
        queued matmuls still write or read stay touched until a later end."""
        homes = list(self.touched) if home is None else [home]
        for h in homes:
            touched = self.touched.get(h)
            if not touched:
                continue
            kept = []
            for t, key, block in touched:
                if block.retired:
                    continue
                if t.deferred or (t.readers and any(r.deferred for r in t.readers)):
                    kept.append((t, key, block))
                    continue
                block.retired = True
                (self.retired_revived if block.revived else self.retired)[(id(t), key)] = (t, key, block)
                self.retired_bytes += _block_bytes(block)
            self.touched[h] = kept
        while self.retired_bytes > self.retired_limit and (self.retired or self.retired_revived):
            queue = self.retired or self.retired_revived
            t, key, block = queue.pop(next(iter(queue)))
            self.retired_bytes -= _block_bytes(block)
            t.blocks[key] = EVICTED  # type: ignore[index]
            if not block.shared:  # a block in shared memory stays its tensor's
                self.free.setdefault((block.data.shape, block.data.dtype), []).append((block.data, block.mask))

    # -- a split loop (parallel.py) ---------------------------------------------------------------
    def share_new_blocks(self, arena: Any, outgoing: Callable[[Tensor], bool]) -> None:
        """In a split loop's child: make the new blocks of the tensors `outgoing` names in `arena`, memory
        the parent shares (`parallel.Exchange`)."""
        self.outgoing = outgoing
        self.outgoing_arena = arena

    def adopt_shared(self, t: Tensor, key: tuple[int, ...], data: np.ndarray) -> None:
        """Block `key` of `t`, wholly written by a split loop's child in shared memory, kept in place."""
        block = t.blocks[key] = Block(data, None, shared=True)  # type: ignore[index]
        self._touch(t, key, block)


@functools.lru_cache(maxsize=1024)
def _nothing_written(shape: tuple[int, ...]) -> np.ndarray:
    """A read-only all-False init mask of `shape` that owns no memory, shared by every fresh block."""
    return np.broadcast_to(np.False_, shape)


def _block_bytes(block: Block) -> int:
    return block.data.nbytes + (block.mask.nbytes if block.mask is not None else 0)


def _volume(box: tuple[tuple[int, int], ...]) -> int:
    n = 1
    for lo, hi in box:
        n *= hi - lo
    return n
