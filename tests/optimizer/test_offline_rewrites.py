"""Each catalog rewrite on small kernels: where it applies, what it produces, where it must not apply."""

from __future__ import annotations

import ast

import pytest

from engine.agents.rewrites import RewriteError
from engine.platforms.nki.rewrites import BY_NAME

HEADER = "import neuronxcc.nki as nki\nimport neuronxcc.nki.language as nl\n"
SCALE = 0.5


def kernel(body: str, params: str = "x") -> str:
    lines = "\n".join("    " + line if line else "" for line in body.strip("\n").splitlines())
    return f"{HEADER}SCALE = 0.5\n\n\n@nki.jit\ndef kernel({params}):\n{lines}\n"


def calls(source: str) -> list[str]:
    return [ast.unparse(n.func) for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)]


def test_a_constant_multiply_folds_into_the_activation_scale_and_imports_isa():
    source = kernel("""
rows, cols = x.shape
out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
t = nl.load(x[0:rows, 0:cols])
scaled = nl.multiply(t, SCALE / cols)
nl.store(out[0:rows, 0:cols], value=nl.exp(scaled))
return out
""")
    rewrite = BY_NAME["fold_scale_into_activation"]
    assert len(rewrite.sites(source)) == 1
    result = rewrite.apply(source, 0)
    assert "nisa.activation(op=nl.exp, data=t, scale=SCALE / cols)" in result
    assert "import neuronxcc.nki.isa as nisa" in result
    assert "scaled" not in result  # the single-use temporary is gone


def test_a_multiply_by_another_tile_is_not_a_scale():
    source = kernel("""
a = nl.load(x[0:128, 0:64])
b = nl.load(x[0:128, 64:128])
nl.store(x[0:128, 0:64], value=nl.exp(nl.multiply(a, b)))
""")
    assert BY_NAME["fold_scale_into_activation"].sites(source) == []


def test_a_temporary_used_twice_is_not_inlined():
    source = kernel("""
t = nl.load(x[0:128, 0:64])
s = nl.multiply(t, 2.0)
nl.store(x[0:128, 0:64], value=nl.add(nl.exp(s), s))
""")
    assert BY_NAME["fold_scale_into_activation"].sites(source) == []


@pytest.mark.parametrize("expression, expected", [
    ("nl.add(nl.multiply(a, 0.9), b)", "nisa.scalar_tensor_tensor(data=a, op0=nl.multiply, operand0=0.9, op1=nl.add, operand1=b)"),
    ("nl.add(b, nl.multiply(0.9, a))", "nisa.scalar_tensor_tensor(data=a, op0=nl.multiply, operand0=0.9, op1=nl.add, operand1=b)"),
    ("nl.subtract(b, nl.multiply(a, 0.9))",
     "nisa.scalar_tensor_tensor(data=a, op0=nl.multiply, operand0=0.9, op1=nl.subtract, operand1=b, reverse1=True)"),
])
def test_scale_then_add_fuses_with_the_operand_order_kept(expression, expected):
    source = kernel(f"""
a = nl.load(x[0:128, 0:64])
b = nl.load(x[0:128, 64:128])
nl.store(x[0:128, 0:64], value={expression})
""")
    assert expected in BY_NAME["fuse_scale_and_add"].apply(source, 0)


def test_adding_a_scalar_is_not_a_tensor_tensor_fusion():
    source = kernel("""
a = nl.load(x[0:128, 0:64])
nl.store(x[0:128, 0:64], value=nl.add(nl.multiply(a, 0.9), 1.0))
""")
    assert BY_NAME["fuse_scale_and_add"].sites(source) == []


def test_a_row_sum_of_an_activation_moves_into_activation_reduce():
    source = kernel("""
t = nl.load(x[0:128, 0:64])
e = nl.exp(t)
total = nl.sum(e, axis=1, keepdims=True)
nl.store(x[0:128, 0:64], value=nl.multiply(e, total))
""")
    result = BY_NAME["reduce_inside_activation"].apply(source, 0)
    assert "e = nisa.activation_reduce(op=nl.exp, data=t, reduce_op=nl.add, reduce_res=t_row_sums)" in result
    assert "t_row_sums = nl.ndarray((t.shape[0], 1), dtype=nl.float32, buffer=nl.sbuf)" in result
    assert "nl.sum" not in result and "total = t_row_sums" in result


def test_a_sum_over_the_partition_axis_is_left_alone():
    source = kernel("""
t = nl.load(x[0:128, 0:64])
nl.store(x[0:1, 0:64], value=nl.sum(nl.exp(t), axis=0, keepdims=True))
""")
    assert BY_NAME["reduce_inside_activation"].sites(source) == []


MATMUL = kernel("""
rows, depth = lhs.shape
cols = rhs.shape[1]
out = nl.ndarray((rows, cols), dtype=lhs.dtype, buffer=nl.shared_hbm)
for m in nl.affine_range(rows // 128):
    m0 = m * 128
    lhs_t = nl.load(lhs[m0:m0 + 128, 0:128])
    for n in nl.affine_range(cols // 512):
        n0 = n * 512
        acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
        for k in nl.affine_range(depth // 128):
            rhs_tile = nl.load(rhs[k * 128:(k + 1) * 128, n0:n0 + 512])
            acc += nisa.nc_matmul(lhs_t, rhs_tile)
        nl.store(out[m0:m0 + 128, n0:n0 + 512], value=nl.copy(acc))
return out
""", params="lhs, rhs")


def test_tiles_reloaded_for_every_outer_iteration_are_cached_once_before_the_loop():
    rewrite = BY_NAME["hoist_invariant_loads"]
    sites = rewrite.sites(MATMUL)
    assert len(sites) == 1 and "repeats for every `m`" in sites[0].description
    result = rewrite.apply(MATMUL, 0)
    tree = ast.parse(result)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
    outer = next(s for s in fn.body if isinstance(s, ast.For) and s.target.id == "m")
    before = fn.body[: fn.body.index(outer)]
    assert "rhs_cache = nl.ndarray((128, cols // 512 * (depth // 128) * 512), dtype=rhs.dtype, buffer=nl.sbuf)" in result
    assert any(isinstance(s, ast.For) and "nl.load(rhs[" in ast.unparse(s) for s in before)
    assert "nl.load(rhs" not in ast.unparse(outer)  # inside the row loop only the cache is read
    assert "rhs_tile = rhs_cache[:, (n * (depth // 128) + k) * 512:(n * (depth // 128) + k + 1) * 512]" in result


def test_a_load_that_depends_on_the_loop_index_is_not_hoisted():
    source = kernel("""
for i in nl.affine_range(4):
    t = nl.load(x[i * 128:(i + 1) * 128, 0:64])
    nl.store(x[i * 128:(i + 1) * 128, 0:64], value=nl.exp(t))
""")
    assert BY_NAME["hoist_invariant_loads"].sites(source) == []


def test_a_load_that_does_not_change_in_the_loop_moves_before_it():
    source = kernel("""
out = nl.ndarray((512, 64), dtype=x.dtype, buffer=nl.shared_hbm)
for i in nl.affine_range(4):
    g = nl.load(x[0:128, 0:64])
    nl.store(out[i * 128:(i + 1) * 128, 0:64], value=nl.exp(g))
return out
""")
    result = BY_NAME["hoist_invariant_loads"].apply(source, 0)
    body = ast.parse(result).body[-1].body
    assert ast.unparse(body[1]) == "x_tile = nl.load(x[0:128, 0:64])" and isinstance(body[2], ast.For)


def test_a_second_load_of_the_same_region_reuses_the_first_tile():
    source = kernel("""
a = nl.load(x[0:128, 0:64])
y = nl.exp(a)
b = nl.load(x[0:128, 0:64])
nl.store(x[0:128, 64:128], value=nl.add(y, b))
""")
    result = BY_NAME["reuse_loaded_tiles"].apply(source, 0)
    assert result.count("nl.load") == 1 and "nl.add(y, a)" in result


def test_a_store_between_two_loads_prevents_reuse():
    source = kernel("""
a = nl.load(x[0:128, 0:64])
nl.store(x[0:128, 0:64], value=nl.exp(a))
b = nl.load(x[0:128, 0:64])
nl.store(x[0:128, 64:128], value=b)
""")
    assert BY_NAME["reuse_loaded_tiles"].sites(source) == []


def test_tile_limits_offer_every_halving_down_to_128_and_doublings_up_to_8192():
    source = kernel("cols = _even_tile(x.shape[1], 1024)\nrows = _even_tile(x.shape[0], nl.tile_size.gemm_moving_fmax)")
    smaller = [s.description for s in BY_NAME["smaller_free_tiles"].sites(source)]
    larger = [s.description for s in BY_NAME["larger_free_tiles"].sites(source)]
    assert [d.split(" to ")[1].split()[0] for d in smaller] == ["512", "256", "128", "256", "128"]
    assert [d.split(" to ")[1].split()[0] for d in larger] == ["2048", "4096", "8192"]  # the matmul limit never grows
    shrunk = BY_NAME["smaller_free_tiles"].apply(source, 3)
    assert "_even_tile(x.shape[0], nl.tile_size.gemm_moving_fmax // 2)" in shrunk
    # A shrunk matmul limit stays a matmul limit: it may shrink again but never grow past the PSUM tile.
    assert [s.description.split(" to ")[1].split()[0] for s in BY_NAME["smaller_free_tiles"].sites(shrunk)][-1] == "128"
    assert len(BY_NAME["larger_free_tiles"].sites(shrunk)) == 3


def test_two_independent_loops_are_interchanged():
    source = kernel("""
for i in nl.affine_range(2):
    for j in nl.affine_range(3):
        nl.store(x[i * 128:(i + 1) * 128, j * 64:(j + 1) * 64], value=nl.load(x[i * 128:(i + 1) * 128, 0:64]))
""")
    result = BY_NAME["interchange_loops"].apply(source, 0)
    assert "for j in nl.affine_range(3):\n        for i in nl.affine_range(2):" in result


def test_a_triangular_nest_is_not_interchanged():
    source = kernel("""
for i in nl.affine_range(4):
    for j in nl.affine_range(i + 1):
        nl.store(x[0:128, 0:64], value=nl.load(x[0:128, 0:64]))
""")
    assert BY_NAME["interchange_loops"].sites(source) == []


def test_asking_for_a_site_that_does_not_exist_names_the_count():
    with pytest.raises(RewriteError, match="has 1 sites in this kernel; site 5 does not exist"):
        BY_NAME["hoist_invariant_loads"].apply(MATMUL, 5)


def test_every_rewrite_reports_no_site_for_source_that_does_not_parse():
    assert all(rewrite.sites("def kernel(:\n") == [] for rewrite in BY_NAME.values())
