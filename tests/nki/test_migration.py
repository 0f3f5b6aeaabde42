"""Migrating legacy neuronxcc.nki kernels to the nki package (NKI 0.6), following AWS's migration guides."""

from __future__ import annotations

import types

import numpy as np
import pytest

from engine.platforms.nki.generations import CURRENT, kernel_generation
from engine.platforms.nki.migration import MigrationError, migrate_source
from engine.platforms.nki.simulator import install, simulate
from engine.platforms.nki.suites.loader import load_suite

SUITE = load_suite()


def _module(source: str, name: str) -> types.ModuleType:
    install()
    module = types.ModuleType(name)
    exec(compile(source, f"<{name}>", "exec"), module.__dict__)  # noqa: S102 - our own test kernels
    return module


def _inputs(slug: str) -> list:
    reference = _module(SUITE.problem(slug).reference_source("mini"), f"reference_{slug}")
    np.random.seed(0)
    arrays = reference.transform_to_nki_inputs(reference.get_inputs())
    return [a[()] if isinstance(a, np.ndarray) and a.ndim == 0 else a for a in arrays]  # scalars as the pipeline passes them


def _outputs(source: str, name: str, inputs: list) -> list[np.ndarray]:
    kernel = _module(source, name).kernel
    copies = [np.copy(a) if isinstance(a, np.ndarray) else a for a in inputs]
    return [np.asarray(out) for out in simulate(kernel, copies, platform="trn1").outputs]


@pytest.mark.parametrize("slug", [spec.slug for spec in SUITE.problems])
def test_every_nkibench_baseline_migrates_to_nki_0_6_and_computes_the_same_bits(slug):
    legacy = SUITE.problem(slug).baseline_for("mini")
    migration = migrate_source(legacy)
    assert kernel_generation(migration.source) == CURRENT
    assert "neuronxcc" not in migration.source
    assert migration.changes and all(change.line > 0 and change.guide for change in migration.changes)
    inputs = _inputs(slug)
    before, after = _outputs(legacy, f"{slug}_legacy", inputs), _outputs(migration.source, f"{slug}_current", inputs)
    assert len(before) == len(after)
    for old, new in zip(before, after, strict=True):
        assert old.dtype == new.dtype and old.tobytes() == new.tobytes()


LEGACY_HEAD = "import neuronxcc.nki as nki\nimport neuronxcc.nki.language as nl\nimport neuronxcc.nki.isa as nisa\n"


def test_isa_calls_take_their_destination_first_and_fresh_results_are_declared():
    source = LEGACY_HEAD + (
        "@nki.jit(mode='simulation')\n"
        "def kernel(a):\n"
        "    out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)\n"
        "    t = nl.load(a)\n"
        "    e = nisa.activation(op=nl.exp, data=t, dtype=nl.float32)\n"
        "    acc = nl.zeros((128, 64), dtype=nl.float32, buffer='psum')\n"
        "    acc += nisa.nc_matmul(t[:, 0:128], e)\n"
        "    res = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)\n"
        "    res[...] = nisa.tensor_copy(acc, dtype=nl.float32)\n"
        "    nl.store(out, value=nl.copy(nisa.nc_transpose(res[0:64, 0:64])))\n"
        "    return out\n")
    migrated = migrate_source(source).source
    assert "@nki.jit\n" in migrated  # mode= dropped
    assert "e = nl.ndarray(t.shape, dtype=nl.float32, buffer=nl.sbuf)\n    nisa.activation(e, op=nl.exp, data=t)" in migrated
    assert "nisa.nc_matmul(acc, t[:, 0:128], e, accumulate=True)" in migrated
    assert "buffer=nl.psum)" in migrated and "'psum'" not in migrated
    assert "nisa.tensor_copy(res[...], acc)" in migrated
    assert "nisa.nc_transpose(nc_transpose_out, res[0:64, 0:64])\n    nl.store(out, value=nl.copy(nc_transpose_out))" in migrated


def test_sub_kernels_lose_their_decorator_and_list_defaults_become_tuples():
    source = LEGACY_HEAD + (
        "@nki.trace\n"
        "def helper(t):\n"
        "    return nl.exp(t)\n"
        "\n"
        "@nki.jit\n"
        "def kernel(a, stride=[1, 1]):\n"
        "    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.hbm)\n"
        "    nl.store(out, value=helper(nl.load(a)))\n"
        "    return out\n")
    migration = migrate_source(source)
    assert "@nki" not in migration.source.split("def helper")[0].split("import nki.isa as nisa\n")[1]
    assert "def kernel(a, stride=(1, 1)):" in migration.source
    assert "buffer=nl.shared_hbm" in migration.source
    sections = {change.guide for change in migration.changes}
    assert {"Remove nki.jit decorator on sub-kernels", "Replace list kernel arguments with tuples",
            "Output tensors must use nl.shared_hbm", "New namespace, new APIs"} <= sections


@pytest.mark.parametrize(("body", "line", "names"), [
    ("    t = nl.load(a[nl.arange(128)[:, None], 0:64])\n", 7, ("nl.arange", "Update indexing syntax")),
    ("    i_p, i_f = nl.mgrid[0:128, 0:64]\n", 7, ("nl.mgrid", "Update indexing syntax")),
    ("    t = nl.load(a, mask=(a.shape[0] > 0))\n", 7, ("mask=", "Deprecation of masking")),
    ("    t = nl.ndarray((4, nl.par_dim(128), 64), dtype=a.dtype)\n", 7, ("block dimension",
                                                                       "Removing block dimensions")),
    ("    nisa.dma_copy(dst=out, src=a, dst_rmw_op=nl.add)\n", 7, ("dst_rmw_op", "dma_compute(dst, [dst, src]")),
    ("    r = nisa.tensor_reduce(nl.add, nl.load(a), axis=1)\n", 7, ("nisa.tensor_reduce", "declare the destination")),
    ("    t = nl.loop_reduce(nl.load(a), op=nl.add, loop_indices=[])\n", 7, ("nl.loop_reduce", "no loop_reduce")),
])
def test_what_needs_a_person_is_refused_naming_the_line_and_the_construct(body, line, names):
    source = LEGACY_HEAD + "@nki.jit\ndef kernel(a):\n    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)\n" + body + "    return out\n"
    with pytest.raises(MigrationError) as caught:
        migrate_source(source)
    message = str(caught.value)
    assert message.startswith(f"line {line}: ")
    for name in names:
        assert name in message


def test_a_current_or_broken_source_is_refused_with_what_it_is():
    with pytest.raises(MigrationError, match="nothing to migrate"):
        migrate_source("import nki.language as nl\n")
    with pytest.raises(MigrationError, match="does not parse"):
        migrate_source("def broken(:\n")
