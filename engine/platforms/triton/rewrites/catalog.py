"""The offline agent's Triton catalog: every rewrite with its name, its memory-entry title and its lesson.

The order is the Planner's order when the memory says nothing: the correctness fix first, then the
changes that usually help a memory-bound kernel on a GPU, then their inverses (worth trying, less often
right).
"""

from __future__ import annotations

from engine.agents.rewrites import Rewrite
from engine.platforms.triton.rewrites.access import visit_hints, visit_masks
from engine.platforms.triton.rewrites.autotune import visit_add_autotune, visit_widen_autotune
from engine.platforms.triton.rewrites.launch import (
    visit_fewer_stages,
    visit_fewer_warps,
    visit_larger_blocks,
    visit_more_stages,
    visit_more_warps,
    visit_smaller_blocks,
)
from engine.platforms.triton.rewrites.rows import visit_rows_per_program

TRITON_CATALOG: tuple[Rewrite, ...] = (
    Rewrite("mask_out_of_bounds", "Mask loads and stores at the edge of the data",
            "A block's offsets run past the end of a tensor whose size is not a multiple of the block: an "
            "unmasked tl.load reads memory that is not the tensor's and an unmasked tl.store writes it. "
            "`mask=offs < n` on every access (and `other=0.0` on loads, the neutral value of a sum; a max needs "
            "-inf) keeps every size correct; on a GPU the mask costs a compare per element, nothing measurable "
            "for a memory-bound kernel.", visit_masks, repeatable=False),
    Rewrite("contiguity_hints", "Tell the compiler the offsets are aligned and contiguous",
            "`offs = pid * BLOCK + tl.arange(0, BLOCK)` is BLOCK-aligned and contiguous, but the compiler cannot "
            "always prove it; `tl.max_contiguous(tl.multiple_of(offs, BLOCK), BLOCK)` says so, and lets it "
            "issue wide (128-bit) vectorized loads and stores instead of per-element ones.", visit_hints),
    Rewrite("rows_per_program", "Handle several rows per program",
            "A kernel launched with one program per row of a narrow row (RMSNorm over 128 values) spends its "
            "time starting hundreds of thousands of tiny programs, each with a few hundred bytes in flight. "
            "Handling ROW_BLOCK rows per program in one [ROW_BLOCK, BLOCK] block, reductions along axis 1 and "
            "the last program's tail rows masked, cuts the programs by ROW_BLOCK and fills the memory pipe; "
            "the grid must shrink by the same factor.", visit_rows_per_program, repeatable=False),
    Rewrite("larger_blocks", "Use larger blocks",
            "Each program handles one block; a larger block means fewer programs, more bytes in flight per "
            "program and wider vector accesses, which helps memory-bound kernels until registers run out "
            "(spills) or too few programs are left to fill the GPU's SMs. Correct only when the grid and the "
            "masks follow the block size.", visit_larger_blocks, repeatable=False),
    Rewrite("more_warps", "Launch with more warps per program",
            "More warps per program (num_warps) give a large block more threads to issue its loads and hide "
            "memory latency; with a small block they only add synchronization and register pressure.",
            visit_more_warps, repeatable=False),
    Rewrite("more_stages", "Pipeline the loop with more stages",
            "num_stages sets how many iterations of a loop's loads are in flight at once (software "
            "pipelining through shared memory); more stages hide memory latency in loops over K or over a "
            "sequence, at the price of shared memory per stage.", visit_more_stages, repeatable=False),
    Rewrite("add_autotune", "Let @triton.autotune choose the block size and warps",
            "A block size and num_warps fixed in the launch fit one shape and one GPU; @triton.autotune over "
            "a few configurations (keyed by the sizes) times each on the first call and keeps the fastest. "
            "The grid must then read the chosen block from its META argument.", visit_add_autotune,
            repeatable=False),
    Rewrite("widen_autotune", "Give the autotuner larger configurations to try",
            "The autotuner only picks among the configurations it is given; adding one with doubled blocks "
            "and one with doubled warps lets it find a faster one for large shapes.", visit_widen_autotune,
            repeatable=False),
    Rewrite("smaller_blocks", "Use smaller blocks",
            "Smaller blocks mean more programs: better occupancy and tail balance when the problem is small, "
            "fewer registers per program. Wrong when one program must cover a whole row (a reduction over "
            "the block).", visit_smaller_blocks, repeatable=False),
    Rewrite("fewer_warps", "Launch with fewer warps per program",
            "Fewer warps per program suit small blocks: less synchronization, and more programs resident per "
            "SM.", visit_fewer_warps, repeatable=False),
    Rewrite("fewer_stages", "Pipeline the loop with fewer stages",
            "Fewer pipeline stages free shared memory (allowing larger blocks or more resident programs) when "
            "the loop's loads are already hidden.", visit_fewer_stages, repeatable=False),
)

TRITON_BY_NAME = {rewrite.name: rewrite for rewrite in TRITON_CATALOG}
