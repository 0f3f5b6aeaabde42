"""Who gets what: anonymous visitors, viewers, engineers and curators on role-protected pages and API routes."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.site.urls")]


def test_anonymous_visitor_is_sent_to_login_from_a_protected_page(client):
    response = client.get("/sample/engineer/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=/sample/engineer/")


def test_account_without_role_is_refused_with_403_naming_the_role(client, viewer):
    client.force_login(viewer)
    response = client.get("/sample/engineer/")
    assert response.status_code == 403
    assert b"needs the engineer role" in response.content


def test_engineer_opens_engineer_page_but_not_curator_page(client, engineer):
    client.force_login(engineer)
    assert client.get("/sample/engineer/").status_code == 200
    assert client.get("/sample/curator/").status_code == 403


def test_curator_also_holds_the_engineer_role(client, curator):
    client.force_login(curator)
    assert client.get("/sample/curator/").content == b"curator page"
    assert client.get("/sample/engineer/").status_code == 200


def test_async_views_get_the_same_role_check(client, engineer, curator):
    assert client.get("/sample/curator-async/").status_code == 302
    client.force_login(engineer)
    assert client.get("/sample/curator-async/").status_code == 403
    client.force_login(curator)
    assert client.get("/sample/curator-async/").status_code == 200


def test_anonymous_api_caller_gets_401_on_a_role_route(client):
    assert client.post("/sample-api/engineer").status_code == 401


def test_api_caller_without_the_role_gets_403(client, make_token, engineer):
    token = make_token(engineer)
    response = client.post("/sample-api/curator", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 403
    assert response.json() == {"detail": "this endpoint needs the curator role"}


def test_api_caller_with_the_role_is_let_through_as_themselves(client, make_token, curator):
    token = make_token(curator)
    response = client.post("/sample-api/curator", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200
    assert response.json() == {"caller": "cora"}


def test_public_api_route_serves_anonymous_and_identifies_token_callers(client, make_token, engineer):
    assert client.get("/sample-api/public").json() == {"caller": "anonymous"}
    token = make_token(engineer)
    response = client.get("/sample-api/public", headers={"Authorization": f"Bearer {token}"})
    assert response.json() == {"caller": "erin"}


def test_session_api_post_without_csrf_token_is_refused(engineer):
    from django.test import Client

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(engineer)
    response = browser.post("/sample-api/engineer")
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]


def test_session_api_post_with_csrf_token_is_accepted(engineer):
    from django.test import Client

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(engineer)
    browser.get("/accounts/me/")  # sets the csrftoken cookie, as any page does
    csrf = browser.cookies["csrftoken"].value
    response = browser.post("/sample-api/engineer", headers={"X-CSRFToken": csrf})
    assert response.status_code == 200
    assert response.json() == {"caller": "erin"}


def test_token_callers_need_no_csrf_token_even_when_checks_are_enforced(make_token, engineer):
    from django.test import Client

    script = Client(enforce_csrf_checks=True)
    response = script.post("/sample-api/engineer", headers={"Authorization": f"Bearer {make_token(engineer)}"})
    assert response.status_code == 200
