"""The audit trail is whole (VX-AUDIT-1) and readable (VX-AUDIT-2).

Every action that matters leaves exactly one append-only AuditEvent, whichever way it came: the
admin (a signed-in owner), the API (a token) or the CLI (call_command). Each names the actor
by name, the kind, the channel and the correlation id of its entry point: a request's
`X-Request-ID` (or one made for it), one new id per command, a tool call's own id.
"""

import io
import json
import re
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from cards.models import SigningKey
from personas import audit, services
from personas.models import AuditEvent, AuditEventRefused, GrantProposal, PersonaClass
from runtime import confirmations, registry
from runtime.models import DecisionRecord
from runtime.snapshot import export_persona
from tests.factories import (
    CLASS_ADDRESSES,
    REVIEWER_VERBS,
    address,
    make_agent,
    make_owner,
    make_persona,
    run_on_commit,
)
from tests.grant_support import ADDED, new_persona
from tests.owner_clients import csrf_token, form_data, session_client, token_client
from tests.runtime_support import call, correlation, standing_persona
from virgo import auditing

pytestmark = pytest.mark.django_db

Kind = AuditEvent.Kind
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, settings: Any) -> Path:
    settings.VIRGO_HOME = tmp_path / "home"
    return settings.VIRGO_HOME


class NewEvents:
    """The events made while the block ran, of one kind or of all."""

    def __init__(self) -> None:
        self.before = AuditEvent.objects.order_by("-id").values_list("id", flat=True).first() or 0

    def __call__(self, kind: str | None = None) -> list[AuditEvent]:
        """Of `kind`, or of every kind but the first signing key, made on demand by whatever
        signs first (a card, the status list): an event of its own."""
        events = AuditEvent.objects.filter(id__gt=self.before).order_by("id")
        if kind:
            return list(events.filter(kind=kind))
        return [e for e in events if not (e.kind == Kind.KEY_CREATED and "why" in e.data)]

    def one(self, kind: str) -> AuditEvent:
        events = self(kind)
        assert len(events) == 1, [(e.kind, e.channel, e.data) for e in self()]
        return events[0]


def admin_client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def request_id(name: str) -> dict[str, str]:
    return {"HTTP_X_REQUEST_ID": name}


def cli(*args: str) -> str:
    out = io.StringIO()
    with run_on_commit():
        call_command(*args, stdout=out, stderr=out)
    return out.getvalue()


def assert_cli(event: AuditEvent) -> None:
    """A command's event: channel cli, an id of its own (32 hex digits)."""
    assert event.channel == AuditEvent.Channel.CLI
    assert re.fullmatch(r"[0-9a-f]{32}", event.correlation_id), event.correlation_id


# Persona create, edit, delete ------------------------------------------------------------------


def test_a_persona_created_through_the_api_is_one_record() -> None:
    """VX-AUDIT-1: POST /api/personas/ (token): one "persona created", by the owner's name,
    through the API under the request's id; the grant it holds is part of it (no separate
    "proposed" record)."""
    owner = make_owner("api-owner")
    agent = make_agent(owner)
    new = NewEvents()
    with run_on_commit():
        response = token_client(owner).post(
            "/api/personas/", new_persona(agent), format="json", **request_id("req-create")
        )
    assert response.status_code == 202, response.content
    event = new.one(Kind.PERSONA_CREATED)
    assert (event.actor, event.actor_name, event.channel, event.correlation_id) == (
        owner,
        "api-owner",
        "api",
        "req-create",
    )
    assert event.data["held"] is True and event.persona.name == "Created"
    assert [e.kind for e in new()] == [Kind.PERSONA_CREATED]


def test_a_persona_created_through_the_cli_is_one_record() -> None:
    """VX-AUDIT-1: `virgo persona add`: one "persona created" through the CLI, under the
    command's own id; a second command has another id."""
    owner = make_owner("cli-owner")
    make_agent(owner, name="main")
    args = ("--owner", "cli-owner", "--agent", "main", "--class", PersonaClass.CODER_DEPUTY)
    path = CLASS_ADDRESSES[PersonaClass.CODER_DEPUTY]
    prompt = ("--prompt", "You review pull requests.", "--queues", "reviews")
    new = NewEvents()
    cli("persona", "add", *args, "--name", "First", *prompt, "--address", address(path).path)
    second = address(f"{path}-2").path
    cli("persona", "add", *args, "--name", "Second", *prompt, "--address", second)
    first, second = new(Kind.PERSONA_CREATED)
    assert [e.kind for e in new()] == [Kind.PERSONA_CREATED] * 2
    for event in (first, second):
        assert event.actor_name == "cli-owner"
        assert_cli(event)
    assert first.correlation_id != second.correlation_id
    assert (first.data["name"], second.data["name"]) == ("First", "Second")


def test_a_persona_created_and_approved_in_the_admin_is_one_record_each() -> None:
    """VX-AUDIT-1: the admin's add form: one "persona created" through the admin; approving
    its grant on the diff page: one "grant change approved" and no "persona changed" (the
    approval's change is part of it)."""
    owner = make_owner("admin-owner")
    agent = make_agent(owner)
    wanted = new_persona(agent)
    client = session_client(owner, enforce_csrf_checks=False)
    add = f"/admin/personas/persona/add/?agent={agent.pk}"
    data = {**form_data(client.get(add), "persona_form"), "_save": "Save"}
    data.update(
        name=wanted["name"],
        system_prompt=wanted["system_prompt"],
        persona_class=wanted["persona_class"],
        address=str(address(wanted["address"]).pk),
        verb_subset=wanted["verb_subset"],
        queues=wanted["queues"],
    )
    new = NewEvents()
    with run_on_commit():
        client.post(add, data, **request_id("req-admin-add"))
    created = new.one(Kind.PERSONA_CREATED)
    assert (created.actor_name, created.channel, created.correlation_id) == (
        "admin-owner",
        "admin",
        "req-admin-add",
    )
    proposal = GrantProposal.objects.get(persona__name="Created")
    approve = NewEvents()
    review = f"/admin/personas/grantproposal/{proposal.pk}/change/"
    with run_on_commit():
        client.post(review, {"decision": "approve"}, **request_id("req-approve"))
    approved = approve.one(Kind.PROPOSAL_APPROVED)
    assert [e.kind for e in approve()] == [Kind.PROPOSAL_APPROVED]
    assert (approved.actor_name, approved.channel, approved.correlation_id) == (
        "admin-owner",
        "admin",
        "req-approve",
    )
    assert approved.data["generation"] == 2


def answered_through_the_api(owner: Any, proposal: str, answer: str, request: str) -> AuditEvent:
    """The owner's session answers the proposal at URL `proposal` ("approve" or "reject") under
    request id `request`: the one event that made, naming the owner, through the API."""
    kind = Kind.PROPOSAL_APPROVED if answer == "approve" else Kind.PROPOSAL_REJECTED
    new = NewEvents()
    session = session_client(owner)
    with run_on_commit():
        response = session.post(
            f"{proposal}{answer}/", HTTP_X_CSRFTOKEN=csrf_token(session), **request_id(request)
        )
    assert response.status_code == 200, response.content
    event = new.one(kind)
    assert [e.kind for e in new()] == [kind]
    assert (event.actor_name, event.channel, event.correlation_id) == (
        owner.username,
        "api",
        request,
    )
    return event


def test_an_edit_through_the_api_is_one_record_and_a_widening_one_proposal() -> None:
    """VX-AUDIT-1: a narrowing PATCH is made at once: one "persona changed" naming the fields
    and the new generation; a widening PATCH is held: one "grant change proposed", nothing
    else; rejecting it through the API: one "grant change rejected"."""
    persona = standing_persona(extra=("claim",))
    owner = persona.agent.owner
    client = token_client(owner)
    url = f"/api/personas/{persona.uuid}/"
    new = NewEvents()
    with run_on_commit():
        narrowed = client.patch(url, {"description": "narrower"}, format="json")
    assert narrowed.status_code == 200, narrowed.content
    edited = new.one(Kind.PERSONA_EDITED)
    assert (edited.actor_name, edited.channel) == (owner.username, "api")
    assert edited.data["fields"] == ["description"] and edited.data["generation"] == 2
    assert [e.kind for e in new()] == [Kind.PERSONA_EDITED]

    widen = NewEvents()
    verbs = [*persona.verb_subset, ADDED]
    with run_on_commit():
        held = client.patch(url, {"verb_subset": verbs}, format="json", **request_id("req-w"))
    assert held.status_code == 202, held.content
    proposed = widen.one(Kind.PROPOSAL_MADE)
    assert [e.kind for e in widen()] == [Kind.PROPOSAL_MADE]
    assert (proposed.channel, proposed.correlation_id) == ("api", "req-w")
    assert any(ADDED in reason for reason in proposed.data["widening"])

    answered_through_the_api(owner, held.json()["url"], "reject", "req-reject")


def held_widening() -> tuple[Any, Any, GrantProposal]:
    """A standing persona, its owner, and the proposal their widening of it is held as."""
    persona = standing_persona(extra=("claim",))
    owner = persona.agent.owner
    with run_on_commit():
        change = services.persona_submit(
            persona=persona,
            actor=owner,
            via=GrantProposal.Via.API,
            verb_subset=[*persona.verb_subset, ADDED],
        )
    assert change.proposal is not None
    return persona, owner, change.proposal


def test_rejecting_a_proposal_in_the_admin_is_one_record() -> None:
    """VX-AUDIT-1: "Reject" on the admin's diff page: one "grant change rejected" naming the
    owner and the fields, through the admin under the request's id; nothing else."""
    _, owner, proposal = held_widening()
    new = NewEvents()
    review = f"/admin/personas/grantproposal/{proposal.pk}/change/"
    with run_on_commit():
        response = admin_client(owner).post(
            review, {"decision": "reject"}, **request_id("req-admin-reject")
        )
    assert response.status_code == 302, response.content
    rejected = new.one(Kind.PROPOSAL_REJECTED)
    assert [e.kind for e in new()] == [Kind.PROPOSAL_REJECTED]
    assert (rejected.actor_name, rejected.channel, rejected.correlation_id) == (
        owner.username,
        "admin",
        "req-admin-reject",
    )
    assert rejected.data["fields"] == ["verb_subset"]


def test_approving_a_proposal_through_the_api_is_one_record() -> None:
    """VX-AUDIT-1: POST /api/proposals/<id>/approve/ (the owner's session, as a token may not
    approve what it proposed): one "grant change approved" naming the owner, the fields and
    the new generation, through the API under the request's id; no "persona changed" beside
    it (the change is the approval's)."""
    persona = standing_persona(extra=("claim",))
    owner = persona.agent.owner
    with run_on_commit():
        held = token_client(owner).patch(
            f"/api/personas/{persona.uuid}/",
            {"verb_subset": [*persona.verb_subset, ADDED]},
            format="json",
        )
    assert held.status_code == 202, held.content
    approved = answered_through_the_api(owner, held.json()["url"], "approve", "req-approve-api")
    assert approved.data["fields"] == ["verb_subset"] and approved.data["generation"] == 2


def test_a_proposal_overtaken_by_a_change_goes_stale_once() -> None:
    """VX-AUDIT-1: a change made after a proposal makes it stale: one "persona changed" and,
    as its consequence, one "grant change gone stale"; approving it then adds nothing more."""
    persona, owner, proposal = held_widening()
    new = NewEvents()
    with run_on_commit():
        services.persona_update(persona=persona, actor=owner, description="moved on")
    assert new.one(Kind.PERSONA_EDITED).data["fields"] == ["description"]
    stale = new.one(Kind.PROPOSAL_STALE)
    assert stale.data["base_generation"] == 1
    after = NewEvents()
    with pytest.raises(Exception, match="stale"):
        services.proposal_approve(proposal=proposal, actor=owner)
    assert after() == []


def test_a_deletion_is_one_record_that_outlives_the_persona_and_its_owner() -> None:
    """VX-AUDIT-1: DELETE /api/personas/<uuid>/: one "persona deleted" by the owner's name; the
    persona and the account gone, the event still names both."""
    persona = standing_persona()
    owner = persona.agent.owner
    name, username = persona.name, owner.username
    new = NewEvents()
    response = token_client(owner).delete(f"/api/personas/{persona.uuid}/", **request_id("req-d"))
    assert response.status_code == 204, response.content
    event = new.one(Kind.PERSONA_DELETED)
    assert (event.channel, event.correlation_id) == ("api", "req-d")
    get_user_model().objects.filter(pk=owner.pk).delete()
    event = AuditEvent.objects.get(pk=event.pk)
    assert (event.persona, event.actor) == (None, None)
    assert (event.actor_name, event.data["name"]) == (username, name)


def test_a_deletion_in_the_admin_is_one_record() -> None:
    """VX-AUDIT-1: the admin's delete page: one "persona deleted" through the admin."""
    persona = standing_persona()
    owner = persona.agent.owner
    new = NewEvents()
    page = reverse("admin:personas_persona_delete", args=[persona.pk])
    response = admin_client(owner).post(page, {"post": "yes"}, **request_id("req-admin-d"))
    assert response.status_code == 302
    event = new.one(Kind.PERSONA_DELETED)
    assert (event.actor_name, event.channel, event.correlation_id) == (
        owner.username,
        "admin",
        "req-admin-d",
    )


def test_deleting_an_agent_is_one_persona_deleted_record_for_each_of_its_personas() -> None:
    """VX-AUDIT-1: DELETE /api/agents/<id>/ deletes its personas with it: one "persona
    deleted" for each, by the owner's name through the API under the request's id, each naming
    the persona and the agent; nothing else."""
    first = standing_persona()
    owner = first.agent.owner
    second = make_persona(first.agent)
    new = NewEvents()
    url = f"/api/agents/{first.agent.pk}/"
    response = token_client(owner).delete(url, **request_id("req-agent-d"))
    assert response.status_code == 204, response.content
    events = new(Kind.PERSONA_DELETED)
    assert [e.kind for e in new()] == [Kind.PERSONA_DELETED] * 2
    assert sorted(e.data["name"] for e in events) == sorted([first.name, second.name])
    assert {(e.actor_name, e.channel, e.correlation_id) for e in events} == {
        (owner.username, "api", "req-agent-d")
    }
    assert {e.data["agent_name"] for e in events} == {first.agent.name}
    assert audit.describe(events[0].kind, events[0].data).endswith(
        f"deleted with its agent {first.agent.name}, revoked first: its card answers with its "
        "tombstone"
    )


def test_an_agent_deleted_in_the_admin_is_one_record_per_persona_and_a_purge() -> None:
    """VX-AUDIT-1: the admin's delete page of an agent: one "persona deleted" through the admin
    for each persona it took with it; a superuser's revoked persona among them is one "purged"
    (its tombstone kept), never "deleted" too."""
    root = get_user_model().objects.create_superuser("agent-purger", password="x" * 20)
    kept = standing_persona(root)
    revoked = make_persona(kept.agent)
    with run_on_commit():
        services.persona_revoke(
            persona=revoked,
            actor=root,
            reason_code="compromised",
            reason="its key leaked",
            via="api",
        )
    new = NewEvents()
    page = reverse("admin:personas_agent_delete", args=[kept.agent.pk])
    response = admin_client(root).post(page, {"post": "yes"}, **request_id("req-admin-ad"))
    assert response.status_code == 302
    deleted = new.one(Kind.PERSONA_DELETED)
    assert (deleted.data["name"], deleted.actor_name, deleted.channel) == (
        kept.name,
        "agent-purger",
        "admin",
    )
    assert deleted.correlation_id == "req-admin-ad"
    assert new.one(Kind.PURGED).data["name"] == revoked.name
    assert sorted(e.kind for e in new()) == sorted([Kind.PERSONA_DELETED, Kind.PURGED])


def test_a_purge_in_the_admin_is_one_record() -> None:
    """VX-AUDIT-1: a superuser deleting their revoked persona in the admin purges it: one
    "purged" (its tombstone kept), naming them, through the admin; no "deleted" beside it."""
    root = get_user_model().objects.create_superuser("purger", password="x" * 20)
    persona = standing_persona(root)
    with run_on_commit():
        services.persona_revoke(
            persona=persona,
            actor=persona.agent.owner,
            reason_code="compromised",
            reason="its host was broken into",
            via="api",
        )
    new = NewEvents()
    page = reverse("admin:personas_persona_delete", args=[persona.pk])
    response = admin_client(root).post(page, {"post": "yes"}, **request_id("req-purge"))
    assert response.status_code == 302
    purged = new.one(Kind.PURGED)
    assert [e.kind for e in new()] == [Kind.PURGED]
    assert (purged.actor_name, purged.channel, purged.correlation_id) == (
        "purger",
        "admin",
        "req-purge",
    )
    assert purged.data["name"] == persona.name


# Revocation -------------------------------------------------------------------------------------


def test_a_revocation_is_one_record_through_the_admin_the_api_and_the_cli() -> None:
    """VX-AUDIT-1: revoking (the admin's action, the API, `virgo persona revoke`): one
    "revoked" each, naming the owner, through its channel, under its entry point's id."""
    owner = make_owner("revoker")
    personas = [standing_persona(owner, agent=make_agent(owner)) for _ in range(3)]
    reason = {"reason_code": "retired", "reason": "no longer needed"}

    new = NewEvents()
    chosen = {"action": "revoke", "_selected_action": [personas[0].pk]}
    with run_on_commit():
        admin_client(owner).post(
            "/admin/personas/persona/",
            {**chosen, "apply": "1", "scope": "persona", **reason},
            **request_id("req-admin-revoke"),
        )
    by_admin = new.one(Kind.REVOKED)
    assert (by_admin.channel, by_admin.correlation_id) == ("admin", "req-admin-revoke")

    new = NewEvents()
    with run_on_commit():
        response = token_client(owner).post(
            f"/api/personas/{personas[1].uuid}/revoke/",
            reason,
            format="json",
            **request_id("req-api-revoke"),
        )
    assert response.status_code == 200, response.content
    by_api = new.one(Kind.REVOKED)
    assert (by_api.channel, by_api.correlation_id) == ("api", "req-api-revoke")

    new = NewEvents()
    cli(
        "persona", "revoke", str(personas[2].uuid), "--by", "revoker",
        "--reason-code", "retired", "--reason", "no longer needed",
    )  # fmt: skip
    by_cli = new.one(Kind.REVOKED)
    assert_cli(by_cli)
    for event, persona in zip((by_admin, by_api, by_cli), personas, strict=True):
        assert (event.actor_name, event.persona, event.data["reason"]) == (
            "revoker",
            persona,
            "no longer needed",
        )
        assert [e.kind for e in AuditEvent.objects.filter(persona=persona, kind=Kind.REVOKED)] == [
            Kind.REVOKED
        ]


# Imports ----------------------------------------------------------------------------------------


def test_a_card_import_is_one_record_through_import() -> None:
    """VX-AUDIT-1: `virgo persona import-card`: one "imported from an agent card" (its draft and
    held grant part of it), through `import`, under the command's id, naming the source."""
    owner = make_owner("importer")
    agent = make_agent(owner)
    card = FIXTURES / "cards" / "v1.json"
    new = NewEvents()
    cli(
        "persona", "import-card", str(card), "--agent", str(agent.pk),
        "--address", address(CLASS_ADDRESSES[PersonaClass.CODER_DEPUTY]).path,
        "--class", PersonaClass.CODER_DEPUTY,
    )  # fmt: skip
    event = new.one(Kind.CARD_IMPORTED)
    assert [e.kind for e in new()] == [Kind.CARD_IMPORTED]
    assert (event.actor_name, event.channel, event.data["source"]) == (
        "importer",
        "import",
        str(card),
    )
    assert re.fullmatch(r"[0-9a-f]{32}", event.correlation_id)


def test_a_card_import_in_the_admin_is_one_record_through_import() -> None:
    """VX-AUDIT-1: the admin's "new persona from an agent card" page: one "imported from an
    agent card" through `import`, under the request's id, naming the uploaded file."""
    owner = make_owner("admin-importer")
    agent = make_agent(owner)
    form = {
        "agent": agent.pk,
        "address": address(CLASS_ADDRESSES[PersonaClass.CODER_DEPUTY]).path,
        "persona_class": PersonaClass.CODER_DEPUTY,
    }
    new = NewEvents()
    with (FIXTURES / "cards" / "v1.json").open("rb") as card, run_on_commit():
        response = admin_client(owner).post(
            "/admin/personas/persona/from-card/",
            {**form, "file": card},
            **request_id("req-from-card"),
        )
    assert response.status_code == 302, response.content.decode()[-2000:]
    event = new.one(Kind.CARD_IMPORTED)
    assert [e.kind for e in new()] == [Kind.CARD_IMPORTED]
    assert (event.actor_name, event.channel, event.correlation_id, event.data["source"]) == (
        "admin-importer",
        "import",
        "req-from-card",
        "v1.json",
    )


def test_an_edit_in_the_admin_is_one_record() -> None:
    """VX-AUDIT-1: saving a persona's form in the admin with a new description: one "persona
    changed" through the admin, under the request's id (the form's rehearsal of the same
    service call in clean() leaves nothing behind)."""
    persona = standing_persona()
    owner = persona.agent.owner
    client = admin_client(owner)
    page = f"/admin/personas/persona/{persona.pk}/change/"
    data = {**form_data(client.get(page), "persona_form"), "_save": "Save"}
    data["description"] = "Reviews with care."
    new = NewEvents()
    with run_on_commit():
        response = client.post(page, data, **request_id("req-admin-edit"))
    assert response.status_code == 302, response.content.decode()[-2000:]
    event = new.one(Kind.PERSONA_EDITED)
    assert [e.kind for e in new()] == [Kind.PERSONA_EDITED]
    assert (event.actor_name, event.channel, event.correlation_id) == (
        owner.username,
        "admin",
        "req-admin-edit",
    )
    # The form posts every field: the record names the one that changed.
    assert event.data["fields"] == ["description"] and event.data["generation"] == 2


def test_a_snapshot_import_is_one_record_through_import(tmp_path: Path) -> None:
    """VX-AUDIT-1: `virgo persona import`: one "imported from a snapshot", through `import`."""
    source = standing_persona()
    archive = export_persona(source, tmp_path / "p.tar.gz")
    target = make_agent(source.agent.owner)
    new = NewEvents()
    copy = address("work/core/copy").path
    cli("persona", "import", str(archive), "--agent", str(target.pk), "--address", copy)
    event = new.one(Kind.SNAPSHOT_IMPORTED)
    assert [e.kind for e in new()] == [Kind.SNAPSHOT_IMPORTED]
    assert (event.actor_name, event.channel) == (source.agent.owner.username, "import")
    imported = target.personas.get()
    assert event.persona == imported
    assert event.data == {
        "name": imported.name,
        "persona": str(imported.uuid),
        "source_persona": str(source.uuid),
        "archived_stamps": 1,
        "learned_choices_waiting": 0,
        # A persona brought in from elsewhere waits for its owner to approve its grant.
        "held": True,
    }


# A worker's recompute -----------------------------------------------------------------------------


def test_a_skill_map_change_and_the_generations_its_task_opens_are_recorded() -> None:
    """VX-AUDIT-1: a moderator's map change in the admin's session is one "map changed"; the
    fan-out task that follows opens a generation for each affected persona: one "new
    generation" each, through `task`, under the task's id (one insert for the whole batch)."""
    staff = make_owner("staff")
    staff.is_superuser = True
    staff.save()
    agent = make_agent(make_owner())
    reviewers = [make_persona(agent, verb_subset=REVIEWER_VERBS) for _ in range(2)]
    bystander = make_persona(agent, verb_subset=["list_todos"])
    new = NewEvents()
    with run_on_commit(), auditing.entered(auditing.ADMIN, "req-map"):
        services.skill_save(
            actor=staff,
            slug="review-code",
            name="Review code",
            description="Claims and completes reviews.",
            required_verbs=["claim", "complete"],
            tags=["review"],
        )
    changed = new.one(Kind.SKILL_MAP_CHANGED)
    assert (changed.actor_name, changed.channel, changed.correlation_id) == (
        "staff",
        "admin",
        "req-map",
    )
    opened = new(Kind.GENERATION)
    assert sorted(event.persona_id for event in opened) == sorted(p.pk for p in reviewers)
    assert bystander.pk not in {event.persona_id for event in opened}
    for event in opened:
        assert event.channel == "task" and event.correlation_id
        assert event.correlation_id != "req-map" and event.data["generation"] == 2
        assert "None" not in audit.describe(event.kind, event.data)


# Signing keys -----------------------------------------------------------------------------------


def test_each_key_operation_is_one_record_through_the_cli_and_the_admin(settings: Any) -> None:
    """VX-AUDIT-1: `virgo keys create|rotate|retire|revoke`: one record each through the CLI,
    naming the operating-system account that ran it (no Virgo account did); the admin's
    rotate action: one, naming the superuser."""
    seen: list[AuditEvent] = []
    for args, kind in (
        (("keys", "create"), Kind.KEY_CREATED),
        (("keys", "rotate"), Kind.KEY_ROTATED),
    ):
        new = NewEvents()
        cli(*args)
        seen.append(new.one(kind))
    retiring = SigningKey.objects.get(state=SigningKey.State.RETIRING).kid
    for args, kind in (
        (("keys", "retire", retiring), Kind.KEY_RETIRED),
        (("keys", "revoke", seen[-1].data["kid"]), Kind.KEY_REVOKED),
    ):
        new = NewEvents()
        cli(*args)
        seen.append(new.one(kind))
    for event in seen:
        assert_cli(event)
        assert event.actor is None and event.actor_name == auditing._os_account()
    assert seen[2].data["kid"] == retiring
    assert len({event.correlation_id for event in seen}) == 4

    root = get_user_model().objects.create_superuser("keyholder", password="x" * 20)
    active = SigningKey.objects.get(state=SigningKey.State.ACTIVE)
    new = NewEvents()
    with run_on_commit():
        admin_client(root).post(
            "/admin/cards/signingkey/",
            {"action": "rotate_keys", "_selected_action": [active.pk]},
            **request_id("req-rotate"),
        )
    rotated = new.one(Kind.KEY_ROTATED)
    assert (rotated.actor_name, rotated.channel, rotated.correlation_id) == (
        "keyholder",
        "admin",
        "req-rotate",
    )
    assert rotated.data["replaces"] == [active.kid]


# Identity ---------------------------------------------------------------------------------------


def test_an_identity_proven_is_one_record_under_its_entry_point() -> None:
    """VX-AUDIT-1: an OpenID Connect identity proven (the sign-in's callback calls the service
    inside its request): one "identity linked", naming the owner, through that request."""
    owner = make_owner("proven")
    new = NewEvents()
    with auditing.entered(auditing.ADMIN, "req-oidc"):
        services.identity_proven(user=owner, issuer="https://id.example.org", subject="s-1")
    event = new.one(Kind.IDENTITY_LINKED)
    assert (event.actor_name, event.channel, event.correlation_id) == (
        "proven",
        "admin",
        "req-oidc",
    )


# The runtime's decisions ------------------------------------------------------------------------


DELETE = {"path": "memory/old.md", "mode": "delete"}


def test_every_confirm_deny_and_learned_choice_is_one_record_under_the_calls_id() -> None:
    """VX-AUDIT-1: a call held for confirmation, its answer (admin), a learned choice applied
    and a refused call: one record each, through `runtime` under the call's correlation id
    (the answer: through the admin, naming who answered)."""
    persona = standing_persona()
    owner = persona.agent.owner
    assert call(persona, "workspace_write", {"path": "memory/old.md", "content": "x"})["ok"]

    held_id = correlation()
    new = NewEvents()
    assert call(persona, "workspace_write", DELETE, held_id)["code"] == "confirmation_required"
    held = new.one(Kind.CONFIRMATION_REQUESTED)
    assert (held.channel, held.correlation_id) == ("runtime", held_id)
    assert held.actor_name == f"persona {persona.name}"
    assert held.data["tool"] == "workspace_write"

    record = DecisionRecord.objects.get(correlation_id=held_id)
    new = NewEvents()
    with auditing.entered(auditing.ADMIN, "req-answer"):
        record = confirmations.decide(record=record, approve=True, user=owner)
    answered = new.one(Kind.CONFIRMATION_ANSWERED)
    assert (answered.actor_name, answered.channel, answered.correlation_id) == (
        owner.username,
        "admin",
        "req-answer",
    )
    assert answered.data["decision"] == "approved"
    registry.learn(record=record, user=owner)
    assert call(persona, "workspace_write", DELETE, held_id)["ok"]

    assert call(persona, "workspace_write", {"path": "memory/old.md", "content": "x"})["ok"]
    learned_id = correlation()
    new = NewEvents()
    assert call(persona, "workspace_write", DELETE, learned_id)["ok"]
    used = new.one(Kind.LEARNED_CHOICE_USED)
    assert [e.kind for e in new()] == [Kind.LEARNED_CHOICE_USED]
    assert (used.channel, used.correlation_id, used.data["choice"]) == (
        "runtime",
        learned_id,
        "approve",
    )

    denied_id = correlation()
    new = NewEvents()
    assert call(persona, "workspace_read", {"path": ".env"}, denied_id)["ok"] is False
    refused = new.one(Kind.CALL_REFUSED)
    assert (refused.channel, refused.correlation_id) == ("runtime", denied_id)
    assert refused.data["boundary"] == "secret-credential-values"


def test_a_call_a_learned_choice_refuses_is_one_record() -> None:
    """VX-AUDIT-1: a learned "refuse" applied to a call is one "learned choice applied", not
    also a "call refused"."""
    persona = standing_persona()
    owner = persona.agent.owner
    assert call(persona, "workspace_write", {"path": "memory/old.md", "content": "x"})["ok"]
    held_id = correlation()
    assert call(persona, "workspace_write", DELETE, held_id)["code"] == "confirmation_required"
    record = DecisionRecord.objects.get(correlation_id=held_id)
    record = confirmations.decide(record=record, approve=False, user=owner)
    registry.learn(record=record, user=owner)
    refused_id = correlation()
    new = NewEvents()
    answer = call(persona, "workspace_write", DELETE, refused_id)
    assert answer["code"] == "denied_by_learned_choice"
    used = new.one(Kind.LEARNED_CHOICE_USED)
    assert [e.kind for e in new()] == [Kind.LEARNED_CHOICE_USED]
    assert (used.correlation_id, used.data["choice"]) == (refused_id, "deny")
    assert "refuses it" in audit.describe(used.kind, used.data)


# Append-only ------------------------------------------------------------------------------------


def test_an_event_is_never_changed_or_deleted() -> None:
    """VX-AUDIT-1: saving a stored event, deleting it, and updating or deleting through a
    queryset are refused; a deletion elsewhere still clears the link to what it deleted."""
    persona = standing_persona()
    event = AuditEvent.objects.get(persona=persona, kind=Kind.PERSONA_CREATED)
    event.data = {"name": "rewritten"}
    with pytest.raises(AuditEventRefused):
        event.save()
    with pytest.raises(AuditEventRefused):
        event.delete()
    with pytest.raises(AuditEventRefused):
        AuditEvent.objects.filter(pk=event.pk).update(actor_name="someone else")
    with pytest.raises(AuditEventRefused):
        AuditEvent.objects.filter(pk=event.pk).delete()
    with pytest.raises(AuditEventRefused):
        AuditEvent.objects.bulk_update([event], ["data"])
    stored = AuditEvent.objects.get(pk=event.pk)
    assert stored.data["name"] == persona.name and stored.actor_name == persona.agent.owner.username
    services.persona_delete(persona=persona, actor=persona.agent.owner)
    assert AuditEvent.objects.get(pk=event.pk).persona is None


def test_an_action_inside_another_records_once() -> None:
    """VX-AUDIT-1: a service called by another audited service records nothing of its own;
    a consequence is recorded wherever it happens."""
    calls: list[AuditEvent | None] = []

    @audit.action
    def inner() -> None:
        calls.append(audit.record(Kind.SKILL_MAP_CHANGED, data={"skill": "inner"}))
        calls.append(audit.record(Kind.SKILL_MAP_CHANGED, data={"skill": "c"}, consequence=True))

    @audit.action
    def outer() -> None:
        inner()
        calls.append(audit.record(Kind.SKILL_MAP_CHANGED, data={"skill": "outer"}))

    new = NewEvents()
    outer()
    assert calls[0] is None
    assert [e.data["skill"] for e in new()] == ["c", "outer"]
    inner()
    assert [e.data["skill"] for e in new()][-2:] == ["inner", "c"]


# The admin (VX-AUDIT-2) -------------------------------------------------------------------------


@pytest.fixture
def trail() -> dict[str, Any]:
    owner = make_owner("trail-owner")
    persona = standing_persona(owner, name="Auditor")
    with run_on_commit(), auditing.entered(auditing.API, "req-findme"):
        services.persona_revoke(
            persona=persona,
            actor=owner,
            reason_code="compromised",
            reason="its host was broken into",
            via="api",
            generation=persona.generation,
        )
    return {"owner": owner, "persona": persona}


AUDIT = "/admin/personas/auditevent/"


def listed_kinds(response: Any) -> list[str]:
    return [event.kind for event in response.context["cl"].result_list]


def test_the_admin_list_is_searchable_filtered_and_dated(trail: dict[str, Any]) -> None:
    """VX-AUDIT-2: the list is searched by actor name, persona name, kind and correlation id,
    filtered by kind and channel, walked by date; names, never ids."""
    client = admin_client(trail["owner"])
    page = client.get(AUDIT)
    assert page.status_code == 200
    body = page.content.decode()
    assert "trail-owner" in body and "Auditor" in body
    assert re.search(r"by kind|By kind", body) and re.search(r"by channel|By channel", body)
    assert 'id="date-hierarchy-label"' in body
    assert sorted(listed_kinds(page)) == sorted([Kind.PERSONA_CREATED, Kind.REVOKED])
    for query, kinds in (
        ("req-findme", [Kind.REVOKED]),
        ("trail-owner", [Kind.PERSONA_CREATED, Kind.REVOKED]),
        ("Auditor", [Kind.PERSONA_CREATED, Kind.REVOKED]),
        ("revoked", [Kind.REVOKED]),
        ("nobody-at-all", []),
    ):
        found = client.get(AUDIT, {"q": query})
        assert sorted(listed_kinds(found)) == sorted(kinds), query
    assert listed_kinds(client.get(AUDIT, {"kind__exact": "revoked"})) == [Kind.REVOKED]
    assert listed_kinds(client.get(AUDIT, {"channel__exact": "api"})) == [Kind.REVOKED]
    assert listed_kinds(client.get(AUDIT, {"channel__exact": "cli"})) == []
    today = timezone.now()
    dated = client.get(AUDIT, {"at__year": today.year, "at__month": today.month})
    assert len(listed_kinds(dated)) == 2
    other = make_owner("outsider")
    assert listed_kinds(admin_client(other).get(AUDIT)) == []


def test_the_admin_detail_reads_as_words(trail: dict[str, Any]) -> None:
    """VX-AUDIT-2: an event's page shows what happened as labelled values (a definition list):
    no JSON dump, no "None", no raw ids; it is read-only, with no History link."""
    event = AuditEvent.objects.get(kind=Kind.REVOKED)
    client = admin_client(trail["owner"])
    page = client.get(f"{AUDIT}{event.pk}/change/")
    assert page.status_code == 200
    body = page.content.decode()
    details = re.search(r'<dl class="audit-details">(.*?)</dl>', body, re.S)
    assert details is not None
    text = details.group(1)
    assert "<dt>reason</dt><dd>its host was broken into</dd>" in text
    assert "<dt>reason code</dt><dd>compromised</dd>" in text
    assert "<dt>persona</dt><dd>Auditor</dd>" in text
    assert "None" not in body and "{&quot;" not in body and '{"' not in text
    for shown in ("trail-owner", "req-findme", "API", "Persona or generation revoked"):
        assert shown in body
    # Numbers are generations, never ids: every <dd> that is a number follows a generation label.
    for label, value in re.findall(r"<dt>([^<]*)</dt><dd>([^<]*)</dd>", text):
        assert not value.isdigit() or "generation" in label, (label, value)
    assert client.post(f"{AUDIT}{event.pk}/change/", {"kind": "x"}).status_code == 403
    assert client.post(f"{AUDIT}{event.pk}/delete/", {"post": "yes"}).status_code == 403
    # An event is never changed: the page offers no history of its changes either.
    assert "historylink" not in body and f"{event.pk}/history/" not in body
    assert client.get(f"{AUDIT}{event.pk}/history/").status_code == 404


def test_every_kind_is_told_in_words_without_none() -> None:
    """VX-AUDIT-2: each kind's line, even from empty data, says something and never "None"."""
    for kind in Kind:
        line = audit.describe(kind, {})
        assert line and "None" not in line, kind


# Export -----------------------------------------------------------------------------------------


def export(*args: str, stdout: Any = None) -> str:
    out = stdout or io.StringIO()
    call_command("audit", "export", *args, stdout=out)
    return "" if stdout else out.getvalue()


def test_the_export_is_json_lines_oldest_first_within_since_and_until() -> None:
    """VX-AUDIT-1: `virgo audit export --since ... --until ... --format jsonl`: one JSON object
    per event in the window, oldest first, naming actor, kind, channel and correlation id."""
    owner = make_owner("exporter")
    with auditing.entered(auditing.CLI, "cmd-1", operator="ops"):
        for skill in ("a", "b", "c"):
            audit.record(Kind.SKILL_MAP_CHANGED, actor=owner, data={"skill": skill, "change": "x"})
    lines = export("--since", "1h", "--format", "jsonl").splitlines()
    rows = [json.loads(line) for line in lines]
    assert [row["data"]["skill"] for row in rows] == ["a", "b", "c"]
    assert rows[0] | {"id": 0, "at": ""} == {
        "id": 0,
        "at": "",
        "kind": "skill-map-changed",
        "actor": "exporter",
        "channel": "cli",
        "correlation_id": "cmd-1",
        "persona": None,
        "agent": None,
        "summary": "skill a x",
        "data": {"skill": "a", "change": "x"},
    }
    assert datetime.fromisoformat(rows[0]["at"]).tzinfo is not None
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", r["at"]) for r in rows)
    future = (timezone.now() + timedelta(days=1)).date().isoformat()
    assert export("--since", future) == ""
    assert export("--since", "2000-01-01", "--until", "2000-01-02") == ""
    assert len(export("--since", "2000-01-01T00:00:00Z").splitlines()) == 3
    # Without --since, everything: a newcomer's first export is the whole trail (issue 43).
    assert export() == export("--since", "2000-01-01T00:00:00Z")
    assert export("--until", "2000-01-01") == ""


@pytest.mark.parametrize(
    ("args", "option", "why"),
    [
        (("--since", "yesterday"), "--since", "not an ISO 8601 date or time"),
        (("--since", "2026-13-45"), "--since", "not an ISO 8601 date or time"),
        (("--since", "7d", "--until", "soon"), "--until", "not an ISO 8601"),
        (("--since", "1d", "--until", "2d"), "--until", "is not after --since"),
        (("--since", "1d", "--format", "csv"), "--format", "invalid choice"),
    ],
)
def test_bad_input_to_the_export_is_one_clear_error(
    args: tuple[str, ...], option: str, why: str
) -> None:
    """VX-AUDIT-1: a bad option says which and why, status 2, never a traceback."""
    with pytest.raises(CommandError) as refused:
        export(*args)
    assert option in str(refused.value) and why in str(refused.value)
    if option != "--format":  # argparse's own refusal: `virgo` exits 2 printing it
        assert refused.value.returncode == 2


def test_the_export_from_the_virgo_command_is_one_line_and_status_2(capfd: Any) -> None:
    """VX-AUDIT-1: through `virgo`'s own entry (as after `make run`), bad input is one line on
    stderr and exit status 2, no traceback."""
    from virgo.cli import main

    with pytest.raises(SystemExit) as ended:
        main(["audit", "export", "--since", "last tuesday"])
    assert ended.value.code == 2
    err = capfd.readouterr().err
    assert "--since" in err and "Traceback" not in err


class _Checker:
    """A stdout that parses each line as it comes and keeps only the last: so the export's own
    memory is what is measured, not the test's."""

    def __init__(self) -> None:
        self.count = 0
        self.last: tuple[str, int] = ("", 0)
        self.ordered = True

    def write(self, text: str) -> None:
        for line in text.splitlines():
            row = json.loads(line)
            key = (row["at"], row["id"])
            self.ordered &= key > self.last
            self.last = key
            self.count += 1

    def flush(self) -> None:
        pass


def _fill(count: int, at: datetime) -> None:
    batch = 5000
    for start in range(0, count, batch):
        AuditEvent.objects.bulk_create(
            [
                AuditEvent(
                    kind=Kind.SKILL_MAP_CHANGED,
                    actor_name="bulk",
                    channel="task",
                    correlation_id=f"bulk-{n}",
                    data={"skill": f"skill-{n}", "change": "recomputed"},
                )
                for n in range(start, min(start + batch, count))
            ],
            batch_size=batch,
        )


def _peak(run: Callable[[], None]) -> int:
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_exporting_100k_events_takes_the_memory_of_10k() -> None:
    """VX-AUDIT-1: the export streams: its peak memory for 100,000 events is about that for
    10,000 (not ten times), every line parses and the lines are ordered."""
    since = (timezone.now() - timedelta(minutes=1)).astimezone(UTC).isoformat()
    _fill(10_000, timezone.now())
    small = _Checker()
    small_peak = _peak(lambda: export("--since", since, stdout=small))
    assert (small.count, small.ordered) == (10_000, True)
    _fill(90_000, timezone.now())
    large = _Checker()
    with CaptureQueriesContext(connection) as queries:
        large_peak = _peak(lambda: export("--since", since, stdout=large))
    assert (large.count, large.ordered) == (100_000, True)
    # Materialised, 100k rows would cost about ten times the 10k peak; streamed, about the same.
    assert large_peak < 2 * small_peak, (small_peak, large_peak)
    # One query, read in chunks: never one per event or per chunk of ids.
    assert len(queries) == 1, [query["sql"][:80] for query in queries]
