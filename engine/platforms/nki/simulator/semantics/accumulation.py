"""Queued PSUM accumulation: the Tensor Engine's `psum[...] += nisa.nc_matmul(...)` groups.

Matmuls accumulating into one PSUM region are queued and added, one product per instruction in issue
order (as PSUM accumulates them, in float32), when the region is next read or overwritten, at the end
of an outermost loop iteration, or at the end of the kernel. The queue holds views of the operand tiles,
not copies: a write to a tensor a queued matmul reads runs that group first (`Tensor.readers`).
"""

from __future__ import annotations

from engine.platforms.nki.simulator.semantics.semantics import LazyMatmul, add_product
from engine.platforms.nki.simulator.semantics.tensors import Access, Tensor

__all__ = ["LazyMatmul", "MatmulQueue"]


class MatmulQueue:
    """The queued groups of every PSUM tensor. A tensor's groups are `Tensor.deferred`: destination box ->
    (destination access, stationary operands, moving operands)."""

    def __init__(self) -> None:
        self.waiting: dict[int, Tensor] = {}  # id -> tensor with queued groups

    def add(self, dst: Access, mm: LazyMatmul, sources: list[Tensor]) -> None:
        """Queue `dst += mm`; `sources`: the tensors its operands are views of."""
        t = dst.tensor
        groups = t.deferred
        if groups is None:
            t.deferred = groups = {}
            self.waiting[id(t)] = t
        key = dst.box
        group = groups.get(key)
        if group is None:
            for other in groups:
                if not all(a_hi <= b_lo or b_hi <= a_lo for (a_lo, a_hi), (b_lo, b_hi) in zip(other, key, strict=True)):
                    # An overlapping region of another group: that one must be added first.
                    self.run(t)
                    groups = t.deferred = {}
                    self.waiting[id(t)] = t
                    break
            groups[key] = group = (dst, [], [])
        # Views, not copies: a write to an operand's tensor runs the group first (`run_readers`).
        stationary, moving = mm.fp32_operands()
        group[1].append(stationary)
        group[2].append(moving)
        for src in sources:
            if src.readers is None:
                src.readers = [t]
            else:
                src.readers.append(t)
        t.version += 1

    def run_readers(self, t: Tensor) -> None:
        """`t` is about to change: run the queued groups that read it."""
        readers = t.readers
        t.readers = None
        for reader in readers:  # type: ignore[union-attr]
            if reader.deferred:
                self.run(reader)

    def run(self, t: Tensor) -> None:
        """Add the queued products into `t`."""
        groups = t.deferred
        t.deferred = None
        self.waiting.pop(id(t), None)
        if not groups:
            return
        if t.readers:
            self.run_readers(t)
        # One product per queued matmul, added in issue order as PSUM accumulates them. Concatenating
        # the operands into one long-K product was 18-24% slower (one group of 40 products, measured
        # alone): the copies cost more than the calls.
        for dst, stationaries, movings in groups.values():
            acc = dst.array
            for stationary, moving in zip(stationaries, movings, strict=True):
                add_product(acc, stationary, moving)

    def run_all(self) -> None:
        """Run every queued group."""
        for t in list(self.waiting.values()):
            self.run(t)
