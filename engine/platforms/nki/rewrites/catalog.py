"""The offline agent's catalog: every rewrite with its name, its memory-entry title and its lesson."""

from __future__ import annotations

from engine.agents.rewrites import Rewrite
from engine.platforms.nki.rewrites.blocking import visit_interleave_iterations, visit_share_across_blocks
from engine.platforms.nki.rewrites.engines import visit_scale_on_scalar_engine
from engine.platforms.nki.rewrites.fusion import (
    visit_activation_reduce,
    visit_fold_scale,
    visit_scalar_tensor_tensor,
)
from engine.platforms.nki.rewrites.loads import visit_hoist_loads, visit_reuse_loads
from engine.platforms.nki.rewrites.loops import visit_interchange, visit_larger_tiles, visit_smaller_tiles
from engine.platforms.nki.rewrites.scalar_reduce import visit_tensor_scalar_reduce
from engine.platforms.nki.rewrites.stores import visit_batch_stores
from engine.platforms.nki.rewrites.transfers import visit_hbm_round_trip, visit_psum_copy

# Catalog order breaks ties in the offline Planner: the rewrites that pay at full NKIBench shapes come first
# (docs/benchmarks.md, "Offline agent at full size"), the tile-size changes that mostly pay at mini shapes last.
CATALOG: tuple[Rewrite, ...] = (
    Rewrite("share_across_blocks", "Load a shared operand once for several output blocks",
            "An inner loop reloaded a tile that does not depend on the outer loop's index (a matmul's rhs, read "
            "again for every block of output rows) and the operand is too large to stay in SBUF. Processing "
            "several outer iterations together (unroll-and-jam: their own tiles and accumulators side by side) "
            "loads each shared tile once for all of them, dividing that operand's HBM and DMA traffic by the "
            "group size, as long as the group's tiles fit SBUF and its accumulators fit PSUM.",
            visit_share_across_blocks, repeatable=False),
    Rewrite("scale_on_scalar_engine", "Move constant multiplies to the Scalar Engine",
            "The Vector Engine ran multiplies of a tile by a constant (or by a per-partition column, or by itself) "
            "while the Scalar Engine was mostly idle. The Scalar Engine's activation computes f(data * scale) "
            "with f = copy (or square) at the same rate, so moving those multiplies there balances the two "
            "engines; it pays when the Vector Engine is the bottleneck.", visit_scale_on_scalar_engine),
    Rewrite("batch_stores", "Store a whole output row with one DMA",
            "A loop stored one column block of the same output rows per iteration: many DMAs, each paying a fixed "
            "latency and a per-descriptor cost on short contiguous runs. Writing the blocks into one SBUF row tile "
            "and storing it once after the loop moves the same bytes in fewer, longer transfers, as long as the "
            "row tile fits SBUF.", visit_batch_stores, repeatable=False),
    Rewrite("interleave_iterations", "Interleave two independent iterations so engines overlap",
            "Each iteration ran a matmul and then Vector/Scalar Engine work on its result, so one engine waited for "
            "the other. Writing two independent iterations side by side, statement by statement, gives each engine "
            "the other iteration's work to do meanwhile, at the cost of twice the live tiles.",
            visit_interleave_iterations, repeatable=False),
    Rewrite("hoist_invariant_loads", "Load loop-invariant tiles once",
            "A tile whose address does not depend on a loop's index was loaded from HBM again in every iteration "
            "of that loop. Loading it once before the loop (or caching all tiles of an inner loop nest in SBUF "
            "when they fit) removes repeated DMA traffic; it helps whenever the loop runs more than once and the "
            "cached tiles fit in SBUF.", visit_hoist_loads),
    Rewrite("reuse_loaded_tiles", "Reuse a tile that is already in SBUF",
            "The same HBM region was loaded twice while the first copy was still live. Reading the first copy "
            "removes a DMA and its SBUF write.", visit_reuse_loads),
    Rewrite("fold_scale_into_activation", "Fold a constant multiply into the activation's scale",
            "A multiply (or divide) by a compile-time constant right before an activation function is free inside "
            "the Scalar Engine's activation instruction, which computes f(data * scale + bias). Folding it removes "
            "one instruction and one intermediate tile.", visit_fold_scale),
    Rewrite("fuse_scale_and_add", "Fuse scale-then-add into one scalar_tensor_tensor",
            "A tile multiplied by a constant and then added to (or subtracted from) another tile takes two Vector "
            "Engine passes; nisa.scalar_tensor_tensor does both in one instruction, saving a pass over the data and "
            "an instruction's fixed cost.", visit_scalar_tensor_tensor),
    Rewrite("reduce_inside_activation", "Sum rows inside the activation instruction",
            "A row sum of an activation's output was a separate Vector Engine reduction. nisa.activation_reduce "
            "accumulates the sum while the Scalar Engine writes the activation, removing a pass over the tile.",
            visit_activation_reduce),
    Rewrite("fuse_scalar_reduce", "Reduce rows inside the tensor_scalar that computes them (NKI 0.6)",
            "An elementwise operation with a scalar (a scale, an offset) was followed by a separate Vector Engine "
            "reduction of its result along the free axis (a row max or row sum). NKI 0.6's "
            "nisa.tensor_scalar_reduce computes both in one instruction, reading the tile once instead of twice. "
            "It applies to current-generation (nki package) kernels whose tile is a float32 2-D tile, where the "
            "fused reduction gives exactly the same values.", visit_tensor_scalar_reduce),
    Rewrite("larger_free_tiles", "Use larger free-dimension tiles",
            "Each instruction and each DMA has a fixed cost; larger tiles along the free dimension amortize it, "
            "as long as the tiles fit in SBUF and the shape divides evenly.", visit_larger_tiles, repeatable=False),
    Rewrite("smaller_free_tiles", "Use smaller free-dimension tiles",
            "Smaller free-dimension tiles mean more instructions and DMAs, each with its fixed cost, but when a loop "
            "has only a few large tiles they let the load of one tile, the compute on another and the store of a "
            "third overlap (pipelining), and they keep live data within SBUF.", visit_smaller_tiles,
            repeatable=False),
    Rewrite("interchange_loops", "Interchange two independent loops",
            "Swapping a perfect nest of independent loops changes which tiles are consecutive; it can improve reuse "
            "or DMA order, and is neutral when the body is symmetric.", visit_interchange, repeatable=False),
    Rewrite("drop_hbm_round_trip", "Keep a tile in SBUF instead of a round trip through HBM",
            "A tile was stored to a scratch HBM tensor the kernel declared itself and loaded back from the same "
            "region, unchanged in between. Reading the SBUF tile that was stored removes the load's DMA, and the "
            "store's too when nothing else reads the scratch tensor: two HBM transfers and their latency.",
            visit_hbm_round_trip),
    Rewrite("drop_psum_copy", "Let compute engines read PSUM instead of copying it to SBUF",
            "A PSUM tile (a matmul or transpose result) was copied into SBUF although the copy only fed Vector or "
            "Scalar Engine instructions, which can read PSUM themselves. Reading PSUM directly removes a copy "
            "instruction and an SBUF tile; a DMA or a matmul still needs the copy, since they read SBUF.",
            visit_psum_copy),
)

BY_NAME = {rewrite.name: rewrite for rewrite in CATALOG}
