"""/api/docs: the OpenAPI page answers without a network, and the schema documents bearer-token auth."""

from __future__ import annotations

import re

import pytest
from django.contrib.staticfiles import finders

pytestmark = pytest.mark.django_db


def test_api_docs_answer_200_with_swagger_ui_from_our_static_files(client):
    """Every script and stylesheet of the docs page is ours: the page works with no internet."""
    response = client.get("/api/docs")
    assert response.status_code == 200
    html = response.content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert "/static/ninja/swagger-ui-bundle.js" in assets
    assert all(asset.startswith("/static/") for asset in assets), assets
    assert "https://" not in html and "http://" not in html  # no CDN
    for asset in assets:
        assert finders.find(asset.removeprefix("/static/")), f"{asset} is not among our static files"


def test_the_schema_documents_bearer_tokens_on_protected_routes(client):
    """The schema names the HTTP bearer scheme, and /api/me requires it."""
    schema = client.get("/api/openapi.json").json()
    schemes = schema["components"]["securitySchemes"]
    assert {scheme["type"] for scheme in schemes.values()} == {"http"}
    assert {scheme["scheme"].lower() for scheme in schemes.values()} == {"bearer"}
    assert schema["paths"]["/api/me"]["get"]["security"] == [{name: []} for name in schemes]
