"""GET /api/problems and /api/problems/{id or address}: public problems for anyone, private ones for their owner."""

from __future__ import annotations

from benchmark import services

REFERENCE = """import numpy as np
N = 8
def get_inputs():
    return [np.random.rand(N).astype(np.float32)]
def forward(x):
    return x * 2
def transform_to_nki_inputs(inputs):
    return inputs
def transform_nki_outputs(outputs, reference):
    return outputs
"""


def test_anyone_lists_the_28_nkibench_problem_cases(client, nkibench):
    response = client.get("/api/problems")
    assert response.status_code == 200
    problems = response.json()
    assert len(problems) == 28
    silu = next(p for p in problems if p["address"] == "silu:mini")
    assert silu["parameters"] == {"M": 256, "N": 512}
    assert silu["theoretical_peak_ms"]["trn1"] > 0
    assert silu["baseline_kernel_id"] is not None


def test_problems_filter_by_case(client, nkibench):
    problems = client.get("/api/problems", {"case": "full"}).json()
    assert len(problems) == 14 and {p["case"] for p in problems} == {"full"}


def test_a_problem_is_read_by_address_with_its_reference(client, nkibench):
    response = client.get("/api/problems/matmul:full")
    assert response.status_code == 200
    body = response.json()
    assert body["parameters"] == {"M": 4096, "N": 12288, "K": 5120}
    assert "def forward" in body["reference_source"]


def test_a_problem_is_read_by_id(client, silu_mini):
    assert client.get(f"/api/problems/{silu_mini.pk}").json()["address"] == "silu:mini"


def test_an_unknown_problem_is_a_404_naming_it(client, nkibench):
    response = client.get("/api/problems/softmax:mini")
    assert response.status_code == 404
    assert "softmax" in response.json()["detail"]


def test_a_private_problem_is_visible_to_its_owner_only(client, engineer, teammate, bearer, db):
    problem = services.create_custom_problem(engineer, REFERENCE, name="double.py")
    assert client.get(f"/api/problems/{problem.pk}", headers=bearer(engineer)).status_code == 200
    assert client.get(f"/api/problems/{problem.pk}", headers=bearer(teammate)).status_code == 404
    assert client.get(f"/api/problems/{problem.pk}").status_code == 404
    assert problem.address not in [p["address"] for p in client.get("/api/problems").json()]


def test_an_address_with_a_suite_prefix_reaches_that_suite(client, silu_mini):
    from benchmark.models import Problem

    Problem.objects.create(suite="imported", slug="silu", case="0", reference_source=REFERENCE, parameters={"N": 8})
    response = client.get("/api/problems/imported/silu:0")
    assert response.status_code == 200
    assert response.json()["suite"] == "imported" and response.json()["parameters"] == {"N": 8}
