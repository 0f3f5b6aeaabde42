"""Logging in and out through the real pages, and the error pages a visitor sees with DEBUG off."""

from __future__ import annotations

import pytest

from tests.conftest import TEST_PASSWORD

pytestmark = pytest.mark.django_db


def test_login_with_the_right_password_returns_to_the_requested_page(client, engineer):
    response = client.post(
        "/accounts/login/", {"username": "erin", "password": TEST_PASSWORD, "next": "/accounts/me/"}
    )
    assert response.status_code == 302 and response["Location"] == "/accounts/me/"
    assert b"erin" in client.get("/accounts/me/").content


def test_login_with_a_wrong_password_stays_on_the_form_with_an_error(client, engineer):
    response = client.post("/accounts/login/", {"username": "erin", "password": "guess"})
    assert response.status_code == 200
    assert b"Please enter a correct username and password" in response.content
    assert "_auth_user_id" not in client.session


def test_logout_is_a_post_that_ends_the_session(client, engineer):
    client.force_login(engineer)
    assert client.get("/accounts/logout/").status_code == 405  # a link cannot log you out
    assert client.post("/accounts/logout/").status_code == 302
    assert client.get("/api/me").status_code == 401


def test_account_page_lists_the_users_roles(client, curator):
    client.force_login(curator)
    html = client.get("/accounts/me/").content.decode()
    assert "<strong>engineer</strong>" in html and "<strong>curator</strong>" in html


def test_unknown_page_shows_the_sites_own_404_page(client):
    response = client.get("/no/such/page/")
    assert response.status_code == 404
    assert b"Not found" in response.content and b'href="/"' in response.content
