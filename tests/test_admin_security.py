"""The admin as an HTML management surface: headers on every status, CSRF, rate limit, body
limit, and pages that load nothing from outside the site."""

from typing import Any
from urllib.parse import urlsplit

import pytest
from django.test import Client, override_settings

from personas import services
from personas.models import Agent, Persona
from tests.admin_support import assert_secure_html
from tests.factories import REVIEWER_VERBS, make_agent, make_owner, make_persona
from tests.owner_clients import (  # noqa: F401 (autouse fixture)
    form_data,
    fresh_rate_limits,
    loaded_urls,
    token_client,
)

pytestmark = pytest.mark.django_db

# Limits counted per hour: a window that rolled over in the middle of a test would reset the
# count, so the windows are long enough that a test never straddles one in practice.
HOURLY_2 = "2/h"

CHANGELIST = "/admin/personas/persona/"


def signed_in(user: Any, **client_options: Any) -> Client:
    client = Client(**client_options)
    client.force_login(user)
    return client


@pytest.fixture
def owner() -> Any:
    return make_owner("ada")


@pytest.fixture
def agent(owner: Any) -> Agent:
    return make_agent(owner, name="ada-bot")


@pytest.fixture
def persona(agent: Agent) -> Persona:
    return make_persona(agent, name="Ada Reviewer", verb_subset=REVIEWER_VERBS)


def toggle_url(persona: Persona) -> str:
    return f"/admin/personas/persona/{persona.pk}/discoverability/"


def change_url(persona: Persona) -> str:
    return f"/admin/personas/persona/{persona.pk}/change/"


# Headers on every status ----------------------------------------------------------------------


def test_headers_on_200_and_302(owner: Any, persona: Persona) -> None:
    """S9-HDR-1, S9-HDR-2, S9-HDR-3, S9-HDR-4"""
    client = signed_in(owner)
    for url in ("/admin/", CHANGELIST, change_url(persona), "/admin/personas/agent/"):
        response = client.get(url)
        assert response.status_code == 200, url
        assert_secure_html(response)
    redirect = Client().get(CHANGELIST)
    assert redirect.status_code == 302
    assert redirect["X-Frame-Options"] == "DENY"


def test_headers_on_404(owner: Any) -> None:
    """S9-HDR-1, S9-HDR-2, S9-HDR-3, S9-HDR-4"""
    response = signed_in(owner).get("/admin/personas/no-such-model/")
    assert response.status_code == 404
    assert_secure_html(response)


def test_headers_on_405(owner: Any, persona: Persona) -> None:
    """S9-HDR-1, S9-HDR-2, S9-HDR-3, S9-HDR-4: the discoverability toggle accepts only POST."""
    response = signed_in(owner).get(toggle_url(persona))
    assert response.status_code == 405
    assert response["Allow"] == "POST"
    assert_secure_html(response)


def test_a_70_kib_admin_post_gets_413_and_changes_nothing(owner: Any, persona: Persona) -> None:
    """S9-BODY-1, S9-HDR-1, S9-HDR-2, S9-HDR-3, S9-HDR-4:
    an oversized persona form is refused before it is read."""
    client = signed_in(owner)
    data = {**form_data(client.get(change_url(persona)), "persona_form"), "_save": "Save"}
    data["system_prompt"] = "x" * (70 * 1024)
    response = client.post(change_url(persona), data)
    assert response.status_code == 413
    for header in ("X-Frame-Options", "X-Content-Type-Options", "Referrer-Policy"):
        assert header in response
    assert "Content-Security-Policy" in response
    persona.refresh_from_db()
    assert persona.system_prompt != data["system_prompt"]
    assert persona.generation == 1


@override_settings(VIRGO_MUTATION_RATE_LIMIT=HOURLY_2)
def test_admin_changes_are_rate_limited_with_retry_after(owner: Any, persona: Persona) -> None:
    """S9-RL-3, S9-HDR-1, S9-HDR-2, S9-HDR-3, S9-HDR-4:
    the admin's writes spend the owner's mutation budget."""
    client = signed_in(owner)
    assert client.post(toggle_url(persona), {"discoverable": "on"}).status_code == 302
    assert client.post(toggle_url(persona), {"discoverable": "off"}).status_code == 302
    limited = client.post(toggle_url(persona), {"discoverable": "on"})
    assert limited.status_code == 429
    assert 1 <= int(limited["Retry-After"]) <= 3600
    assert_secure_html(limited)
    assert "too many changes" in limited.content.decode()
    persona.refresh_from_db()
    assert not persona.discoverable
    assert client.get(CHANGELIST).status_code == 200


@override_settings(VIRGO_MUTATION_RATE_LIMIT=HOURLY_2)
def test_the_api_and_the_admin_share_one_budget(owner: Any, persona: Persona) -> None:
    """S9-RL-3: owner mutation endpoints inherit the web UI's session limit: one budget."""
    token_client(owner).patch(f"/api/personas/{persona.uuid}/", {"name": "A"}, format="json")
    client = signed_in(owner)
    assert client.post(toggle_url(persona), {"discoverable": "on"}).status_code == 302
    assert client.post(toggle_url(persona), {"discoverable": "off"}).status_code == 429
    api = token_client(owner).patch(f"/api/personas/{persona.uuid}/", {"name": "B"}, format="json")
    assert api.status_code == 429


def test_a_failing_admin_save_answers_500_with_the_headers(
    owner: Any, persona: Persona, monkeypatch: pytest.MonkeyPatch
) -> None:
    """S9-HDR-1, S9-HDR-2, S9-HDR-3, S9-HDR-4: an unexpected failure still carries every header."""
    client = signed_in(owner, raise_request_exception=False)
    data = {**form_data(client.get(change_url(persona)), "persona_form"), "_save": "Save"}
    data["name"] = "Renamed"

    def broken(**kwargs: Any) -> None:
        raise RuntimeError("the database caught fire")

    monkeypatch.setattr(services, "persona_submit", broken)
    response = client.post(change_url(persona), data)
    assert response.status_code == 500
    assert_secure_html(response)
    assert "fire" not in response.content.decode()
    persona.refresh_from_db()
    assert persona.name == "Ada Reviewer"


# CSRF -------------------------------------------------------------------------------------------


def test_admin_writes_need_the_csrf_token(owner: Any, persona: Persona) -> None:
    """S9-CSRF-1: the per-form token is required; a cross-site post changes nothing."""
    client = signed_in(owner, enforce_csrf_checks=True)
    forged = client.post(toggle_url(persona), {"discoverable": "on"})
    assert forged.status_code == 403
    assert_secure_html(forged)
    persona.refresh_from_db()
    assert not persona.discoverable

    page = client.get(CHANGELIST)
    token = form_data(page, "changelist-form")["csrfmiddlewaretoken"]
    accepted = client.post(
        toggle_url(persona), {"discoverable": "on", "csrfmiddlewaretoken": token}
    )
    assert accepted.status_code == 302
    persona.refresh_from_db()
    assert persona.discoverable


# Nothing from outside the site ------------------------------------------------------------------


def test_no_admin_page_loads_anything_from_another_host(
    owner: Any, agent: Agent, persona: Persona
) -> None:
    """S9-HDR-1: pages refer only to this site (no CDN); the card link is site-relative."""
    moderator = make_owner("moderator")
    moderator.is_superuser = True
    moderator.save()
    pages = {
        Client(): ["/admin/login/"],
        signed_in(owner): [
            "/admin/",
            CHANGELIST,
            change_url(persona),
            "/admin/personas/persona/add/",
            f"/admin/personas/persona/add/?agent={agent.pk}",
            f"/admin/personas/persona/{persona.pk}/delete/",
            "/admin/personas/agent/",
            f"/admin/personas/agent/{agent.pk}/change/",
            "/admin/personas/skill/",
            "/admin/personas/owneridentity/",
            "/admin/personas/auditevent/",
            "/admin/personas/no-such-model/",
        ],
        signed_in(moderator): ["/admin/", CHANGELIST, change_url(persona), "/admin/auth/user/"],
    }
    for client, urls in pages.items():
        for url in urls:
            response = client.get(url)
            assert response.status_code in (200, 404), url
            external = [u for u in loaded_urls(response) if urlsplit(u).netloc or "//" in u[:8]]
            assert external == [], (url, external)
