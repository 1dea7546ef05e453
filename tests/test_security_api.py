"""The owners' API: CSRF on session writes, the mutation rate limit, body limits, headers."""

import json
from typing import Any

import pytest
from django.http import HttpResponseBase
from django.test import override_settings
from rest_framework.test import APIClient

from personas import services
from personas.models import Persona
from tests.factories import make_agent, make_owner, make_persona
from tests.owner_clients import (  # noqa: F401 (autouse fixture)
    PASSWORD,
    csrf_token,
    fresh_rate_limits,
    session_client,
    token_client,
)

pytestmark = pytest.mark.django_db

# Limits counted per hour: a window that rolled over in the middle of a test would reset the
# count, so the windows are long enough that a test never straddles one in practice.
HOURLY_2, HOURLY_3 = "2/h", "3/h"

SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "strict-origin-when-cross-origin",
}


def csp_directives(header: str) -> dict[str, str]:
    directives = (part.strip().split(None, 1) for part in header.split(";") if part.strip())
    return {name: value for name, value in directives}


@pytest.fixture
def owner() -> Any:
    return make_owner("ada")


@pytest.fixture
def persona(owner: Any) -> Persona:
    return make_persona(make_agent(owner), name="Reviewer")


def persona_url(persona: Persona) -> str:
    return f"/api/personas/{persona.uuid}/"


def assert_secure_json(response: HttpResponseBase) -> None:
    """S9-HDR-1, S9-HDR-2, S9-HDR-3, S9-HDR-4:
    on a JSON response, and the error (if any) is JSON too."""
    assert response["Content-Type"] == "application/json"
    json.loads(response.content)
    for header, value in SECURITY_HEADERS.items():
        assert response.get(header) == value, (header, response.get(header))
    assert csp_directives(response["Content-Security-Policy"])["default-src"] == "'none'"


# CSRF -------------------------------------------------------------------------------------------


def test_a_session_write_without_the_csrf_token_is_refused(owner: Any, persona: Persona) -> None:
    """S9-CSRF-1: a signed-in browser session cannot be ridden by a cross-site request."""
    client = session_client(owner)
    response = client.patch(persona_url(persona), {"name": "Forged"}, format="json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    persona.refresh_from_db()
    assert persona.name == "Reviewer"

    post = client.post("/api/agents/", {"name": "forged"}, format="json")
    assert post.status_code == 403


def test_a_session_write_with_the_csrf_token_succeeds(owner: Any, persona: Persona) -> None:
    """S9-CSRF-1: the per-form token (sent as X-CSRFToken) lets the owner's own page write."""
    client = session_client(owner)
    token = csrf_token(client)
    response = client.patch(
        persona_url(persona), {"name": "Renamed"}, format="json", HTTP_X_CSRFTOKEN=token
    )
    assert response.status_code == 200
    created = client.post(
        "/api/agents/",
        {"name": "deploy-bot", "granted_verbs": ["claim"], "granted_queues": ["reviews"]},
        format="json",
        HTTP_X_CSRFTOKEN=token,
    )
    assert created.status_code == 201


def test_session_reads_need_no_csrf_token(owner: Any, persona: Persona) -> None:
    assert session_client(owner).get(persona_url(persona)).status_code == 200


def test_token_authentication_needs_no_csrf_token(owner: Any, persona: Persona) -> None:
    """S9-CSRF-1: a token is not ambient authority, so it is not subject to CSRF."""
    client = token_client(owner)
    client.handler.enforce_csrf_checks = True
    response = client.patch(persona_url(persona), {"name": "Renamed"}, format="json")
    assert response.status_code == 200


def test_session_and_csrf_cookies_are_samesite(owner: Any) -> None:
    """S9-CSRF-1: SameSite cookie + per-form token."""
    client = APIClient()
    page = client.get("/admin/login/")
    assert page.cookies["csrftoken"]["samesite"] == "Lax"
    signed_in = client.post(
        "/admin/login/",
        {"username": "ada", "password": PASSWORD, "csrfmiddlewaretoken": csrf_of(page)},
    )
    assert signed_in.status_code == 302
    assert signed_in.cookies["sessionid"]["samesite"] == "Lax"
    assert signed_in.cookies["sessionid"]["httponly"]


def csrf_of(page: HttpResponseBase) -> str:
    return page.cookies["csrftoken"].value


# Rate limit -------------------------------------------------------------------------------------


@override_settings(VIRGO_MUTATION_RATE_LIMIT=HOURLY_3)
def test_owner_mutations_are_rate_limited_per_user_with_retry_after(
    owner: Any, persona: Persona
) -> None:
    """S9-RL-3: each owner has a mutation budget; the next write is 429 with Retry-After."""
    client = token_client(owner)
    for number in range(3):
        response = client.patch(persona_url(persona), {"name": f"N{number}"}, format="json")
        assert response.status_code == 200
    limited = client.patch(persona_url(persona), {"name": "Too many"}, format="json")
    assert limited.status_code == 429
    assert 1 <= int(limited["Retry-After"]) <= 3600
    assert_secure_json(limited)
    persona.refresh_from_db()
    assert persona.name == "N2"

    # Reads are not mutations, and the budget is per user, not global.
    assert client.get(persona_url(persona)).status_code == 200
    other = make_owner("grace")
    assert (
        token_client(other)
        .post(
            "/api/agents/",
            {"name": "x", "granted_verbs": ["claim"], "granted_queues": ["reviews"]},
            format="json",
        )
        .status_code
        == 201
    )


@override_settings(VIRGO_MUTATION_RATE_LIMIT=HOURLY_2)
def test_the_budget_is_shared_between_token_and_session_writes(
    owner: Any, persona: Persona
) -> None:
    """S9-RL-3: the limit is the user's, however they sign in."""
    token_client(owner).patch(persona_url(persona), {"name": "A"}, format="json")
    session = session_client(owner)
    token = csrf_token(session)
    ok = session.patch(persona_url(persona), {"name": "B"}, format="json", HTTP_X_CSRFTOKEN=token)
    assert ok.status_code == 200
    limited = session.patch(
        persona_url(persona), {"name": "C"}, format="json", HTTP_X_CSRFTOKEN=token
    )
    assert limited.status_code == 429


# Body size ---------------------------------------------------------------------------------------


def test_a_70_kib_persona_patch_gets_413_and_changes_nothing(owner: Any, persona: Persona) -> None:
    """S9-BODY-1: bodies over 64 KiB are refused before they are read; nothing changes."""
    before = (persona.system_prompt, persona.generation)
    body = json.dumps({"system_prompt": "x" * (70 * 1024)})
    response = token_client(owner).generic(
        "PATCH", persona_url(persona), body, content_type="application/json"
    )
    assert response.status_code == 413
    assert_secure_json(response)
    persona.refresh_from_db()
    assert (persona.system_prompt, persona.generation) == before


# Security headers on every status -------------------------------------------------------------


def test_headers_on_200_and_201(owner: Any, persona: Persona) -> None:
    """S9-HDR-1, S9-HDR-2, S9-HDR-3, S9-HDR-4:
    JSON responses carry CSP default-src 'none' and the three others."""
    client = token_client(owner)
    assert_secure_json(client.get("/api/personas/"))
    assert_secure_json(client.get(persona_url(persona)))
    created = client.post(
        "/api/agents/",
        {"name": "x", "granted_verbs": ["claim"], "granted_queues": ["reviews"]},
        format="json",
    )
    assert created.status_code == 201
    assert_secure_json(created)


def test_headers_on_400_401_403_and_404(owner: Any, persona: Persona) -> None:
    """S9-HDR-1, S9-HDR-2, S9-HDR-3, S9-HDR-4"""
    bad = token_client(owner).patch(persona_url(persona), {"skills": []}, format="json")
    assert bad.status_code == 400
    assert_secure_json(bad)
    anonymous = APIClient().get("/api/personas/")
    assert anonymous.status_code == 401
    assert_secure_json(anonymous)
    forged = session_client(owner).patch(persona_url(persona), {"name": "x"}, format="json")
    assert forged.status_code == 403
    assert_secure_json(forged)
    missing = token_client(make_owner("mallory")).get(persona_url(persona))
    assert missing.status_code == 404
    assert_secure_json(missing)


def test_headers_on_405(owner: Any, persona: Persona) -> None:
    """S9-HDR-1, S9-HDR-2, S9-HDR-3, S9-HDR-4"""
    response = token_client(owner).post(persona_url(persona), {}, format="json")
    assert response.status_code == 405
    assert_secure_json(response)


def test_a_failing_view_answers_500_in_json_with_the_headers(
    owner: Any, persona: Persona, monkeypatch: pytest.MonkeyPatch
) -> None:
    """S9-HDR-1, S9-HDR-2, S9-HDR-3, S9-HDR-4:
    even an unexpected failure gets the headers, and its body is JSON."""

    def broken(**kwargs: Any) -> None:
        raise RuntimeError("the database caught fire")

    monkeypatch.setattr(services, "persona_submit", broken)
    client = token_client(owner)
    client.raise_request_exception = False
    response = client.patch(persona_url(persona), {"name": "Renamed"}, format="json")
    assert response.status_code == 500
    assert_secure_json(response)
    assert response.json()["code"] == "server_error"
    assert "fire" not in response.content.decode()
