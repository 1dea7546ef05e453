"""A malformed API token is refused like a wrong one, on every DRF endpoint (virgo.api).

Regression: a key with a NUL byte reached the token lookup, PostgreSQL refused the query, and
every endpoint answered 500 for `Authorization: Token a<NUL>b`. (SQLite looks such a key up
like any other, so the PostgreSQL run of the suite is the one that shows the bug.)
"""

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client
from rest_framework.authtoken.models import Token

from personas.models import Persona
from tests.factories import make_agent, make_owner, make_persona

pytestmark = pytest.mark.django_db

MALFORMED = ["a\x00b", "\x00" * 40, "é" * 10, "a" * 41, "a b", "a;b", "a/../b"]
WRONG = "0" * 40


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


def documented_operations(owner: Any) -> list[tuple[str, str]]:
    """Every operation of /api/schema/ that DRF authenticates, with real ids filled in."""
    agent = make_agent(owner)
    persona = make_persona(agent)
    token = Token.objects.create(user=owner).key
    response = Client().get("/api/schema/?format=json", headers={"Authorization": f"Token {token}"})
    document = json.loads(response.content)
    values = {"id": agent.pk, "uuid": persona.uuid}
    return [
        (method, path.format(**values))
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if path.startswith("/api/") and not path.startswith("/api/channel/")
    ]


@pytest.mark.parametrize("key", MALFORMED)
def test_a_malformed_key_gets_the_answer_a_wrong_key_gets(key: str) -> None:
    """S9-AUTH-1, S9-AUTH-2: on every endpoint, the status a well-formed key that no one holds
    gets (401, or 403 where the session is asked first), saying the token is invalid."""
    operations = documented_operations(make_owner("ada"))
    before = list(Persona.objects.values())
    for method, path in operations:
        answers = []
        for candidate in (key, WRONG):
            response = Client().generic(
                method.upper(),
                path,
                data="{}",
                content_type="application/json",
                headers={"Authorization": f"Token {candidate}"},
            )
            answers.append((response.status_code, json.loads(response.content)))
        (status, body), (wrong_status, _) = answers
        assert status == wrong_status, f"{method.upper()} {path}"
        assert status in (401, 403), f"{method.upper()} {path}"
        assert body["detail"].startswith("Invalid token"), body
    assert list(Persona.objects.values()) == before


def test_a_real_key_still_opens_the_api() -> None:
    owner = make_owner("ada")
    token = Token.objects.create(user=owner).key
    response = Client().get("/api/personas/", headers={"Authorization": f"Token {token}"})
    assert response.status_code == 200
