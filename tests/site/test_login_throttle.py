"""Issue 36: login throttling. Wrong passwords for one username from one address lock that pair for a while,
with a page saying why and for how long; the right password then does not let anyone in either."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.test import Client

from tests.conftest import TEST_PASSWORD

pytestmark = pytest.mark.django_db


def _log_in(client: Client, username: str, password: str, address: str = "10.0.0.1"):
    return client.post("/accounts/login/", {"username": username, "password": password}, REMOTE_ADDR=address)


def test_after_the_limit_even_the_right_password_is_refused_with_a_clear_message(engineer, settings):
    settings.AXES_FAILURE_LIMIT = 5
    client = Client()
    for _ in range(4):
        assert _log_in(client, engineer.username, "wrong").status_code == 200  # the form again, with its error
    locked = _log_in(client, engineer.username, "wrong")
    assert locked.status_code == 429
    page = _log_in(client, engineer.username, TEST_PASSWORD)
    assert page.status_code == 429
    text = page.content.decode()
    assert "5 wrong passwords in a row" in text and "for 15 minutes" in text and engineer.username in text
    assert "_auth_user_id" not in client.session


def test_the_lock_holds_one_username_from_one_address_only(engineer, teammate, settings):
    settings.AXES_FAILURE_LIMIT = 3
    for _ in range(3):
        _log_in(Client(), engineer.username, "wrong", "10.0.0.1")
    assert _log_in(Client(), engineer.username, TEST_PASSWORD, "10.0.0.1").status_code == 429
    # A colleague at the same address, and the same person elsewhere, are not locked out by a stranger's guesses.
    assert _log_in(Client(), teammate.username, TEST_PASSWORD, "10.0.0.1").status_code == 302
    assert _log_in(Client(), engineer.username, TEST_PASSWORD, "10.0.0.2").status_code == 302


def test_a_right_password_before_the_limit_resets_the_count(engineer, settings):
    settings.AXES_FAILURE_LIMIT = 3
    for _ in range(2):
        _log_in(Client(), engineer.username, "wrong")
    assert _log_in(Client(), engineer.username, TEST_PASSWORD).status_code == 302
    for _ in range(2):
        _log_in(Client(), engineer.username, "wrong")
    assert _log_in(Client(), engineer.username, TEST_PASSWORD).status_code == 302
    for _ in range(3):  # counted from the reset: the third in a row locks
        _log_in(Client(), engineer.username, "wrong")
    assert _log_in(Client(), engineer.username, TEST_PASSWORD).status_code == 429


def test_an_admin_lifts_a_lock_with_the_command(engineer, settings):
    settings.AXES_FAILURE_LIMIT = 2
    for _ in range(2):
        _log_in(Client(), engineer.username, "wrong")
    assert _log_in(Client(), engineer.username, TEST_PASSWORD).status_code == 429
    call_command("axes_reset_username", engineer.username)
    assert _log_in(Client(), engineer.username, TEST_PASSWORD).status_code == 302


def test_the_admin_login_is_throttled_too(site_admin, settings):
    settings.AXES_FAILURE_LIMIT = 2
    for _ in range(2):
        Client().post("/admin/login/", {"username": site_admin.username, "password": "wrong"}, REMOTE_ADDR="10.0.0.9")
    response = Client().post("/admin/login/", {"username": site_admin.username, "password": TEST_PASSWORD},
                             REMOTE_ADDR="10.0.0.9")
    assert response.status_code == 429
