"""A revoked persona's tombstone outlives its records (VX-TRUST-5, issue 24).

Its owner may revoke it but never unsay the revocation: deleting the persona, or the agent it
belongs to, is refused to them in the service, the API and the admin. A superuser may purge it;
the tombstone then stays, answered at the card URL as before, and the purge is in the audit
trail. However else the row goes (its owner's account deleted), the tombstone is kept too.
"""

import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.test import Client
from rest_framework.test import APIClient

from cards.signing import verify_document
from personas import audit
from personas.models import Agent, AuditEvent, Persona, PurgedPersona
from personas.services import agent_delete, persona_delete, persona_purge
from tests.factories import make_agent, make_owner, make_persona, update_persona
from tests.revocation_support import get_card, moderator, revoke

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def private_home(tmp_path: Any, settings: Any) -> None:
    settings.VIRGO_HOME = tmp_path / "home"


@pytest.fixture
def owner() -> Any:
    return make_owner()


@pytest.fixture
def revoked(owner: Any) -> Persona:
    persona = make_persona(make_agent(owner), discoverable=True)
    revoke(persona, owner)
    return Persona.objects.get(pk=persona.pk)


def tombstone_of(persona_card_path: str) -> dict[str, Any]:
    response = Client().get(persona_card_path)
    assert response.status_code == 410, response.content
    document = json.loads(response.content)
    verify_document(document)
    del document["signatures"]
    return document


def test_the_owner_cannot_delete_a_revoked_persona_or_its_agent(
    revoked: Persona, owner: Any
) -> None:
    """VX-TRUST-5: the service refuses the owner, naming why and who may; the persona and its
    410 stay, and no purge is recorded."""
    before = tombstone_of(revoked.card_path)
    with pytest.raises(PermissionDenied, match="a superuser may purge it"):
        persona_delete(persona=revoked, actor=owner)
    with pytest.raises(PermissionDenied, match="has revoked personas"):
        agent_delete(agent=revoked.agent, actor=owner)
    with pytest.raises(PermissionDenied, match="a superuser may purge it"):
        persona_purge(persona=revoked, actor=owner)
    assert Persona.objects.filter(pk=revoked.pk).exists()
    assert not PurgedPersona.objects.exists()
    assert tombstone_of(revoked.card_path) == before


def test_a_persona_whose_current_generation_is_revoked_is_kept_alike(owner: Any) -> None:
    """VX-TRUST-5: a revoked generation has a tombstone of its own, so the same rule holds."""
    persona = make_persona(make_agent(owner), discoverable=True)
    revoke(persona, owner, generation=1)
    persona.refresh_from_db()
    assert not persona.is_revoked and persona.tombstone() is not None
    with pytest.raises(PermissionDenied):
        persona_delete(persona=persona, actor=owner)
    with pytest.raises(PermissionDenied, match="has revoked personas"):
        agent_delete(agent=persona.agent, actor=owner)
    assert list(Persona.objects.with_tombstone()) == [persona]
    assert Persona.objects.filter(pk=persona.pk).exists()


def test_a_persona_that_was_never_revoked_is_deleted_by_its_owner_revoked_first(
    owner: Any,
) -> None:
    """VX-TRUST-5, VX-TRUST-9: the rule is about tombstones the owner did not make: a persona
    never revoked is deleted by its owner, revoked in the same act, so its card answers 410 with
    its tombstone where it would have been simply gone."""
    persona = make_persona(make_agent(owner), discoverable=True)
    path = persona.card_path
    persona_delete(persona=persona, actor=owner)
    assert not Persona.objects.filter(pk=persona.pk).exists()
    kept = PurgedPersona.objects.get(uuid=persona.uuid)
    assert (kept.revocation_reason, kept.listed) == ("retired", True)
    assert Client().get(path).status_code == 410


def test_the_api_refuses_the_owner_deleting_the_agent(revoked: Persona, owner: Any) -> None:
    """VX-TRUST-5: DELETE of the agent is a 403 that says why; everything stays."""
    client = APIClient()
    client.force_authenticate(owner)
    response = client.delete(f"/api/agents/{revoked.agent_id}/")
    assert response.status_code == 403, response.content
    assert "superuser may purge" in response.json()["detail"]
    assert Agent.objects.filter(pk=revoked.agent_id).exists()
    assert get_card(revoked).status_code == 410


def test_the_admin_shows_the_owner_why_it_will_not_delete(revoked: Persona, owner: Any) -> None:
    """VX-TRUST-5: the admin's delete page for the persona, and for its agent, lists the revoked
    personas as what the owner may not delete, and a confirming POST deletes nothing."""
    client = Client()
    client.force_login(owner)
    for url in (
        f"/admin/personas/persona/{revoked.pk}/delete/",
        f"/admin/personas/agent/{revoked.agent_id}/delete/",
    ):
        page = client.get(url)
        assert page.status_code == 200
        assert b"only a superuser may purge" in page.content, url
        assert client.post(url, {"post": "yes"}).status_code in (200, 403), url
    assert Persona.objects.filter(pk=revoked.pk).exists()
    assert Agent.objects.filter(pk=revoked.agent_id).exists()


def test_a_superuser_purges_and_the_tombstone_stays_signed_as_before(revoked: Persona) -> None:
    """VX-TRUST-5: the purge deletes the persona, keeps exactly what its tombstone said (no name,
    no prompt), answers it at the card URL as before, and records who purged what."""
    before = tombstone_of(revoked.card_path)
    admin = moderator()
    persona_purge(persona=revoked, actor=admin)
    assert not Persona.objects.filter(pk=revoked.pk).exists()
    assert tombstone_of(revoked.card_path) == before
    kept = PurgedPersona.objects.get()
    assert (kept.uuid, kept.purged_by, kept.listed) == (revoked.uuid, admin, True)
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.PURGED)
    assert event.actor == admin
    assert event.data["persona"] == str(revoked.uuid)
    assert event.data["reason_code"] == "compromised"
    assert event.data["via"] == "purge"


def test_a_purged_persona_that_was_never_listed_stays_404(owner: Any) -> None:
    """VX-TRUST-5: an id that was never public does not become findable by being purged."""
    hidden = make_persona(make_agent(owner))
    revoke(hidden, owner)
    persona_purge(persona=Persona.objects.get(pk=hidden.pk), actor=moderator())
    assert PurgedPersona.objects.get().listed is False
    signed_in = Client()
    signed_in.force_login(owner)
    assert get_card(hidden, signed_in).status_code == 404
    assert get_card(hidden).status_code == 404


def test_a_superuser_deleting_the_agent_purges_its_revoked_personas(revoked: Persona) -> None:
    """VX-TRUST-5: the agent goes with its personas; each revoked one's tombstone stays."""
    admin = get_user_model().objects.create_superuser("agent-purger", password="x" * 20)
    Agent.objects.filter(pk=revoked.agent_id).update(owner=admin)
    agent_delete(agent=Agent.objects.get(pk=revoked.agent_id), actor=admin)
    assert not Persona.objects.filter(pk=revoked.pk).exists()
    assert PurgedPersona.objects.get().purged_by == admin
    assert get_card(revoked).status_code == 410


def test_deleting_the_owners_account_keeps_every_tombstone(revoked: Persona, owner: Any) -> None:
    """VX-TRUST-5: a cascade from the owner's account is a deletion like any other: the revoked
    persona's tombstone is kept (by no one: the event says it came with a deletion)."""
    kept_alive = make_persona(revoked.agent, discoverable=True)
    update_persona(kept_alive, description="never revoked")
    owner.delete()
    assert not Persona.objects.exists()
    assert list(PurgedPersona.objects.values_list("uuid", flat=True)) == [revoked.uuid]
    assert AuditEvent.objects.get(kind=AuditEvent.Kind.PURGED).data["via"] == "deletion"
    assert get_card(revoked).status_code == 410
    assert get_card(kept_alive).status_code == 404


def test_a_purged_generation_keeps_its_tombstone_and_the_event_keeps_what_it_said(
    owner: Any,
) -> None:
    """VX-TRUST-5, VX-AUDIT-1: a persona whose current generation alone is revoked, purged by a
    superuser: its card answers the same tombstone as before, naming the generation (kept in
    the PurgedPersona), and the one "purged" event keeps the persona, its agent, when, why and
    which generation, in words too."""
    persona = make_persona(make_agent(owner), discoverable=True)
    revoke(persona, owner, generation=persona.generation)
    persona = Persona.objects.get(pk=persona.pk)
    tombstone = persona.tombstone()
    assert tombstone is not None and tombstone.generation == 1
    before = tombstone_of(persona.card_path)
    assert (before["scope"], before["generation"]) == ("generation", 1)
    admin = moderator()
    persona_purge(persona=persona, actor=admin)
    assert not Persona.objects.filter(pk=persona.pk).exists()
    assert tombstone_of(persona.card_path) == before
    kept = PurgedPersona.objects.get()
    assert (kept.uuid, kept.generation, kept.purged_by) == (persona.uuid, 1, admin)
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.PURGED)
    assert event.actor == admin
    assert event.data == {
        "persona": str(persona.uuid),
        "name": persona.name,
        "agent": persona.agent_id,
        "agent_name": persona.agent.name,
        "via": "purge",
        "revoked_at": tombstone.revoked_at.isoformat(),
        "reason_code": "compromised",
        "generation": 1,
    }
    assert audit.describe(event.kind, event.data) == (
        f"{persona.name} ({persona.uuid}) purged by a superuser; its tombstone kept: "
        f"revoked {tombstone.revoked_at.isoformat()}, compromised"
    )


def test_an_owners_deletion_keeps_the_tombstone_in_their_name(owner: Any) -> None:
    """VX-TRUST-9, VX-TRUST-5: the tombstone a deletion keeps names who deleted, the owner,
    whether the persona went alone or with its agent; each deletion is its one "persona
    deleted" event by them, naming the generations revoked, with no "revoked" or "purged"
    beside it."""
    alone = make_persona(make_agent(owner), discoverable=True)
    with_agent = make_persona(make_agent(owner), discoverable=True)
    persona_delete(persona=alone, actor=owner)
    agent_delete(agent=with_agent.agent, actor=owner)
    assert {k.uuid: (k.purged_by, k.revocation_reason) for k in PurgedPersona.objects.all()} == {
        alone.uuid: (owner, "retired"),
        with_agent.uuid: (owner, "retired"),
    }
    deleted = AuditEvent.objects.filter(kind=AuditEvent.Kind.PERSONA_DELETED)
    assert {e.data["persona"]: (e.actor, e.data["revoked_generations"]) for e in deleted} == {
        str(alone.uuid): (owner, [1]),
        str(with_agent.uuid): (owner, [1]),
    }
    assert not AuditEvent.objects.filter(
        kind__in=[AuditEvent.Kind.REVOKED, AuditEvent.Kind.PURGED]
    ).exists()
