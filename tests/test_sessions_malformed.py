"""A malformed session cookie is no session (virgo.sessions), never a server error.

Regression: on PostgreSQL a `sessionid` cookie with a NUL byte reached the session lookup and
PostgreSQL refused the query, so every page that consults the session answered 500, the public
card endpoint for an unlisted or unknown persona among them. (Whether a header with a NUL byte
reaches Django at all depends on the server in front; Django's own servers pass it on.)
"""

from typing import Any

import pytest
from django.test import Client

from personas.models import Persona
from tests.factories import make_agent, make_owner, make_persona

pytestmark = pytest.mark.django_db

MALFORMED = ["abcdefgh\x00ij", "ABCDEFGHIJKL", "é" * 32, "abcdefgh/../ij", "x" * 4096]


@pytest.fixture
def hidden() -> Persona:
    return make_persona(make_agent(make_owner("ada")))


@pytest.mark.parametrize("cookie", MALFORMED)
def test_a_malformed_session_cookie_is_answered_as_no_session(hidden: Persona, cookie: str) -> None:
    """S9-AUTH-1, S9-SCN-9: the answers an anonymous caller gets, cookie or not."""
    expected = {
        f"/a/{hidden.uuid}/.well-known/agent-card.json": 404,
        "/api/personas/": 401,
        "/api/directory/": 401,
        "/api/docs/": 302,
        "/admin/": 302,
    }
    client = Client()
    client.cookies["sessionid"] = cookie
    assert {path: client.get(path).status_code for path in expected} == expected


def test_a_real_session_still_signs_the_owner_in(hidden: Persona) -> None:
    owner: Any = hidden.agent.owner
    client = Client()
    client.force_login(owner)
    assert client.cookies["sessionid"].value.isalnum()
    assert client.get(f"/a/{hidden.uuid}/.well-known/agent-card.json").status_code == 200
    assert client.get("/api/personas/").status_code == 200
