"""A catalog of source-to-source rewrites of Triton solutions (a module of `@triton.jit` kernels and the
host entry point that launches them), on the Python AST, for the offline agent on GPU platforms.

Like the NKI catalog (`engine.platforms.nki.rewrites`), each `Rewrite` lists its sites and rewrites one; a
rewrite that does not recognise a kernel's shape reports no site, and every result is evaluated like any
other candidate (a wrong rewrite is an incorrect candidate, and a negative lesson).

    source.py    what the rewrites know about a module: jit kernels, launches, autotune, arange offsets
    access.py    mask_out_of_bounds, contiguity_hints
    rows.py      rows_per_program (one row per program -> ROW_BLOCK rows per program, tail rows masked)
    values.py    where a launch value is written (a literal, or the assignments of the name passed)
    launch.py    larger_blocks, smaller_blocks, more_warps, fewer_warps, more_stages, fewer_stages
    autotune.py  add_autotune, widen_autotune
    catalog.py   TRITON_CATALOG (every rewrite with its title and lesson) and TRITON_BY_NAME
"""

from engine.platforms.triton.rewrites.catalog import TRITON_BY_NAME, TRITON_CATALOG

__all__ = ["TRITON_BY_NAME", "TRITON_CATALOG"]
