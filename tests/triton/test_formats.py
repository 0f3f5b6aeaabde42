"""FlashInfer-Bench documents imported and exported by our own reader; bad ones refused naming the field."""

from __future__ import annotations

import json

import pytest
import torch

from engine.platforms.triton import catalog
from engine.platforms.triton.flashinfer import (
    FormatError,
    definition_to_dict,
    load_workloads,
    parse_definition,
    parse_solution,
    parse_workload,
    solution_to_dict,
    workload_to_dict,
)
from engine.platforms.triton.hardware import H200
from engine.platforms.triton.inputs import make_inputs
from engine.platforms.triton.roofline import roofline

# A paged GQA decode definition in FlashInfer-Bench's form (our own, small).
DECODE = {
    "name": "gqa_paged_decode_h4_kv2_d16_ps1", "op_type": "gqa_paged",
    "axes": {"batch_size": {"type": "var"}, "num_qo_heads": {"type": "const", "value": 4},
             "num_kv_heads": {"type": "const", "value": 2}, "head_dim": {"type": "const", "value": 16},
             "num_pages": {"type": "var"}, "page_size": {"type": "const", "value": 1},
             "len_indptr": {"type": "var"}, "num_kv_indices": {"type": "var"}},
    "inputs": {"q": {"shape": ["batch_size", "num_qo_heads", "head_dim"], "dtype": "bfloat16"},
               "k_cache": {"shape": ["num_pages", "page_size", "num_kv_heads", "head_dim"], "dtype": "bfloat16"},
               "kv_indptr": {"shape": ["len_indptr"], "dtype": "int32"},
               "kv_indices": {"shape": ["num_kv_indices"], "dtype": "int32"},
               "sm_scale": {"shape": None, "dtype": "float32"}},
    "outputs": {"output": {"shape": ["batch_size", "num_qo_heads", "head_dim"], "dtype": "bfloat16"}},
    "reference": "def run(q, k_cache, kv_indptr, kv_indices, sm_scale):\n    return q\n",
    "constraints": ["len_indptr == batch_size + 1", "num_kv_indices == kv_indptr[-1].item()"],
}


def test_a_definition_and_a_workload_in_trace_line_form_are_imported_and_round_trip(tmp_path):
    definition = catalog.definition("rmsnorm_h128")
    assert definition.const_axes == {"hidden_size": 128} and definition.var_axes == ("batch_size",)
    assert parse_definition(definition_to_dict(definition)) == definition
    line = {"definition": "rmsnorm_h128", "solution": None, "evaluation": None,
            "workload": {"uuid": "u1", "axes": {"batch_size": 3}, "inputs": {"hidden_states": {"type": "random"},
                                                                             "weight": {"type": "random"}}}}
    path = tmp_path / "w.jsonl"
    path.write_text(json.dumps(line) + "\n" + json.dumps(line | {"workload": line["workload"] | {"uuid": "u2"}}) + "\n")
    workloads = load_workloads(path)
    assert [w.uuid for w in workloads] == ["u1", "u2"] and workloads[0].axes == {"batch_size": 3}
    assert parse_workload(workload_to_dict(workloads[0])) == workloads[0]
    solution = catalog.solution("rmsnorm_h128")
    assert parse_solution(solution_to_dict(solution)) == solution
    assert solution_to_dict(solution)["spec"]["entry_point"] == "main.py::run"


@pytest.mark.parametrize(("change", "field"), [
    (lambda d: d["inputs"]["q"].update(dtype="bf16"), "inputs.q.dtype"),
    (lambda d: d.pop("reference"), "reference"),
    (lambda d: d["inputs"]["q"].update(shape=["batch_size", "heads"]), "inputs.q.shape"),
    (lambda d: d["axes"]["head_dim"].update(type="fixed"), "axes.head_dim.type"),
])
def test_a_malformed_definition_is_refused_naming_the_field(change, field):
    data = json.loads(json.dumps(DECODE))
    change(data)
    with pytest.raises(FormatError) as error:
        parse_definition(data)
    assert error.value.where == field


def test_a_solution_whose_entry_point_is_not_among_its_sources_is_refused():
    data = solution_to_dict(catalog.solution("rmsnorm_h128"))
    data["spec"]["entry_point"] = "kernel.py::run"
    with pytest.raises(FormatError, match="spec.entry_point"):
        parse_solution(data)


def test_paged_index_tensors_are_valid_and_the_decode_roofline_counts_the_pages_read():
    definition = parse_definition(DECODE)
    workload = parse_workload({"definition": DECODE["name"], "axes": {"batch_size": 5, "num_pages": 50,
                               "len_indptr": 6, "num_kv_indices": 37},
                               "inputs": {"sm_scale": {"type": "scalar", "value": 0.25}}})
    inputs = make_inputs(definition, workload, seed=7)
    indptr, indices = inputs["kv_indptr"], inputs["kv_indices"]
    assert indptr.dtype == torch.int32 and indptr[0] == 0 and indptr[-1] == 37
    assert bool((indptr[1:] >= indptr[:-1]).all())
    assert int(indices.min()) >= 0 and int(indices.max()) < 50 and inputs["sm_scale"] == 0.25
    assert torch.equal(make_inputs(definition, workload, seed=7)["q"], inputs["q"])  # the seed decides
    floor = roofline(definition, workload, H200, inputs)
    assert floor.flops == 4 * 4 * 16 * 37  # 4 x heads x head_dim x (query, key) pairs
    assert floor.bound == "memory"


def test_the_gemm_roofline_is_compute_bound_at_the_issue_size():
    definition = catalog.definition("gemm_n28672_k4096")
    floor = roofline(definition, catalog.workload("gemm_n28672_k4096_m8192"), H200)
    assert floor.flops == 2 * 8192 * 28672 * 4096 and floor.bound == "compute"
    assert floor.floor_s == pytest.approx(floor.flops / 989.5e12)
