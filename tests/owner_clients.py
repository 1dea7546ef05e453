"""HTTP clients signed in the ways owners sign in: token, session (with real CSRF checks)."""

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

PASSWORD = "correct horse battery staple"  # the factories' password for every owner


def token_client(user: Any) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def session_client(user: Any, *, enforce_csrf_checks: bool = True) -> APIClient:
    """A browser-like session: signed in with a password, CSRF enforced like a real request."""
    client = APIClient(enforce_csrf_checks=enforce_csrf_checks)
    assert client.login(username=user.get_username(), password=PASSWORD)
    return client


def csrf_token(client: APIClient) -> str:
    """The CSRF secret a page hands the browser (the admin index sets the cookie)."""
    client.get("/admin/")
    return client.cookies["csrftoken"].value


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> Iterator[None]:
    """Rate-limit counters live in the local-memory cache; each test starts with none."""
    cache.clear()
    yield
    cache.clear()
