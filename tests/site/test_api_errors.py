"""The API's error answers: one exception handler per kind, registered on the one NinjaAPI, one JSON shape."""

from __future__ import annotations

import pydantic
import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404
from django.test import RequestFactory

from accelopt_site import api as site_api

pytestmark = pytest.mark.django_db


def _answer(error: Exception) -> tuple[int, bytes]:
    response = site_api.api.on_exception(RequestFactory().get("/api/"), error)
    return response.status_code, response.content


def test_a_missing_object_is_a_404_naming_it(client):
    response = client.get("/api/runs/987654")
    assert response.status_code == 404
    assert response.json() == {"detail": "no run with id 987654"}


def test_a_malformed_problem_address_is_a_400_saying_what_is_wrong(client):
    response = client.get("/api/problems/:full")
    assert response.status_code == 400
    assert "has no slug" in response.json()["detail"]


def test_each_service_exception_maps_to_its_status_and_message():
    assert _answer(Http404("no kernel with id 3")) == (404, b'{"detail": "no kernel with id 3"}')
    assert _answer(Http404()) == (404, b'{"detail": "Not Found"}')
    assert _answer(PermissionDenied("only the owner")) == (403, b'{"detail": "only the owner"}')
    assert _answer(ValidationError(["too big", "and empty"])) == (400, b'{"detail": "too big and empty"}')
    assert _answer(ValueError("bad address")) == (400, b'{"detail": "bad address"}')


def test_a_response_that_does_not_fit_its_schema_stays_a_server_error():
    class Shape(pydantic.BaseModel):
        number: int

    with pytest.raises(pydantic.ValidationError):
        Shape.model_validate({"number": "many"})
    try:
        Shape.model_validate({"number": "many"})
    except pydantic.ValidationError as error:
        with pytest.raises(pydantic.ValidationError):
            site_api.api.on_exception(RequestFactory().get("/api/"), error)
