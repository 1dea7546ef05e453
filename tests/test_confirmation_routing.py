"""Confirmations routed through virgo-channel: to the bound human authority, to the owning lead."""

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from channel import routing, services
from channel.deliveries import OutcomeUnknown
from channel.hub import Hub
from channel.models import Delivery
from channel.signing import HEADER, sign
from personas.models import PersonaClass
from runtime import confirmations, registry
from runtime.models import AuthorityKind, DecisionRecord
from runtime.operations import normalise
from runtime.policy import Verdict
from runtime.rules import Outcome
from runtime.stamp import load_active_stamp
from stamps.registry import HANDLERS
from tests.channel_support import (
    DELETE,
    SECRET,
    held_delete,
    human_principal,
    owner_with_surface,
    persona_principal,
    running_hub,
)
from tests.factories import make_owner, register_surfaces, run_on_commit
from tests.runtime_support import call, correlation, standing_persona

pytestmark = pytest.mark.django_db


@pytest.fixture
def hub(settings) -> Iterator[Hub]:
    with running_hub(settings) as hub:
        yield hub


def root_of(persona) -> Path:
    stamp = load_active_stamp(persona)
    return stamp.workspace_for(stamp.tools["workspace_read"]).ensure()


def answer(
    hub: Hub, cid: str, decision: str, principal: dict[str, str], *, at: float | None = None
) -> Any:
    """The hub's signed answer, signed now or at `at` (a repeat the hub signs anew)."""
    body, headers = hub.signed_answer(cid, decision, principal, secret=SECRET)
    signature = headers[HEADER] if at is None else sign(secret=SECRET, body=body, now=at)
    return Client(enforce_csrf_checks=True).post(
        reverse("channel-decision"),
        body,
        content_type="application/json",
        headers={HEADER: signature},
    )


def deputy_scope_request(deputy, cid: str) -> DecisionRecord:
    """A confirmation that crosses no global boundary (the stamp's `access: confirm`)."""
    stamp = load_active_stamp(deputy)
    tool = stamp.tools["workspace_write"]
    op = normalise(
        tool=tool.name,
        action=tool.action,
        arguments={"path": "memory/plan.md", "content": "ship friday"},
        binding=stamp.binding_for(tool),
    )
    with run_on_commit():
        record = confirmations.request_confirmation(
            persona=deputy,
            stamp=stamp,
            op=op,
            verdict=Verdict(Outcome.CONFIRM, None, "stamp-access-confirm", "class profile asks"),
            correlation_id=cid,
        )
        confirmations.notify_authority(record)
    return record


def test_a_global_boundary_confirmation_goes_to_the_owners_surface(hub: Hub) -> None:
    """V1-CONF-1, V1-CONF-2: a card to the bound human authority with the correlation id, the
    normalised operation and approve/deny, sent under the correlation id as Idempotency-Key."""
    owner = owner_with_surface(hub)
    persona = standing_persona(owner)
    cid = correlation()
    pending = held_delete(persona, cid)
    assert pending["status"] == "pending"
    record = DecisionRecord.objects.get(correlation_id=cid)
    request = hub.confirmations[cid]["request"]
    assert request["binding"] == f"teams:user/{owner.username}"
    assert request["correlation_id"] == cid
    assert request["authority"] == {"kind": "human", "principal": human_principal(owner)}
    assert request["requester"]["persona"] == str(persona.uuid)
    assert request["operation"] == record.operation
    assert request["operation"]["arguments"]["mode"] == "delete"
    assert (request["boundary"], request["stamp_hash"]) == (
        "destructive-or-irreversible",
        record.stamp_hash,
    )
    assert [action["id"] for action in request["actions"]] == ["approve", "deny"]
    assert request["callback"]["url"].endswith("/api/channel/decisions/")
    (sent,) = [r for r in hub.received if r.route == "confirmation"]
    assert sent.idempotency_key == cid
    delivery = Delivery.objects.get(kind=Delivery.Kind.CONFIRMATION, correlation_id=cid)
    assert (delivery.status, delivery.decision, delivery.principal) == (
        Delivery.Status.APPLIED,
        record,
        human_principal(owner),
    )
    assert (root_of(persona) / "memory/old.md").exists()


def test_the_signed_answer_approves_and_the_operation_then_runs_once(hub: Hub) -> None:
    """V1-CONF-1, V1-CONF-2: decided as the routed human; the held call runs exactly once."""
    owner = owner_with_surface(hub)
    persona = standing_persona(owner)
    cid = correlation()
    held_delete(persona, cid)
    assert call(persona, "workspace_write", DELETE, cid)["status"] == "pending"
    response = answer(hub, cid, "approve", human_principal(owner))
    assert response.status_code == 200, response.content
    assert response.json() == {"correlation_id": cid, "decision": "approved"}
    record = DecisionRecord.objects.get(correlation_id=cid)
    assert (record.decision, record.decided_by_user, record.decided_by_persona) == (
        DecisionRecord.Decision.APPROVED,
        owner,
        None,
    )
    first = call(persona, "workspace_write", DELETE, cid)
    assert first["ok"] is True and first["result"]["deleted"] is True
    call(persona, "workspace_write", {"path": "memory/old.md", "content": "new life"})
    assert call(persona, "workspace_write", DELETE, cid) == first
    assert (root_of(persona) / "memory/old.md").read_text() == "new life"
    # The hub repeating its answer signs it anew: the same decision again changes nothing.
    later = time.time() + 1
    assert answer(hub, cid, "approve", human_principal(owner), at=later).status_code == 200
    assert answer(hub, cid, "deny", human_principal(owner)).status_code == 409


def test_a_signed_deny_means_the_operation_never_runs(hub: Hub) -> None:
    owner = owner_with_surface(hub)
    persona = standing_persona(owner)
    cid = correlation()
    held_delete(persona, cid)
    assert answer(hub, cid, "deny", human_principal(owner)).json()["decision"] == "denied"
    assert call(persona, "workspace_write", DELETE, cid)["code"] == "denied"
    assert (root_of(persona) / "memory/old.md").exists()


def test_a_deputy_scope_confirmation_goes_to_the_owning_lead(hub: Hub) -> None:
    """V1-CONF-1, V1-CONF-3: a coordination message in the lead's inbox and the card at the
    lead's mailbox on the hub; only the lead's answer decides; the deputy answering its own
    request and the owner are refused."""
    owner = owner_with_surface(hub)
    lead = standing_persona(owner, persona_class=PersonaClass.PROJECT_LEAD)
    deputy = standing_persona(owner, agent=lead.agent, owning_lead=lead)
    cid = correlation()
    record = deputy_scope_request(deputy, cid)
    assert (record.authority_kind, record.authority_persona) == (AuthorityKind.LEAD, lead)
    request = hub.confirmations[cid]["request"]
    assert request["binding"] == f"virgo:persona/{lead.uuid}"
    assert request["authority"] == {"kind": "lead", "principal": persona_principal(lead)}
    assert request["boundary"] is None
    inbox = call(lead, "list_coordination_messages")["result"]["messages"]
    (notice,) = inbox
    assert notice["envelope"]["sender"]["peer_id"] == str(deputy.uuid)
    assert notice["envelope"]["confirmation"]["correlation_id"] == cid
    assert cid in notice["body"] and f"virgo:persona/{lead.uuid}" in notice["body"]
    routing.deliver_confirmation(record.pk)
    assert len(call(lead, "list_coordination_messages")["result"]["messages"]) == 1
    own = answer(hub, cid, "approve", persona_principal(deputy))
    assert (own.status_code, own.json()["error"]) == (403, "own_request")
    human = answer(hub, cid, "approve", human_principal(owner))
    assert (human.status_code, human.json()["error"]) == (403, "wrong_principal")
    record.refresh_from_db()
    assert record.decision == DecisionRecord.Decision.PENDING
    decided = answer(hub, cid, "approve", persona_principal(lead))
    assert decided.status_code == 200
    record.refresh_from_db()
    assert (record.decision, record.decided_by_persona, record.decided_by_user) == (
        DecisionRecord.Decision.APPROVED,
        lead,
        None,
    )


def test_an_owner_without_a_surface_is_asked_once_one_is_set(hub: Hub) -> None:
    """V1-CONF-1: nothing is sent to a guessed address; the pass after the owner sets a surface
    delivers the waiting request."""
    owner = make_owner()
    persona = standing_persona(owner)
    cid = correlation()
    held_delete(persona, cid)
    delivery = Delivery.objects.get(correlation_id=cid)
    assert (delivery.status, delivery.reason) == (Delivery.Status.FAILED, "no_authority_surface")
    assert hub.received == []
    hub.add_surface("teams:user/late")
    register_surfaces(owner, ["teams:user/late"])
    services.authority_surface_set(
        user=owner, actor=owner, binding="teams:user/late", principal="aad:late@example.org"
    )
    assert routing.redeliver_pending(older_than=timedelta(0)) == 1
    delivery.refresh_from_db()
    assert (delivery.status, delivery.binding) == (Delivery.Status.APPLIED, "teams:user/late")
    assert hub.confirmations[cid]["request"]["binding"] == "teams:user/late"


def test_an_unknown_delivery_is_sent_again_and_reaches_the_hub_once(hub: Hub) -> None:
    """V1-HS-1 discipline for confirmations: the resend uses the same key and the same request."""
    owner = owner_with_surface(hub)
    persona = standing_persona(owner)
    hub.fail("confirmation", "drop")
    cid = correlation()
    held_delete(persona, cid)
    delivery = Delivery.objects.get(correlation_id=cid)
    assert delivery.status == Delivery.Status.UNKNOWN
    sent = delivery.request
    hub.clear_faults()
    assert routing.redeliver_pending(older_than=timedelta(0)) == 1
    delivery.refresh_from_db()
    assert (delivery.status, delivery.request) == (Delivery.Status.APPLIED, sent)
    assert hub.count("confirmation") == 1
    assert routing.redeliver_pending(older_than=timedelta(0)) == 0


def test_a_learned_choice_answers_without_asking_anyone(hub: Hub) -> None:
    """V1-CONF-1, V1-PR-1: the request is routed only when nothing learned answers it."""
    owner = owner_with_surface(hub)
    persona = standing_persona(owner)
    cid = correlation()
    held_delete(persona, cid)
    answer(hub, cid, "approve", human_principal(owner))
    registry.learn(record=DecisionRecord.objects.get(correlation_id=cid), user=owner)
    asked = hub.count("confirmation")
    again = correlation()
    call(persona, "workspace_write", {"path": "memory/old.md", "content": "again"})
    with run_on_commit():
        result = call(persona, "workspace_write", DELETE, again)
    assert result["ok"] is True
    assert hub.count("confirmation") == asked
    assert not Delivery.objects.filter(correlation_id=again).exists()


def test_an_unknown_outcome_under_an_approved_decision_is_not_recorded_as_run(
    hub: Hub, monkeypatch
) -> None:
    """V1-HS-1, V1-CONF-2: a retryable failure leaves the approval open; the next call runs it,
    once. (The held operation's implementation reports `unknown` on its first run, the way a
    hub-bound tool does when the hub does not answer.)"""
    owner = owner_with_surface(hub)
    persona = standing_persona(owner)
    cid = correlation()
    held_delete(persona, cid)
    answer(hub, cid, "approve", human_principal(owner))
    real = HANDLERS.implementation("workspace.write")
    runs: list[str] = []

    def flaky(tool_call):
        runs.append(tool_call.correlation_id)
        if len(runs) == 1:
            raise OutcomeUnknown("timeout", attempts=3)
        return real(tool_call)

    monkeypatch.setitem(HANDLERS._handlers, "workspace.write", flaky)
    first = call(persona, "workspace_write", DELETE, cid)
    assert (first["ok"], first["status"], first["retryable"]) == (False, "unknown", True)
    assert DecisionRecord.objects.get(correlation_id=cid).executed_at is None
    assert (root_of(persona) / "memory/old.md").exists()
    second = call(persona, "workspace_write", DELETE, cid)
    assert second["ok"] is True and second["result"]["deleted"] is True
    assert call(persona, "workspace_write", DELETE, cid) == second
    assert runs == [cid, cid]
