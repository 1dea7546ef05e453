"""`POST /api/auth/token/`: owners and peers get an API token with their password."""

from typing import Any

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from tests.factories import make_owner
from tests.owner_clients import PASSWORD, fresh_rate_limits  # noqa: F401

pytestmark = pytest.mark.django_db
URL = "/api/auth/token/"


def test_a_password_gets_a_token_that_opens_the_directory() -> None:
    """S9-AUTH-3: the directory is reached with a token obtained by signing in."""
    owner = make_owner()
    response = APIClient().post(
        URL, {"username": owner.username, "password": PASSWORD}, format="json"
    )
    assert response.status_code == 200
    token = response.json()["token"]
    client = APIClient()
    assert client.get("/api/directory/").status_code in (401, 403)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get("/api/directory/").status_code == 200


def test_a_wrong_password_gets_a_clear_422() -> None:
    """VX-OPS-6: well-formed credentials that match no account are refused by the domain (422),
    not as a request that breaks the schema (400)."""
    owner = make_owner()
    response = APIClient().post(
        URL, {"username": owner.username, "password": "wrong"}, format="json"
    )
    assert response.status_code == 422
    assert "non_field_errors" in response.json()
    assert "token" not in response.json()


@override_settings(VIRGO_TOKEN_RATE_LIMIT="3/h")
def test_password_guessing_is_rate_limited_per_ip() -> None:
    owner: Any = make_owner()
    client = APIClient(REMOTE_ADDR="203.0.113.9")
    for _ in range(3):
        assert (
            client.post(
                URL, {"username": owner.username, "password": "x"}, format="json"
            ).status_code
            == 422
        )
    limited = client.post(URL, {"username": owner.username, "password": PASSWORD}, format="json")
    assert limited.status_code == 429
    assert int(limited["Retry-After"]) > 0
    other = APIClient(REMOTE_ADDR="203.0.113.10")
    assert (
        other.post(
            URL, {"username": owner.username, "password": PASSWORD}, format="json"
        ).status_code
        == 200
    )
