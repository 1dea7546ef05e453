"""Security headers on every response of the card endpoint and the directory, every status."""

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache
from django.http import HttpResponseBase
from django.test import Client

from cards import views
from cards.models import PublishedCard
from personas.models import Persona
from tests.factories import make_agent, make_owner, make_persona

pytestmark = pytest.mark.django_db

MISSING_PATH = "/a/00000000-0000-4000-8000-000000000000/.well-known/agent-card.json"
DIRECTORY = "/api/directory/"


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def persona() -> Persona:
    return make_persona(make_agent(make_owner()), discoverable=True)


def card_path(persona: Persona) -> str:
    return f"/a/{persona.uuid}/.well-known/agent-card.json"


def assert_security_headers(response: HttpResponseBase, *, csp: str) -> None:
    """S9-HDR-1, S9-HDR-2, S9-HDR-3, S9-HDR-4 on one response."""
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "strict-origin-when-cross-origin"
    directives = [part.strip() for part in response["Content-Security-Policy"].split(";")]
    assert csp in directives
    assert not any(d.startswith("default-src") and d != csp for d in directives)


def assert_json_error(response: HttpResponseBase, status: int) -> None:
    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    body = json.loads(response.content)
    assert set(body) >= {"detail", "code"}
    assert_security_headers(response, csp="default-src 'none'")


def test_200_and_head(persona: Persona) -> None:
    """S9-HDR-1, S9-HDR-2, S9-HDR-3, S9-HDR-4, S9-HDR-5: the card is JSON with default-src 'none',
    on GET and HEAD."""
    for response in (Client().get(card_path(persona)), Client().head(card_path(persona))):
        assert response.status_code == 200
        assert response["Content-Type"] == "application/json"
        assert_security_headers(response, csp="default-src 'none'")


def test_304_keeps_the_json_policy(persona: Persona) -> None:
    """S9-HDR-1, S9-HDR-2, S9-HDR-3, S9-HDR-4: a 304 has no Content-Type, yet it must not hand a
    cache a looser policy than the card it revalidates."""
    etag = PublishedCard.objects.get(persona=persona).etag
    response = Client().get(card_path(persona), headers={"If-None-Match": etag})
    assert response.status_code == 304
    assert_security_headers(response, csp="default-src 'none'")


def test_404_for_a_missing_id_and_a_malformed_one(persona: Persona) -> None:
    """S9-HDR-1, S9-HDR-2, S9-HDR-3, S9-HDR-4: the view's 404 and the URL resolver's (an id that is
    no UUID) alike."""
    assert_json_error(Client().get(MISSING_PATH), 404)
    assert_json_error(Client().get("/a/not-a-uuid/.well-known/agent-card.json"), 404)


def test_405(persona: Persona) -> None:
    """S9-HDR-1, S9-HDR-2, S9-HDR-3, S9-HDR-4, S9-SCN-8"""
    response = Client().delete(card_path(persona))
    assert_json_error(response, 405)
    assert response["Allow"] == "GET, HEAD"


def test_413_from_the_view_and_from_the_body_limit(persona: Persona) -> None:
    """S9-HDR-1, S9-HDR-2, S9-HDR-3, S9-HDR-4, S9-BODY-1: a small body refused by the card view, and
    a body over 64 KiB refused by the middleware before any view runs."""
    small = Client().generic("GET", card_path(persona), data=b"x", content_type="text/plain")
    assert_json_error(small, 413)
    large = Client().generic(
        "GET", card_path(persona), data=b"x" * (64 * 1024 + 1), content_type="text/plain"
    )
    assert_json_error(large, 413)
    assert json.loads(large.content)["code"] == "payload_too_large"


def test_412(persona: Persona) -> None:
    """S9-HDR-1, S9-HDR-2, S9-HDR-3, S9-HDR-4: a failed If-Match is answered in JSON too."""
    response = Client().get(card_path(persona), headers={"If-Match": '"not-the-card"'})
    assert_json_error(response, 412)


def test_429(persona: Persona, settings: Any) -> None:
    """S9-HDR-1, S9-HDR-2, S9-HDR-3, S9-HDR-4, S9-RL-1"""
    settings.VIRGO_CARD_RATE_LIMIT = "1/m"
    client = Client()
    client.get(card_path(persona))
    response = client.get(card_path(persona))
    assert_json_error(response, 429)
    assert int(response["Retry-After"]) >= 1


def test_500_when_publishing_fails(persona: Persona, monkeypatch: pytest.MonkeyPatch) -> None:
    """S9-HDR-1, S9-HDR-2, S9-HDR-3, S9-HDR-4: a crash inside the view still leaves with the
    headers, as JSON."""

    def broken_publisher(persona: Persona) -> PublishedCard:
        raise RuntimeError("renderer exploded")

    PublishedCard.objects.filter(persona=persona).delete()
    monkeypatch.setattr(views, "publish_card", broken_publisher)
    response = Client(raise_request_exception=False).get(card_path(persona))
    assert_json_error(response, 500)
    assert "exploded" not in response.content.decode()


def test_400_for_a_disallowed_host(persona: Persona) -> None:
    """S9-HDR-1, S9-HDR-2, S9-HDR-3, S9-HDR-4, S9-URL-1: a Host outside ALLOWED_HOSTS is refused,
    with the headers."""
    response = Client().get(card_path(persona), headers={"Host": "evil.example"})
    assert_json_error(response, 400)


def test_directory_200_403_404_and_429(persona: Persona, settings: Any) -> None:
    """S9-HDR-1, S9-HDR-2, S9-HDR-3, S9-HDR-4: the directory's answers, signed in or not, served or
    refused."""
    anonymous = Client().get(DIRECTORY)
    assert anonymous.status_code in (401, 403)
    assert_security_headers(anonymous, csp="default-src 'none'")

    settings.VIRGO_DIRECTORY_RATE_LIMIT = "2/m"
    client = Client()
    client.force_login(make_owner("reader"))
    ok = client.get(DIRECTORY)
    assert ok.status_code == 200
    assert_security_headers(ok, csp="default-src 'none'")
    assert_json_error(client.get(DIRECTORY + "?cursor=%21not-base64%21"), 404)
    assert_json_error(client.get(DIRECTORY), 429)


def test_html_pages_get_default_src_self() -> None:
    """S9-HDR-1: HTML keeps the site-only policy; only JSON is locked to 'none'."""
    response = Client().get("/admin/login/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    assert_security_headers(response, csp="default-src 'self'")
