"""Garbage stays where nobody looks (issue 34): an instruction computing partition by partition may read
partitions nothing wrote, as the device and AWS's simulator do (never-written memory is garbage; AWS's simulator
fills it with NaN, nki/guides/nki_simulator.rst), and those partitions of its result stay unwritten, so that
reading them is still the error. nki-samples' contributed max-pooling kernel reduces two rows its load never
wrote and drops them at the store: correct on the device, refused here before."""

from __future__ import annotations

import numpy as np
import pytest

from engine.platforms.nki.simulator import NKIRuntimeError, simulate
from engine.platforms.nki.simulator.semantics import namespaces
from engine.platforms.nki.simulator.verification.replay import replay

MODS = namespaces.build()
nl = MODS["neuronxcc.nki.language"]


def _pool_rows(x, store_rows):
    """Load the first 6 rows of x as (row, window, column) tiles, max over each 3-row window with a mask of 8
    rows (two more than were loaded: the max-pooling kernel's pattern), store `store_rows` rows."""
    out = nl.ndarray((8, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_k, i_f = nl.mgrid[0:8, 0:3, 0:x.shape[1]]
    tile = nl.load(x[i_p + i_k, i_f], mask=(i_p < 6))
    pooled = nl.max(tile[i_p, i_k, i_f], axis=[1], mask=(i_p < 8))
    i_o, i_c = nl.mgrid[0:8, 0:x.shape[1]]
    nl.store(out[i_o, i_c], value=pooled, mask=(i_o < store_rows))
    return out


def _rows_max(x):
    return np.stack([x[r:r + 3].max(axis=0) for r in range(6)])


def test_a_reduction_over_never_written_rows_that_the_store_drops_runs_and_replays(rng):
    x = rng.standard_normal((10, 16)).astype(np.float32)
    sim = simulate(lambda a: _pool_rows(a, 6), [x], record_program=True)
    np.testing.assert_array_equal(sim.outputs[0][:6], _rows_max(x))
    assert np.isnan(sim.outputs[0][6:]).all()  # never written: an HBM output reads back NaN there
    y = rng.standard_normal((10, 16)).astype(np.float32)
    again = replay(sim.program, [y], trace=sim.trace)  # the verifier applies the same rule
    np.testing.assert_array_equal(again.outputs[0][:6], _rows_max(y))


def _into_values(x):
    out = nl.ndarray((4, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    part = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf, name="part")
    part[0:2, :] = nl.load(x[0:2, :])
    kept = nl.zeros((4, 8), dtype=nl.float32, buffer=nl.sbuf)  # holds values in every row
    kept[...] = nl.exp(part)
    nl.store(out, value=kept)
    return out


def test_rows_computed_from_never_written_ones_are_an_error_where_they_are_read_or_would_overwrite_values(rng):
    x = rng.standard_normal((10, 16)).astype(np.float32)
    with pytest.raises(NKIRuntimeError, match="store at line .*: reads uninitialised memory of tensor 'max_"):
        simulate(lambda a: _pool_rows(a, 8), [x])
    # the rows of `kept` hold values: garbage cannot stay unwritten there, so the read that made it is the error
    with pytest.raises(NKIRuntimeError, match="exp at line .*: reads uninitialised memory of tensor 'part'"):
        simulate(_into_values, [x[:4, :8].copy()])
