"""The API's rough edges a new user hits (issue 20): every /api/ error is JSON with a message; an unknown field
is a 422 naming it; an oversized body is a 413 with sizes a person reads; one set of run defaults everywhere."""

from __future__ import annotations

import pytest

from benchmark.sizes import human_bytes
from optimizer.forms import FORM_SEARCH_DEFAULTS, RunForm
from optimizer.models import Run
from optimizer.services import RUN_SEARCH_DEFAULTS

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("size", "text"), [(900, "900 bytes"), (1536, "1.5 KiB"), (12_412 * 1024, "12.1 MiB"),
                                            (2 * 1024**3, "2 GiB")])
def test_sizes_read_as_a_person_writes_them(size, text):
    assert human_bytes(size) == text


def test_an_unknown_top_level_run_field_is_a_422_naming_it(client, engineer, bearer, silu_mini):
    response = client.post("/api/runs", {"problem": silu_mini.address, "iterations": 2}, content_type="application/json",
                           headers=bearer(engineer))
    assert response.status_code == 422
    assert "unknown field 'iterations'" in response.json()["detail"]
    assert not Run.objects.exists()


def test_the_api_and_the_form_launch_with_the_same_defaults(client, engineer, bearer, silu_mini):
    response = client.post("/api/runs", {"problem": silu_mini.address}, content_type="application/json",
                           headers=bearer(engineer))
    assert response.status_code == 201, response.content
    search = Run.objects.get().config["search"]
    assert {key: search[key] for key in RUN_SEARCH_DEFAULTS} == RUN_SEARCH_DEFAULTS == FORM_SEARCH_DEFAULTS
    form = RunForm(user=engineer, problems=type(silu_mini).objects.all())
    assert form.fields["iterations"].initial == search["iterations"]


def test_an_oversized_body_is_a_json_413_with_both_sizes(client, engineer, bearer, settings):
    settings.ACCELOPT_MAX_UPLOAD_BYTES = settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024 * 1024
    body = '{"source": "' + "x" * (3 * 1024 * 1024) + '"}'
    response = client.post("/api/kernels", body, content_type="application/json", headers=bearer(engineer))
    assert response.status_code == 413
    assert response.json()["detail"] == "the request body is 3 MiB; the limit is 1 MiB (ACCELOPT_MAX_UPLOAD_BYTES)"


def test_an_unknown_api_path_is_a_json_404(client):
    response = client.get("/api/no-such-thing")
    assert response.status_code == 404 and "no API endpoint /api/no-such-thing" in response.json()["detail"]
