"""One-step revocation (VX-TRUST-5): an owner, or a moderator, revokes a persona or a generation.

At once the card URL answers 410 Gone with a small tombstone, the directory drops the persona,
every runtime consumer refuses naming the revocation, pending confirmations are cancelled,
learned choices of the revoked stamp never match again, and an audit event says who, when and
why. A revoked generation never stands again; only the owner's next edit brings the persona
back, as a new generation.
"""

import json
from io import StringIO
from typing import Any

import pytest
from django.core.cache import cache
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, transaction
from django.test import Client
from rest_framework.test import APIClient

from cards import fastpath
from cards.keys import public_jwks
from cards.models import PublishedCard
from cards.signing import BadSignature, verify_document
from cards.tombstones import TOMBSTONE_TYPE
from personas.models import AuditEvent, Generation, Persona
from personas.services import (
    persona_revoke,
    persona_update,
    settle_persona_batch,
    skill_save,
)
from runtime import confirmations, registry
from runtime.models import DecisionRecord, PromptRegistryEntry
from runtime.stamp import StampUnavailable, load_active_stamp
from serving.mcp_server import build_server
from settling.publication import publish_generation
from settling.reconciliation import owed_personas, reconcile
from stamps.quarantine import quarantined_personas, restore
from tests.card_support import call as call_wsgi
from tests.factories import make_agent, make_owner, make_persona, run_on_commit, update_persona
from tests.revocation_support import get_card, moderator, revoke
from tests.runtime_support import call, correlation
from tests.stored_stamps import record_not_standing

pytestmark = pytest.mark.django_db

SECURITY_HEADERS = (
    "X-Frame-Options",
    "X-Content-Type-Options",
    "Referrer-Policy",
    "Content-Security-Policy",
)


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> Any:
    cache.clear()
    yield
    cache.clear()


@pytest.fixture(autouse=True)
def private_home(tmp_path: Any, settings: Any) -> None:
    settings.VIRGO_HOME = tmp_path / "home"


@pytest.fixture
def owner() -> Any:
    return make_owner()


@pytest.fixture
def persona(owner: Any) -> Persona:
    return make_persona(make_agent(owner), discoverable=True)


def hold_a_delete(persona: Persona) -> DecisionRecord:
    """A pending confirmation of the persona: a delete waits for its owner."""
    assert call(persona, "workspace_write", {"path": "memory/old.md", "content": "x"})["ok"]
    cid = correlation()
    held = call(persona, "workspace_write", {"path": "memory/old.md", "mode": "delete"}, cid)
    assert held["code"] == "confirmation_required"
    return DecisionRecord.objects.get(correlation_id=cid)


def test_the_card_answers_410_with_a_tombstone_and_every_security_header(
    persona: Persona, owner: Any
) -> None:
    """VX-TRUST-5: the next request after the revocation commits gets 410 Gone and the small
    tombstone (persona, revoked at, reason code; never the words beside it), signed by a key of
    Virgo's JWKS (a changed reason fails), with every security header a card has."""
    card = get_card(persona)
    assert card.status_code == 200
    assert get_card(persona).status_code == 200
    revocation = revoke(persona, owner)
    response = get_card(persona)
    assert response.status_code == 410
    assert response["Content-Type"] == "application/json"
    assert response["Cache-Control"] == "no-store"
    for header in SECURITY_HEADERS:
        assert response[header] == card[header], header
    assert "default-src 'none'" in response["Content-Security-Policy"]
    tombstone = json.loads(response.content)
    assert verify_document(tombstone) in {key["kid"] for key in public_jwks()["keys"]}
    forged = {**tombstone, "reason": "superseded"}
    with pytest.raises(BadSignature):
        verify_document(forged)
    del tombstone["signatures"]
    assert tombstone == {
        "type": TOMBSTONE_TYPE,
        "persona": str(persona.uuid),
        "card": persona.card_url,
        "scope": "persona",
        "revokedAt": revocation.at.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "reason": "compromised",
    }
    assert "broken into" not in response.content.decode()
    # The owner signed in sees the same tombstone, not a preview of the card.
    signed_in = Client()
    signed_in.force_login(owner)
    assert get_card(persona, signed_in).status_code == 410


def test_a_revoked_generation_has_its_own_tombstone_and_a_new_generation_comes_back(
    persona: Persona, owner: Any
) -> None:
    """VX-TRUST-5: revoking the current generation alone tombstones it (naming it); the owner's
    next edit makes a new generation that stands and is served again, while the revoked one
    stays revoked."""
    revoked = persona.generation
    revoke(persona, owner, generation=revoked, reason_code="superseded")
    tombstone = json.loads(get_card(persona).content)
    assert (tombstone["scope"], tombstone["generation"], tombstone["reason"]) == (
        "generation",
        revoked,
        "superseded",
    )
    back = update_persona(persona, description="A fresh start.")
    assert back.generation == revoked + 1 and back.standing is True
    card = get_card(back)
    assert card.status_code == 200
    assert json.loads(card.content)["version"] == str(revoked + 1)
    old = Generation.objects.get(persona=back, number=revoked)
    assert old.revoked_at is not None and old.standing is False


def assert_a_tombstone(
    answer: tuple[int, dict[str, str], bytes], card_headers: dict[str, str], **expected: Any
) -> dict[str, Any]:
    """410 Gone, the card's security headers, never cached, and a tombstone signed by a key of
    the JWKS saying what `expected` says."""
    status, headers, body = answer
    assert status == 410
    assert headers["Content-Type"] == "application/json"
    assert headers["Cache-Control"] == "no-store"
    for header in SECURITY_HEADERS:
        assert headers[header] == card_headers[header], header
    tombstone = json.loads(body)
    assert verify_document(tombstone) in {key["kid"] for key in public_jwks()["keys"]}
    assert tombstone["type"] == TOMBSTONE_TYPE
    assert {name: tombstone.get(name) for name in expected} == expected
    return tombstone


@pytest.mark.parametrize("scope", ["persona", "generation"])
def test_the_fast_path_answers_410_at_once_even_where_the_card_was_in_memory(
    persona: Persona, owner: Any, card_app: fastpath.PublicCardFastPath, scope: str
) -> None:
    """VX-TRUST-5, VX-TRUST-6: through virgo.wsgi's stack, a card served from this process's
    memory answers 410 and the tombstone on the very next request after the revocation, and so
    does another web process still holding the card in its memory (its entry is under the
    token the revocation replaced); every request after answers it again, never the card."""
    path = persona.card_path
    card = call_wsgi(card_app, path)
    assert card[0] == 200
    assert call_wsgi(card_app, path) == card  # from memory
    other_process = dict(fastpath._entries)
    generation = persona.generation if scope == "generation" else None
    revoke(persona, owner, generation=generation)
    fastpath._entries.update(other_process)
    expected: dict[str, Any] = {"persona": str(persona.uuid), "scope": scope}
    if generation is not None:
        expected["generation"] = generation
    for _ in range(3):
        assert_a_tombstone(call_wsgi(card_app, path), card[1], **expected)
    assert call_wsgi(card_app, path, method="HEAD")[0] == 410


def test_a_generation_that_stops_standing_after_an_older_one_was_revoked_is_404(
    persona: Persona, owner: Any
) -> None:
    """VX-TRUST-5: a tombstone speaks for the generation the persona is at: once the owner's
    edit made a new generation after a revoked one, that new generation not standing (here its
    stamp failed) is a 404 like any card off the public path, not the old generation's 410."""
    revoked = persona.generation
    revoke(persona, owner, generation=revoked, reason_code="superseded")
    back = update_persona(persona, description="A fresh start.")
    assert get_card(back).status_code == 200
    current = back.generations.get(number=back.generation)
    record_not_standing(current, "not standing: missing tool list_tasks")
    assert get_card(back).status_code == 404


def test_an_unlisted_revoked_persona_is_404_for_everyone_but_its_owner(owner: Any) -> None:
    """VX-TRUST-5: an id that was never public does not become findable by being revoked."""
    hidden = make_persona(make_agent(owner))
    revoke(hidden, owner)
    assert get_card(hidden).status_code == 404
    signed_in = Client()
    signed_in.force_login(owner)
    assert get_card(hidden, signed_in).status_code == 410


def test_the_directory_drops_it(persona: Persona, owner: Any) -> None:
    """VX-TRUST-5: the revoked persona leaves the directory at once."""
    client = APIClient()
    client.force_authenticate(make_owner())
    listed = [entry["card_url"] for entry in client.get("/api/directory/").json()["results"]]
    assert persona.card_url in listed
    revoke(persona, owner)
    listed = [entry["card_url"] for entry in client.get("/api/directory/").json()["results"]]
    assert persona.card_url not in listed


def test_every_runtime_consumer_refuses_naming_the_revocation(persona: Persona, owner: Any) -> None:
    """VX-TRUST-5: handle() refuses every call with code `revoked` and the reason; the MCP
    server refuses to start; `virgo launch` and `virgo mcp config` refuse."""
    assert call(persona, "workspace_list", {"path": ""})["ok"] is True
    revoke(persona, owner)
    for tool in ("workspace_list", "workspace_read", "list_tasks"):
        result = call(persona, tool, {"path": ""})
        assert (result["ok"], result["code"]) == (False, "revoked")
        assert "revoked" in result["reason"] and "compromised" in result["reason"]
    with pytest.raises(StampUnavailable, match="revoked") as refused:
        build_server(persona)
    assert refused.value.code == "revoked"
    with pytest.raises(CommandError, match=r"refusing to launch .* revoked"):
        call_command("launch", "--persona", str(persona.uuid), "--print-allowlist")
    with pytest.raises(CommandError, match="revoked"):
        call_command("mcp", "config", "--persona", str(persona.uuid))


def test_a_running_mcp_server_lists_no_tools_after_the_revocation(
    persona: Persona, owner: Any
) -> None:
    """VX-TRUST-5: a server started before the revocation lists nothing and runs nothing."""
    from asgiref.sync import async_to_sync
    from mcp.shared.exceptions import McpError
    from mcp.shared.memory import create_connected_server_and_client_session

    server = build_server(persona)

    async def scenario() -> tuple[int, str, str]:
        async with create_connected_server_and_client_session(server) as session:
            before = len((await session.list_tools()).tools)
            await async_to_sync_revoke()
            try:
                await session.list_tools()
                listed = "listed"
            except McpError as error:
                listed = error.error.message
            try:
                await session.call_tool("workspace_list", {"path": ""})
                called = "called"
            except McpError as error:
                called = error.error.message
            return before, listed, called

    from asgiref.sync import sync_to_async

    async_to_sync_revoke = sync_to_async(lambda: revoke(persona, owner), thread_sensitive=True)
    before, listed, called = async_to_sync(scenario)()
    assert before > 0
    assert "revoked" in listed and "revoked" in called


def test_pending_confirmations_are_cancelled_and_cannot_be_approved(
    persona: Persona, owner: Any
) -> None:
    """VX-TRUST-5: what waited for an answer is cancelled in the revoking transaction; the
    authority can no longer approve it, and nothing runs under its correlation id."""
    record = hold_a_delete(persona)
    revoke(persona, owner, generation=persona.generation)
    record.refresh_from_db()
    assert record.decision == DecisionRecord.Decision.CANCELLED
    assert record.decided_via == DecisionRecord.Via.REVOCATION
    with pytest.raises(ValidationError, match="already cancelled"):
        confirmations.decide(record=record, approve=True, user=owner)
    again = call(persona, "workspace_write", {"path": "memory/old.md", "mode": "delete"},
                 record.correlation_id)  # fmt: skip
    assert again["code"] == "revoked"


def test_learned_choices_of_the_revoked_stamp_never_match_again(
    persona: Persona, owner: Any
) -> None:
    """VX-TRUST-5: an answer learned under the revoked stamp is retired: the owner's new
    generation cannot carry it forward, and it asks again."""
    record = hold_a_delete(persona)
    record = confirmations.decide(record=record, approve=True, user=owner)
    entry = registry.learn(record=record, user=owner)
    revoke(persona, owner, generation=persona.generation)
    entry.refresh_from_db()
    assert entry.review == PromptRegistryEntry.Review.REVOKED
    back = update_persona(persona, description="Back again.")
    [outcome] = registry.carry_forward(entries=[entry], reviewer=owner)
    assert outcome.carried is None and "revoked" in outcome.reason
    assert call(back, "workspace_write", {"path": "memory/old.md", "content": "x"})["ok"]
    asked = call(back, "workspace_write", {"path": "memory/old.md", "mode": "delete"})
    assert asked["code"] == "confirmation_required"


def test_an_audit_event_records_who_when_and_why(persona: Persona, owner: Any) -> None:
    """VX-TRUST-5: the event names the actor, the time, the code and the words."""
    revocation = revoke(persona, owner, reason="it leaked a token", reason_code="compromised")
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.REVOKED, persona=persona)
    assert event.actor == owner
    assert event.data == {
        "name": persona.name,
        "scope": "persona",
        "generations": revocation.generations,
        "reason_code": "compromised",
        "reason": "it leaked a token",
        "via": "test",
        "as": "owner",
    }
    assert revocation.generations == [persona.generation]
    assert abs((event.at - revocation.at).total_seconds()) < 5


def test_another_owner_cannot_revoke(persona: Persona) -> None:
    """VX-TRUST-5, VX-OPS-8 (attack): another owner is refused by the service, and by the API
    (404) and the CLI (no such persona), which cannot even see the persona; the persona keeps
    standing and serving."""
    intruder = make_owner()
    with pytest.raises(PermissionDenied):
        persona_revoke(
            persona=persona, actor=intruder, reason_code="compromised", reason="x", via="test"
        )
    client = APIClient()
    client.force_authenticate(intruder)
    body = {"reason_code": "compromised", "reason": "mine now"}
    response = client.post(f"/api/personas/{persona.uuid}/revoke/", body, format="json")
    assert response.status_code == 404
    with pytest.raises(CommandError, match=f"^no persona '{persona.uuid}' "):
        call_command(
            "persona", "revoke", str(persona.uuid), "--by", intruder.username,
            "--reason-code", "compromised", "--reason", "mine now",
        )  # fmt: skip
    persona.refresh_from_db()
    assert persona.revoked_at is None and persona.standing is True
    assert get_card(persona).status_code == 200
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.REVOKED).exists()


def test_a_moderator_may_revoke_any_persona(persona: Persona) -> None:
    """VX-TRUST-5: a moderator (superuser) revokes another owner's persona; the audit event
    says so."""
    revoke(persona, moderator(), reason_code="policy-violation", reason="spam")
    assert get_card(persona).status_code == 410
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.REVOKED)
    assert event.data["as"] == "moderator"


def test_the_api_revokes_and_explains_bad_input(persona: Persona, owner: Any) -> None:
    """VX-TRUST-5: POST /api/personas/{uuid}/revoke/: bad shapes are 400 naming the field,
    domain refusals 422; a revoked persona refuses every later change."""
    client = APIClient()
    client.force_authenticate(owner)
    url = f"/api/personas/{persona.uuid}/revoke/"
    assert (
        client.post(url, {"reason_code": "nope", "reason": "x"}, format="json").status_code == 400
    )
    missing = client.post(url, {"reason_code": "retired"}, format="json")
    assert missing.status_code == 400 and "reason" in missing.json()
    wrong = client.post(
        url, {"reason_code": "retired", "reason": "x", "generation": 99}, format="json"
    )
    assert wrong.status_code == 422 and "generation" in wrong.json()
    with run_on_commit():
        done = client.post(url, {"reason_code": "retired", "reason": "done"}, format="json")
    assert done.status_code == 200, done.content
    assert done.json()["generations"] == [persona.generation]
    assert client.get(f"/api/personas/{persona.uuid}/").json()["revocation_reason"] == "retired"
    again = client.post(url, {"reason_code": "retired", "reason": "twice"}, format="json")
    assert again.status_code == 422 and "persona" in again.json()
    edit = client.patch(f"/api/personas/{persona.uuid}/", {"name": "Back"}, format="json")
    assert edit.status_code == 422 and "revoked" in json.dumps(edit.json())
    assert get_card(persona).status_code == 410


def test_the_cli_revokes(persona: Persona, owner: Any) -> None:
    """VX-TRUST-5: `virgo persona revoke` calls the same service."""
    out = StringIO()
    with run_on_commit():
        call_command(
            "persona", "revoke", str(persona.uuid), "--by", owner.username,
            "--reason-code", "retired", "--reason", "no longer needed",
            "--generation", str(persona.generation), stdout=out,
        )  # fmt: skip
    assert "Revoked generation" in out.getvalue() and "Its card answers 410 Gone" in out.getvalue()
    assert get_card(persona).status_code == 410


def test_the_cli_says_an_unlisted_persona_answers_404_to_peers(owner: Any) -> None:
    """VX-TRUST-5, VX-OPS-11: revoking a persona that was never listed says what its card
    answers as it does: 404 to peers, 410 to its owner."""
    hidden = make_persona(make_agent(owner))
    out = StringIO()
    with run_on_commit():
        call_command(
            "persona", "revoke", str(hidden.uuid), "--by", owner.username,
            "--reason-code", "retired", "--reason", "unused", stdout=out,
        )  # fmt: skip
    assert "It was not listed: its card answers 404 to peers, 410 Gone to you" in out.getvalue()
    assert get_card(hidden).status_code == 404


def test_the_admin_action_asks_why_then_revokes(persona: Persona, owner: Any) -> None:
    """VX-TRUST-5: the admin's Revoke action shows a form first, and revokes once it is filled
    in, through the same service."""
    client = Client()
    client.force_login(owner)
    changelist = "/admin/personas/persona/"
    chosen = {"action": "revoke", "_selected_action": [persona.pk]}
    form = client.post(changelist, chosen)
    assert form.status_code == 200 and b"reason_code" in form.content
    assert get_card(persona).status_code == 200
    with run_on_commit():
        done = client.post(
            changelist,
            {**chosen, "apply": "1", "scope": "persona", "reason_code": "retired", "reason": "ok"},
        )
    assert done.status_code == 302
    assert get_card(persona).status_code == 410


def test_a_revoked_generation_never_stands_again(persona: Persona, owner: Any) -> None:
    """VX-TRUST-5: neither the database, nor `virgo stamp restore`, nor the reconciler, a
    skill-map recompute or a republish brings a revoked generation back; it is not counted as
    quarantined either."""
    number = persona.generation
    revoke(persona, owner, generation=number)
    generation = Generation.objects.get(persona=persona, number=number)
    with pytest.raises(IntegrityError), transaction.atomic():
        Generation.objects.filter(pk=generation.pk).update(standing=True)
    with pytest.raises(IntegrityError), transaction.atomic():
        Persona.objects.filter(pk=persona.pk).update(revoked_at=generation.revoked_at)
        Persona.objects.filter(pk=persona.pk).update(standing=True)
    assert restore(persona=persona).lifted is False
    assert persona not in quarantined_personas()
    assert persona not in owed_personas()
    with run_on_commit():
        skill_save(
            actor=moderator(),
            slug="workspace-care",
            name="Workspace care",
            description="Looks after files.",
            required_verbs=["workspace_list"],
            tags=["files"],
        )
    settle_persona_batch([persona.pk])
    publish_generation(persona.pk)
    reconcile()
    persona.refresh_from_db()
    assert persona.generation == number and persona.standing is False
    generation.refresh_from_db()
    assert generation.standing is False and generation.revoked_at is not None
    assert get_card(persona).status_code == 410


def test_a_revoked_persona_never_changes_again(persona: Persona, owner: Any) -> None:
    """VX-TRUST-5: revoking the whole persona is final: no edit opens a generation."""
    revoke(persona, owner)
    with pytest.raises(ValidationError, match="revoked"):
        persona_update(persona=persona, actor=owner, description="back?")
    persona.refresh_from_db()
    assert persona.standing is False
    assert all(g.revoked_at is not None for g in persona.generations.all())
    assert PublishedCard.objects.filter(persona=persona).exists()
    with pytest.raises(StampUnavailable, match="whole persona"):
        load_active_stamp(persona)
