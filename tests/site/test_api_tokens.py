"""Personal API tokens: created on the account page, shown once, stored hashed, accepted until revoked."""

from __future__ import annotations

import pytest

from accounts.models import ApiToken
from accounts.services import revoke_token

pytestmark = pytest.mark.django_db


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_api_me_returns_the_token_owner_and_roles(client, make_token, curator):
    response = client.get("/api/me", headers=bearer(make_token(curator)))
    assert response.status_code == 200
    assert response.json() == {
        "username": "cora",
        "email": "",
        "roles": ["engineer", "curator"],
        "is_superuser": False,
    }


def test_api_me_answers_401_without_credentials(client):
    assert client.get("/api/me").status_code == 401


def test_revoked_token_is_refused_with_401(client, make_token, engineer):
    token = make_token(engineer)
    assert client.get("/api/me", headers=bearer(token)).status_code == 200
    revoke_token(engineer, ApiToken.objects.get(user=engineer).pk)
    response = client.get("/api/me", headers=bearer(token))
    assert response.status_code == 401
    assert "not valid" in response.json()["detail"]


def test_wrong_token_is_refused_with_401(client, make_token, engineer):
    token = make_token(engineer)
    assert (
        client.get("/api/me", headers=bearer(token[:-1] + ("A" if token[-1] != "A" else "B"))).status_code
        == 401
    )
    assert client.get("/api/me", headers=bearer("not-a-token")).status_code == 401


def test_malformed_authorization_header_is_refused_with_401(client, make_token, engineer):
    response = client.get("/api/me", headers={"Authorization": make_token(engineer)})
    assert response.status_code == 401
    assert "Bearer" in response.json()["detail"]


def test_token_of_a_deactivated_user_is_refused(client, make_token, engineer):
    token = make_token(engineer)
    engineer.is_active = False
    engineer.save()
    assert client.get("/api/me", headers=bearer(token)).status_code == 401


def test_account_page_shows_a_new_token_once_and_stores_only_its_digest(client, engineer):
    client.force_login(engineer)
    created = client.post("/accounts/tokens/", {"name": "laptop CLI"})
    assert created.status_code == 201
    secret = created.context["new_secret"]
    assert secret.encode() in created.content
    stored = ApiToken.objects.get(user=engineer)
    assert stored.name == "laptop CLI"
    assert secret not in (stored.digest, stored.prefix) and secret.startswith(stored.prefix)
    page_later = client.get("/accounts/me/")
    assert b"laptop CLI" in page_later.content
    assert secret.encode() not in page_later.content
    assert client.get("/api/me", headers=bearer(secret)).json()["username"] == "erin"


def test_token_without_a_name_is_not_created(client, engineer):
    client.force_login(engineer)
    response = client.post("/accounts/tokens/", {"name": "  "})
    assert response.status_code == 400
    assert not ApiToken.objects.exists()


def test_revoking_from_the_account_page_stops_the_token(client, make_token, engineer):
    token = make_token(engineer)
    client.force_login(engineer)
    stored = ApiToken.objects.get(user=engineer)
    response = client.post(f"/accounts/tokens/{stored.pk}/revoke/", follow=True)
    assert "Revoked the token" in response.content.decode()
    assert client.get("/api/me", headers=bearer(token)).status_code == 401


def test_nobody_can_revoke_another_users_token(client, make_token, engineer, teammate):
    token = make_token(engineer)
    client.force_login(teammate)
    stored = ApiToken.objects.get(user=engineer)
    assert client.post(f"/accounts/tokens/{stored.pk}/revoke/").status_code == 404
    assert client.get("/api/me", headers=bearer(token)).status_code == 200


def test_token_use_is_recorded_on_the_token(client, make_token, engineer):
    token = make_token(engineer)
    client.get("/api/me", headers=bearer(token))
    assert ApiToken.objects.get(user=engineer).last_used_at is not None
