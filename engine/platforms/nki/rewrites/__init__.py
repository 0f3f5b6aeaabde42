"""A catalog of known, semantics-preserving rewrites of NKI kernel source, on the Python AST.

Each `Rewrite` finds its *sites* in a kernel (places where it applies) and transforms one site. The
offline agent proposes sites as plans and applies them; the evaluator then checks every result like any
other candidate, so a rewrite that is wrong for some kernel simply produces an incorrect candidate.

The rewrites recognise the two styles the product sees: our NKIBench baselines (whole-tile `nl.load`,
`nl.<op>` calls, slices, `_even_tile` tile sizes) and compiler-style kernels (pre-declared
`nl.ndarray` buffers written through subscripts). A rewrite that does not recognise a kernel's shape
reports no site; it never guesses.

    rewrite.sites(source) -> list[Site]           where it applies (empty: it does not)
    rewrite.apply(source, index) -> str           the source with site `index` rewritten

The package, read in this order:

    kernel.py     Kernel (the parsed kernel the visitors work on) and the shared AST helpers (what a
                  rewrite is, `Rewrite` and `Site`, is the agents' own: engine/agents/rewrites.py)
    fusion.py     fold_scale_into_activation, fuse_scale_and_add, reduce_inside_activation
    scalar_reduce.py  fuse_scalar_reduce (NKI 0.6 kernels only: nisa.tensor_scalar_reduce)
    loads.py      hoist_invariant_loads, reuse_loaded_tiles
    loops.py      larger_free_tiles, smaller_free_tiles, interchange_loops
    transfers.py  drop_hbm_round_trip, drop_psum_copy
    blocking.py   share_across_blocks, interleave_iterations (unroll-and-jam of an outer loop)
    engines.py    scale_on_scalar_engine
    stores.py     batch_stores
    catalog.py    CATALOG (every rewrite with its title and lesson) and BY_NAME
"""

from engine.platforms.nki.rewrites.catalog import BY_NAME, CATALOG

__all__ = ["BY_NAME", "CATALOG"]
