"""The round-trip rewrites on small kernels written for the test: a tile stored to a scratch HBM tensor and
loaded back, and a PSUM tile copied to SBUF only for compute engines. Where they apply, what they produce,
that the simulator gives the same outputs and the performance model a lower latency, and where they must
not apply."""

from __future__ import annotations

import types

import numpy as np
import pytest

from engine.platforms.nki.perf import estimate
from engine.platforms.nki.rewrites import BY_NAME
from engine.platforms.nki.simulator import simulate
from engine.platforms.nki.simulator.semantics import namespaces

HEADER = ("import neuronxcc.nki as nki\nimport neuronxcc.nki.language as nl\nimport neuronxcc.nki.isa as nisa\n"
          "import numpy as np\n")
HBM = BY_NAME["drop_hbm_round_trip"]
PSUM = BY_NAME["drop_psum_copy"]


def kernel(body: str, params: str = "x") -> str:
    lines = "\n".join("    " + line if line else "" for line in body.strip("\n").splitlines())
    return f"{HEADER}\n\n@nki.jit\ndef kernel({params}):\n{lines}\n"


def round_trip(between: str = "", scratch_dtype: str = "x.dtype", returns: str = "out") -> str:
    return kernel(f"""
rows, cols = x.shape
out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
scratch = nl.ndarray((rows, cols), dtype={scratch_dtype}, buffer=nl.shared_hbm)
for i in nl.affine_range(rows // 128):
    t = nl.load(x[i * 128:(i + 1) * 128, 0:cols])
    nl.store(scratch[i * 128:(i + 1) * 128, 0:cols], value=nl.exp(t))
    {between}
    back = nl.load(scratch[i * 128:(i + 1) * 128, 0:cols])
    nl.store(out[i * 128:(i + 1) * 128, 0:cols], value=nl.add(back, t))
return {returns}
""")


PSUM_KERNEL = kernel("""
out = nl.ndarray((128, 2048), dtype=nl.float32, buffer=nl.shared_hbm)
lhs_t = nl.load(lhs[0:128, 0:128])
for n in nl.affine_range(4):
    rhs_t = nl.load(rhs[0:128, n * 512:(n + 1) * 512])
    acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
    acc += nisa.nc_matmul(lhs_t, rhs_t)
    res = nl.copy(acc)
    y = nl.exp(res)
    z = nisa.activation(op=nl.tanh, data=res)
    nl.store(out[0:128, n * 512:(n + 1) * 512], value=nl.add(y, z))
return out
""", params="lhs, rhs")


@pytest.fixture(scope="module")
def installed():
    namespaces.install()
    yield
    namespaces.uninstall()


def run(source: str, inputs: list[np.ndarray]):
    module = types.ModuleType("round_trip_kernel")
    exec(compile(source, "round_trip_kernel.py", "exec"), module.__dict__)
    simulation = simulate(module.kernel, inputs)
    return simulation.outputs, estimate(simulation.trace).latency_ms


# -- HBM ----------------------------------------------------------------------------------------------


def test_a_tile_stored_to_scratch_and_loaded_back_is_used_directly():
    source = round_trip()
    sites = HBM.sites(source)
    assert len(sites) == 1 and "loads back `scratch[i * 128:(i + 1) * 128, 0:cols]`" in sites[0].description
    result = HBM.apply(source, 0)
    assert "scratch_tile = nl.exp(t)" in result
    assert "nl.add(scratch_tile, t)" in result
    assert "scratch" not in result.replace("scratch_tile", "")  # nothing else read it: store and tensor are gone
    assert result.count("nl.load") == 1 and result.count("nl.store") == 1


def test_the_round_trip_rewrite_simulates_to_the_same_outputs_and_is_predicted_faster(installed):
    x = np.random.default_rng(3).standard_normal((512, 2048)).astype(np.float32)
    source = round_trip()
    before, slow = run(source, [x])
    after, fast = run(HBM.apply(source, 0), [x])
    np.testing.assert_array_equal(after[0], before[0])
    assert fast < slow


def test_a_scratch_tensor_read_elsewhere_keeps_its_store():
    source = round_trip().replace("return out", "again = nl.load(scratch[0:128, 0:cols])\n"
                                  "    nl.store(out[0:128, 0:cols], value=again)\n    return out")
    result = HBM.apply(source, 0)
    assert "nl.store(scratch[i * 128:(i + 1) * 128, 0:cols], value=scratch_tile)" in result
    assert "back" not in result and "nl.add(scratch_tile, t)" in result


@pytest.mark.parametrize("between", [
    # the region is written again (inside a loop: not a store this rewrite can take the tile from)
    "for k in nl.affine_range(1):\n        nl.store(scratch[i * 128:(i + 1) * 128, 0:cols], value=t)",
    "nl.store(scratch[i * 128:(i + 1) * 128, 0:cols], value=nl.multiply(t, 2.0))",
    "nl.store(scratch[0:128, 0:cols], value=t)",  # another region of the tensor: not proven disjoint
])
def test_no_site_when_the_scratch_tensor_is_written_between_the_store_and_the_load(between):
    assert HBM.sites(round_trip(between)) == []


def test_when_the_region_is_stored_twice_the_load_gets_the_last_stored_tile():
    source = round_trip("nl.store(scratch[i * 128:(i + 1) * 128, 0:cols], value=t)")
    sites = HBM.sites(source)
    assert len(sites) == 1 and "stored from SBUF at line 15" in sites[0].description
    result = HBM.apply(source, 0)
    assert "nl.add(t, t)" in result and "value=nl.exp(t)" in result  # the first store stays: not proven dead


def test_no_site_when_the_region_is_a_different_one():
    source = round_trip().replace("back = nl.load(scratch[i * 128:(i + 1) * 128, 0:cols])",
                                  "back = nl.load(scratch[0:128, 0:cols])")
    assert HBM.sites(source) == []


def test_no_site_when_the_scratch_tensor_is_an_output_or_an_input():
    assert HBM.sites(round_trip(returns="scratch")) == []
    assert HBM.sites(round_trip(returns="out, scratch")) == []
    as_input = round_trip().replace("def kernel(x):", "def kernel(x, scratch):").replace(
        "    scratch = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)\n", "")
    assert HBM.sites(as_input) == []


def test_no_site_when_the_store_casts_to_another_dtype():
    assert HBM.sites(round_trip(scratch_dtype="nl.bfloat16")) == []


def test_no_site_when_the_stored_tile_is_changed_in_place_after_the_store():
    source = kernel("""
out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
scratch = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.hbm)
t = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
t[...] = nl.load(x[0:128, 0:64])
nl.store(scratch[0:128, 0:64], value=t)
t[...] = nl.exp(t)
back = nl.load(scratch[0:128, 0:64])
nl.store(out[0:128, 0:64], value=nl.add(back, t))
return out
""")
    assert HBM.sites(source) == []
    # Filled in place before the store is fine: the stored tile is what comes back.
    fine = source.replace("    t[...] = nl.exp(t)\n", "")
    assert len(HBM.sites(fine)) == 1


# -- PSUM ---------------------------------------------------------------------------------------------


def test_a_psum_copy_feeding_only_compute_engines_is_dropped():
    sites = PSUM.sites(PSUM_KERNEL)
    assert len(sites) == 1 and "`res = nl.copy(acc)`" in sites[0].description
    result = PSUM.apply(PSUM_KERNEL, 0)
    assert "nl.copy" not in result
    assert "y = nl.exp(acc)" in result and "z = nisa.activation(op=nl.tanh, data=acc)" in result


def test_the_psum_rewrite_simulates_to_the_same_outputs_and_is_predicted_faster(installed):
    rng = np.random.default_rng(4)
    inputs = [rng.standard_normal((128, 128)).astype(np.float32), rng.standard_normal((128, 2048)).astype(np.float32)]
    before, slow = run(PSUM_KERNEL, inputs)
    after, fast = run(PSUM.apply(PSUM_KERNEL, 0), inputs)
    np.testing.assert_array_equal(after[0], before[0])
    assert fast < slow


@pytest.mark.parametrize("use", [
    "nl.store(out[0:128, n * 512:(n + 1) * 512], value=res)",  # a DMA reads SBUF
    "w = nisa.nc_matmul(lhs_t, res)",  # so does the Tensor Engine
    "w = nl.exp(res[:, 0:64])",  # through a slice
])
def test_no_psum_site_when_the_copy_feeds_a_dma_a_matmul_or_a_slice(use):
    source = PSUM_KERNEL.replace("    z = nisa.activation", f"    {use}\n        z = nisa.activation")
    assert PSUM.sites(source) == []


def test_no_psum_site_when_the_copy_casts_or_the_psum_tile_changes_before_a_use():
    assert PSUM.sites(PSUM_KERNEL.replace("nl.copy(acc)", "nl.copy(acc, dtype=nl.bfloat16)")) == []
    changed = PSUM_KERNEL.replace("    y = nl.exp(res)", "    acc += nisa.nc_matmul(lhs_t, rhs_t)\n        y = nl.exp(res)")
    assert PSUM.sites(changed) == []


def test_a_copy_of_an_sbuf_tile_is_not_a_psum_copy():
    assert PSUM.sites(PSUM_KERNEL.replace("res = nl.copy(acc)", "res = nl.copy(rhs_t)")) == []
