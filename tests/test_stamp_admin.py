"""Owners see their personas' generations and stamps in the admin; nobody else does."""

import pytest
from django.test import Client

from personas.models import Persona
from tests.factories import make_agent, make_owner, make_persona, stop_standing, update_persona

pytestmark = pytest.mark.django_db


@pytest.fixture
def persona() -> Persona:
    return make_persona(make_agent(make_owner("olivia")), name="Reviewer")


def client_for(user: object | None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)  # type: ignore[arg-type]
    return client


def stamp_url(persona: Persona, number: int) -> str:
    return f"/admin/personas/persona/{persona.pk}/generations/{number}/stamp/"


def test_the_owner_sees_generations_and_the_stamp(persona: Persona) -> None:
    """V1-STAMP-1: the persona's page lists each generation with its hash and standing, and
    the stamp reads back read-only, its file checked against the stored bytes."""
    owner = persona.agent.owner
    generation = persona.generations.get()
    page = client_for(owner).get(f"/admin/personas/persona/{persona.pk}/change/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "Generations and capability stamps" in body
    assert generation.composition_hash in body
    assert f'href="{stamp_url(persona, 1)}"' in body

    stamp = client_for(owner).get(stamp_url(persona, 1))
    assert stamp.status_code == 200
    text = stamp.content.decode()
    assert generation.stamp_hash in text
    assert "matches the stored stamp" in text
    assert "<code>workspace_write</code>" in text
    assert "<code>workspace.write</code>" in text
    assert "<textarea" not in text and 'value="Save"' not in text


def test_a_generation_that_does_not_stand_says_which_tool_is_missing(persona: Persona) -> None:
    """V1-INV-2: the admin shows exactly why a generation does not stand."""
    stop_standing(persona, "set_summary")
    body = client_for(persona.agent.owner).get(stamp_url(persona, 2)).content.decode()
    assert "not standing:" in body
    assert "not standing: missing tool set_summary" in body
    page = client_for(persona.agent.owner).get(f"/admin/personas/persona/{persona.pk}/change/")
    assert "not standing: missing tool set_summary" in page.content.decode()


def test_the_diff_lists_tools_added_and_removed(persona: Persona) -> None:
    verbs = [v for v in persona.verb_subset if v != "claim"]
    update_persona(persona, verb_subset=[*verbs, "trigger_webhook"])
    owner = client_for(persona.agent.owner)
    assert (
        f"/admin/personas/persona/{persona.pk}/generations/2/diff/1/"
        in owner.get(stamp_url(persona, 2)).content.decode()
    )
    diff = owner.get(f"/admin/personas/persona/{persona.pk}/generations/2/diff/1/")
    assert diff.status_code == 200
    rows = diff.content.decode()
    assert "<td>added</td><td><code>trigger_webhook</code></td>" in rows
    assert "<td>removed</td><td><code>claim</code></td>" in rows
    assert "1 → 2" in rows


def test_other_owners_get_no_stamp(persona: Persona) -> None:
    """V1-STAMP-1: stamps are owner-private; another staff owner gets a 404, as for no stamp."""
    other = make_owner("mallory")
    response = client_for(other).get(stamp_url(persona, 1))
    assert response.status_code == 404
    diff = client_for(other).get(f"/admin/personas/persona/{persona.pk}/generations/1/diff/1/")
    assert diff.status_code == 404


def test_a_superuser_sees_any_stamp(persona: Persona) -> None:
    moderator = make_owner("root")
    moderator.is_superuser = True
    moderator.save()
    assert client_for(moderator).get(stamp_url(persona, 1)).status_code == 200


def test_anonymous_visitors_are_sent_to_sign_in(persona: Persona) -> None:
    response = client_for(None).get(stamp_url(persona, 1))
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]
