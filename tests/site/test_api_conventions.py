"""Issue 36: token callers never meet Django's HTML CSRF page, the OpenAPI schema lists every status the API
answers, and HSTS is sent once HTTPS is on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db
REPO = Path(__file__).resolve().parents[2]


def test_a_token_post_to_an_unknown_api_path_gets_json_not_a_csrf_page(engineer, make_token):
    script = Client(enforce_csrf_checks=True)
    response = script.post("/api/kernelz", {"x": 1}, content_type="application/json",
                           headers={"Authorization": f"Bearer {make_token(engineer)}"})
    assert response.status_code == 404
    assert response.json()["detail"].startswith("no API endpoint /api/kernelz")


def test_any_post_under_api_answers_json_even_from_a_session_without_csrf(engineer):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(engineer)
    unknown = browser.post("/api/kernelz", {}, content_type="application/json")
    assert unknown.status_code == 404 and unknown["Content-Type"] == "application/json"
    known = browser.post("/api/kernels/12/evaluations", {}, content_type="application/json")
    assert known.status_code == 403 and "CSRF" in known.json()["detail"]


def test_the_schema_lists_the_error_answers_of_each_endpoint(client):
    paths = client.get("/api/openapi.json").json()["paths"]
    upload = paths["/api/kernels"]["post"]["responses"]
    assert {"401", "403", "413", "422", "429"} <= set(upload)
    assert upload["413"]["content"]["application/json"]["schema"]["required"] == ["detail"]
    memory = paths["/api/memory"]["get"]["responses"]
    assert {"401", "403", "422"} <= set(memory) and "413" not in memory
    assert "429" in paths["/api/runs/{run_id}/resume"]["post"]["responses"]
    public = paths["/api/problems"]["get"]["responses"]
    assert "403" not in public and {"401", "422"} <= set(public)


def _headers_with(**env: str) -> dict[str, str]:
    code = ("import django, json; django.setup(); from django.test import Client; "
            "r = Client().get('/api/openapi.json', HTTP_X_FORWARDED_PROTO='https'); print(json.dumps(dict(r.headers)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                         env={**os.environ, "DJANGO_SETTINGS_MODULE": "accelopt_site.settings", **env})
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_hsts_is_sent_when_https_is_on_and_only_then():
    assert "Strict-Transport-Security" not in _headers_with(ACCELOPT_HTTPS="0")
    assert _headers_with(ACCELOPT_HTTPS="1")["Strict-Transport-Security"] == "max-age=31536000"
    assert _headers_with(ACCELOPT_HTTPS="1", ACCELOPT_HSTS_SECONDS="600",
                         ACCELOPT_HSTS_INCLUDE_SUBDOMAINS="1")["Strict-Transport-Security"] == \
        "max-age=600; includeSubDomains"


def test_pages_carry_the_content_security_policy(client):
    policy = client.get("/").headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "object-src 'none'" in policy
