"""Confirmations: recorded before execution, routed, answered by the routed authority, run once."""

import html
import logging
import re
from pathlib import Path

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client
from django.urls import reverse

from personas.models import PersonaClass
from runtime import confirmations, registry
from runtime.models import AuthorityKind, DecisionRecord, Presence, RefusalRecord, Webhook
from runtime.operations import normalise
from runtime.policy import Verdict
from runtime.redaction import SECRET_VALUE
from runtime.rules import Outcome
from runtime.stamp import load_active_stamp
from runtime.tools.params import fingerprint
from stamps import profiles
from stamps.registry import HANDLERS
from stamps.services import owner_reference
from tests.channel_support import OPS, surface_persona
from tests.factories import make_owner, update_persona
from tests.runtime_support import call, correlation, root_of, standing_persona

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, settings) -> Path:
    settings.VIRGO_HOME = tmp_path / "home"
    return settings.VIRGO_HOME


DELETE = {"path": "memory/old.md", "mode": "delete"}


def held_delete(persona) -> tuple[str, DecisionRecord]:
    call(persona, "workspace_write", {"path": "memory/old.md", "content": "keep me"})
    cid = correlation()
    result = call(persona, "workspace_write", DELETE, cid)
    assert result["code"] == "confirmation_required"
    return cid, DecisionRecord.objects.get(correlation_id=cid)


def test_the_decision_record_is_complete_and_written_before_anything_runs(monkeypatch) -> None:
    """V1-CONF-2: requester, authority binding, normalised operation, stamp hash, decision, id."""
    persona = standing_persona()
    cid, record = held_delete(persona)
    assert record.requester == persona
    assert (record.authority_kind, record.authority_user) == (
        AuthorityKind.HUMAN,
        persona.agent.owner,
    )
    assert record.operation["handler_action"] == "workspace.write"
    assert record.operation["target"] == {
        "workspace": "work",
        "project": "core",
        "persona": str(persona.uuid),
        "path": "memory/old.md",
    }
    assert record.operation["arguments"]["mode"] == "delete"
    assert record.stamp_hash == load_active_stamp(persona).stamp_hash
    assert (record.decision, record.executed_at) == (DecisionRecord.Decision.PENDING, None)
    assert (root_of(persona) / "memory/old.md").exists()

    seen: list[tuple[str, object]] = []
    real = HANDLERS.implementation("workspace.write")

    def observing(tool_call):
        stored = DecisionRecord.objects.get(correlation_id=tool_call.correlation_id)
        seen.append((stored.decision, stored.executed_at))
        return real(tool_call)

    monkeypatch.setitem(HANDLERS._handlers, "workspace.write", observing)
    confirmations.decide(record=record, approve=True, user=persona.agent.owner)
    assert call(persona, "workspace_write", DELETE, cid)["ok"] is True
    assert seen == [(DecisionRecord.Decision.APPROVED, None)]


def test_an_approved_operation_runs_exactly_once_under_its_correlation_id() -> None:
    """V1-CONF-2: re-calling after approval runs it once; later calls return the recorded result."""
    persona = standing_persona()
    cid, record = held_delete(persona)
    assert call(persona, "workspace_write", DELETE, cid)["status"] == "pending"
    confirmations.decide(record=record, approve=True, user=persona.agent.owner)
    first = call(persona, "workspace_write", DELETE, cid)
    assert first["ok"] is True and first["result"]["deleted"] is True
    assert not (root_of(persona) / "memory/old.md").exists()
    call(persona, "workspace_write", {"path": "memory/old.md", "content": "new life"})
    again = call(persona, "workspace_write", DELETE, cid)
    assert again == first
    assert (root_of(persona) / "memory/old.md").read_text() == "new life"
    record.refresh_from_db()
    assert record.executed_at is not None and record.result == first


def test_a_correlation_id_cannot_be_reused_for_another_operation() -> None:
    persona = standing_persona()
    cid, record = held_delete(persona)
    confirmations.decide(record=record, approve=True, user=persona.agent.owner)
    other = call(persona, "workspace_write", {"path": "QUEUE.md", "mode": "delete"}, cid)
    mismatch = f"correlation id {cid} belongs to a different operation"
    assert (other["code"], other["reason"]) == ("correlation_mismatch", mismatch)
    stranger = standing_persona()
    taken = call(stranger, "workspace_write", DELETE, cid)
    assert (taken["code"], taken["reason"]) == ("correlation_mismatch", mismatch)
    assert (root_of(persona) / "memory/old.md").exists()


def test_a_denied_operation_never_runs() -> None:
    persona = standing_persona()
    cid, record = held_delete(persona)
    confirmations.decide(record=record, approve=False, user=persona.agent.owner)
    result = call(persona, "workspace_write", DELETE, cid)
    assert (result["ok"], result["code"]) == (False, "denied")
    assert result["reason"] == f"human:{persona.agent.owner} refused this operation"
    assert (root_of(persona) / "memory/old.md").exists()
    with pytest.raises(ValidationError):
        confirmations.decide(record=record, approve=True, user=persona.agent.owner)


def test_an_approval_does_not_outlive_a_changed_stamp() -> None:
    persona = standing_persona()
    cid, record = held_delete(persona)
    confirmations.decide(record=record, approve=True, user=persona.agent.owner)
    persona = update_persona(persona, queues=["reviews", "triage"])
    assert load_active_stamp(persona).stamp_hash != record.stamp_hash
    changed = call(persona, "workspace_write", DELETE, cid)
    assert (changed["code"], changed["reason"]) == (
        "stamp_changed",
        "the persona's stamp changed since this operation was confirmed; ask again",
    )
    assert (root_of(persona) / "memory/old.md").exists()


def test_a_persona_never_confirms_its_own_request() -> None:
    """V1-CONF-3: not through decide(), not by claiming confirmation in its arguments."""
    persona = standing_persona()
    cid, record = held_delete(persona)
    with pytest.raises(PermissionDenied, match="own request"):
        confirmations.decide(record=record, approve=True, persona=persona)
    claimed = call(persona, "workspace_write", {**DELETE, "confirmed": True}, cid)
    assert claimed["code"] == "invalid_arguments"
    record.refresh_from_db()
    assert record.decision == DecisionRecord.Decision.PENDING
    assert call(persona, "workspace_write", DELETE, cid)["status"] == "pending"
    assert (root_of(persona) / "memory/old.md").exists()


def test_nobody_but_the_routed_human_authority_decides() -> None:
    """V1-CONF-1, V1-CONF-3: another owner, a moderator, a lead persona are all refused."""
    persona = standing_persona()
    _, record = held_delete(persona)
    moderator = make_owner()
    moderator.is_superuser = True
    moderator.save()
    lead = standing_persona(persona.agent.owner, persona_class=PersonaClass.PROJECT_LEAD)
    for kwargs in (
        {"user": make_owner()},
        {"user": moderator},
        {"persona": lead},
        {"user": persona.agent.owner, "persona": lead},
    ):
        with pytest.raises(PermissionDenied):
            confirmations.decide(record=record, approve=True, **kwargs)
    record.refresh_from_db()
    assert record.decision == DecisionRecord.Decision.PENDING


def test_a_tool_the_stamp_gives_access_confirm_is_held_though_it_crosses_no_boundary(
    monkeypatch,
) -> None:
    """V1-POL-2, V1-CONF-2: `access: confirm` in the stamp is obeyed by handle(): the call is
    held, recorded and routed (to the owner: this persona has no lead), and does not run."""
    real = profiles.access_for
    monkeypatch.setattr(
        profiles,
        "access_for",
        lambda persona_class, verb: (
            "confirm" if verb == "set_summary" else real(persona_class, verb)
        ),
    )
    persona = standing_persona()
    stamped = load_active_stamp(persona).tools["set_summary"]
    assert (stamped.access, stamped.boundary) == ("confirm", None)
    cid = correlation()
    held = call(persona, "set_summary", {"summary": "Reviews core."}, cid)
    assert (held["code"], held["boundary"]) == ("confirmation_required", None)
    record = DecisionRecord.objects.get(correlation_id=cid)
    assert (record.rule, record.authority_user) == ("stamp-access-confirm", persona.agent.owner)
    assert not Presence.objects.filter(persona=persona).exists()
    confirmations.decide(record=record, approve=True, user=persona.agent.owner)
    assert call(persona, "set_summary", {"summary": "Reviews core."}, cid)["ok"] is True
    assert Presence.objects.get(persona=persona).summary == "Reviews core."


def test_deputy_scope_goes_to_the_owning_lead_and_global_boundaries_to_the_human() -> None:
    """V1-CONF-1: routing follows the stamp's authority binding."""
    owner = make_owner()
    lead = standing_persona(owner, persona_class=PersonaClass.PROJECT_LEAD)
    deputy = standing_persona(owner, agent=lead.agent, owning_lead=lead)
    stamp = load_active_stamp(deputy)
    assert stamp.owning_lead == str(lead.uuid)
    deputy_scope = Verdict(Outcome.CONFIRM, None, "stamp-access-confirm", "class profile asks")
    authority = confirmations.route(stamp=stamp, persona=deputy, verdict=deputy_scope)
    assert (authority.kind, authority.persona) == (AuthorityKind.LEAD, lead)
    _, record = held_delete(deputy)
    assert record.authority_kind == AuthorityKind.HUMAN
    assert record.authority_user == owner


def test_the_owning_lead_answers_a_deputy_scope_request_and_the_owner_does_not() -> None:
    """V1-CONF-1, V1-CONF-3: a lead-routed request is the lead's, not its own, not the human's."""
    owner = make_owner()
    lead = standing_persona(owner, persona_class=PersonaClass.PROJECT_LEAD)
    deputy = standing_persona(owner, agent=lead.agent, owning_lead=lead)
    stamp = load_active_stamp(deputy)
    tool = stamp.tools["workspace_write"]
    op = normalise(
        tool=tool.name,
        action=tool.action,
        arguments={"path": "memory/a.md", "content": "x"},
        binding=stamp.binding_for(tool),
    )
    record = confirmations.request_confirmation(
        persona=deputy,
        stamp=stamp,
        op=op,
        verdict=Verdict(Outcome.CONFIRM, None, "stamp-access-confirm", "class profile asks"),
        correlation_id=correlation(),
    )
    for kwargs in ({"user": owner}, {"persona": deputy}):
        with pytest.raises(PermissionDenied):
            confirmations.decide(record=record, approve=True, **kwargs)
    decided = confirmations.decide(record=record, approve=True, persona=lead)
    assert (decided.decision, decided.decided_by_persona) == (
        DecisionRecord.Decision.APPROVED,
        lead,
    )


def _approve_in_admin(client, record: DecisionRecord):
    return client.post(
        reverse("admin:runtime_decisionrecord_changelist"),
        {"action": "approve", "_selected_action": [record.pk]},
        follow=True,
    )


def test_the_owner_approves_in_the_admin_and_others_cannot() -> None:
    """V1-CONF-1, V1-CONF-3: owner / other owner / anonymous on the admin action."""
    persona = standing_persona()
    cid, record = held_delete(persona)
    anonymous = Client()
    response = _approve_in_admin(anonymous, record)
    assert response.redirect_chain and "login" in response.redirect_chain[-1][0]

    other = Client()
    other.force_login(make_owner())
    listing = other.get(reverse("admin:runtime_decisionrecord_changelist"))
    assert listing.status_code == 200 and cid not in listing.content.decode()
    _approve_in_admin(other, record)
    record.refresh_from_db()
    assert record.decision == DecisionRecord.Decision.PENDING

    owner = Client()
    owner.force_login(persona.agent.owner)
    listing = owner.get(reverse("admin:runtime_decisionrecord_changelist"))
    assert "memory/old.md" in listing.content.decode()
    response = _approve_in_admin(owner, record)
    assert response.status_code == 200
    record.refresh_from_db()
    assert (record.decision, record.decided_by_user) == (
        DecisionRecord.Decision.APPROVED,
        persona.agent.owner,
    )
    assert call(persona, "workspace_write", DELETE, cid)["ok"] is True


def test_approve_and_remember_says_what_was_approved_when_it_cannot_remember() -> None:
    """V1-CONF-1, V1-PR-1: two requests held for one exact operation, both approved with
    "remember" in the admin: the second is approved (and says so) though its choice cannot be
    learned twice; the owner is never told "not approved" of a request that was."""
    persona = standing_persona()
    owner = Client()
    owner.force_login(persona.agent.owner)
    held = [held_delete(persona) for _ in range(2)]
    for _cid, record in held:
        response = owner.post(
            reverse("admin:runtime_decisionrecord_changelist"),
            {"action": "approve_and_remember", "_selected_action": [record.pk]},
            follow=True,
        )
        record.refresh_from_db()
        assert record.decision == DecisionRecord.Decision.APPROVED
    shown = [str(message) for message in response.context["messages"]]
    second = held[1][0]
    assert shown == [
        "1 request(s) approved.",
        f"Approved, but not remembered: {second}: "
        "{'entry': ['this exact operation already has a learned choice']}",
    ]
    assert persona.prompt_registry_entries.count() == 1


def test_a_stamp_routing_to_someone_else_than_the_owner_asks_nobody() -> None:
    """V1-CONF-1: the stamp's bound human authority must be the persona's owner; else refused,
    saying whom the stamp routes to and why that one may not answer."""
    persona = standing_persona()
    call(persona, "workspace_write", {"path": "memory/old.md", "content": "keep me"})
    stamped_owner = persona.agent.owner
    newcomer = make_owner()
    type(persona.agent).objects.filter(pk=persona.agent_id).update(owner=newcomer)
    persona.refresh_from_db()
    result = call(persona, "workspace_write", DELETE)
    assert (result["ok"], result["code"], result["boundary"]) == (
        False,
        "stamp_unavailable",
        "destructive-or-irreversible",
    )
    assert result["reason"] == (
        f"persona {persona.uuid}: the stamp routes confirmations to "
        f"{owner_reference(stamped_owner.pk)!r}, who is not the persona's owner"
    )
    assert not DecisionRecord.objects.exists()
    assert (root_of(persona) / "memory/old.md").exists()


# What the owner is shown of a held request ----------------------------------------------------

_ASKED_ROW = re.compile(r"<li><code>(.*?)</code>: <code>(.*?)</code></li>")


def asked_in_admin(record: DecisionRecord) -> list[tuple[str, str]]:
    """The "what is asked" list of the request's admin page, as its owner reads it."""
    client = Client()
    client.force_login(record.requester.agent.owner)
    page = client.get(reverse("admin:runtime_decisionrecord_change", args=[record.pk]))
    assert page.status_code == 200
    return [
        (html.unescape(name), html.unescape(value))
        for name, value in _ASKED_ROW.findall(page.content.decode())
    ]


def test_the_owner_is_shown_where_a_held_operation_acts_as_it_was_written() -> None:
    """VX-SEC-2, V1-CONF-2: the admin lists the target (the file, the persona's own binding)
    beside what the call does, each value as its author wrote it, not as escapes."""
    persona = standing_persona()
    path = "memory/café.md"
    call(persona, "workspace_write", {"path": path, "content": "keep me"})
    cid = correlation()
    assert call(persona, "workspace_write", {"path": path, "mode": "delete"}, cid)["code"] == (
        "confirmation_required"
    )
    asked = asked_in_admin(DecisionRecord.objects.get(correlation_id=cid))
    for shown in (
        ("path", '"memory/café.md"'),
        ("persona", f'"{persona.uuid}"'),
        ("workspace", '"work"'),
        ("mode", '"delete"'),
    ):
        assert shown in asked, (shown, asked)
    assert (root_of(persona) / path).exists()


def test_a_held_card_is_shown_in_the_canonical_form_its_key_is_taken_of() -> None:
    """VX-SEC-2, VX-SEC-13: an ask-first card is shown with every value the key covers; an
    object's fields in one order (the key's canonical JSON sorts them), so two calls the key
    takes for one operation are shown alike; text as written."""
    persona = surface_persona(ask_first_verbs=["send_human_card"])
    shown = []
    in_order = {"name": "tests", "value": "412 passed"}
    for fact in ({"value": "412 passed", "name": "tests"}, in_order):
        cid = correlation()
        card = {"binding": OPS, "title": "Café release", "facts": [fact]}
        assert call(persona, "send_human_card", card, cid)["code"] == "confirmation_required"
        shown.append(asked_in_admin(DecisionRecord.objects.get(correlation_id=cid)))
    assert shown[0] == shown[1]
    assert ("title", '"Café release"') in shown[0]
    assert ("facts", '[{"name": "tests", "value": "412 passed"}]') in shown[0], shown[0]


def test_a_secret_a_tool_resolves_is_shown_withheld_with_its_fingerprint() -> None:
    """VX-SEC-7, VX-SEC-2: a webhook's stored URL that carries a token (a row from before the
    URL was checked) is what a trigger resolves and is keyed on; the record and the admin hold
    it only as withheld, with its sha256 and length, and never the token itself."""
    token = "ghp_" + "A1b2C3d4" * 5
    hook = f"https://ci.example.org/hooks/{token}"
    persona = standing_persona(
        persona_class=PersonaClass.PROJECT_LEAD, extra=("register_webhook", "trigger_webhook")
    )
    Webhook.objects.create(persona=persona, name="ci", url=hook)
    cid = correlation()
    held = call(persona, "trigger_webhook", {"webhook": "ci", "payload": {"a": 1}}, cid)
    assert held["code"] == "confirmation_required", held
    record = DecisionRecord.objects.get(correlation_id=cid)
    mark, payload = fingerprint(hook), fingerprint({"a": 1})
    assert record.operation["shape"]["resolved"]["url"] == {"redacted": SECRET_VALUE, **mark}
    asked = asked_in_admin(record)
    assert (
        "url (resolved)",
        f"redacted ({SECRET_VALUE}): sha256 {mark['sha256']} ({mark['bytes']} bytes)",
    ) in asked, asked
    assert ("payload", f"sha256 {payload['sha256']} ({payload['bytes']} bytes)") in asked
    assert token not in str(record.operation) and token not in str(asked)


# What the requester is told, and who may answer --------------------------------------------------


def test_the_persona_is_told_which_call_is_held_why_and_by_whom(caplog) -> None:
    """V1-CONF-2, V1-CONF-1: the held call answers with the tool, the boundary and the rule's
    reason as the decision record stores them, the authority it waits for and how to resume;
    the owner's admin list shows the same tool and reason; the WARNING line names the tool, the
    persona, the correlation id and the authority."""
    persona = standing_persona()
    call(persona, "workspace_write", {"path": "memory/old.md", "content": "keep me"})
    cid = correlation()
    caplog.set_level(logging.WARNING, logger="virgo.runtime")
    held = call(persona, "workspace_write", DELETE, cid)
    owner = persona.agent.owner
    assert held == {
        "ok": False,
        "code": "confirmation_required",
        "status": "pending",
        "tool": "workspace_write",
        "boundary": "destructive-or-irreversible",
        "reason": "deleting 'memory/old.md' cannot be undone",
        "authority": f"human:{owner}",
        "correlation_id": cid,
        "retry": "call again with the same correlation_id once the authority has answered",
    }
    assert [r.getMessage() for r in caplog.records if r.name == "virgo.runtime"] == [
        f"held for confirmation tool=workspace_write persona={persona.uuid} correlation={cid} "
        f"authority=human:{owner}"
    ]
    record = DecisionRecord.objects.get(correlation_id=cid)
    assert (record.tool_name, record.reason) == (held["tool"], held["reason"])
    client = Client()
    client.force_login(owner)
    listing = client.get(reverse("admin:runtime_decisionrecord_changelist")).content.decode()
    assert "workspace_write" in listing
    assert html.escape("deleting 'memory/old.md' cannot be undone") in listing


def test_a_deputy_scope_request_goes_to_the_lead_the_stamp_names() -> None:
    """VX-SEC-13, V1-CONF-1: of the owner's personas, exactly the one the deputy's stamp names
    as owning lead is asked, through handle(); another persona of the same owner (made first)
    is not asked and may not answer."""
    owner = make_owner()
    other = standing_persona(owner, persona_class=PersonaClass.PROJECT_LEAD)
    lead = standing_persona(owner, persona_class=PersonaClass.PROJECT_LEAD)
    deputy = standing_persona(
        owner, agent=lead.agent, owning_lead=lead, ask_first_verbs=["workspace_write"]
    )
    cid = correlation()
    held = call(deputy, "workspace_write", {"path": "memory/plan.md", "content": "x"}, cid)
    assert (held["code"], held["authority"]) == ("confirmation_required", f"lead:{lead}")
    record = DecisionRecord.objects.get(correlation_id=cid)
    assert (record.authority_kind, record.authority_persona) == (AuthorityKind.LEAD, lead)
    assert not confirmations.may_decide(record, persona=other)
    with pytest.raises(PermissionDenied):
        confirmations.decide(record=record, approve=True, persona=other)
    assert confirmations.decide(record=record, approve=True, persona=lead).decided_by_persona == (
        lead
    )


def test_an_approved_operation_whose_implementation_is_gone_is_refused_not_run(monkeypatch) -> None:
    """V1-FAC-7, V1-CONF-2: resuming an approved request runs only a bound implementation; one
    gone since is refused, never faked, and that refusal is the request's recorded answer."""
    persona = standing_persona()
    cid, record = held_delete(persona)
    confirmations.decide(record=record, approve=True, user=persona.agent.owner)
    monkeypatch.setitem(HANDLERS._handlers, "workspace.write", None)
    result = call(persona, "workspace_write", DELETE, cid)
    assert (result["code"], result["reason"]) == (
        "not_implemented",
        "workspace.write has no implementation",
    )
    assert RefusalRecord.objects.get(correlation_id=cid).code == "not_implemented"
    assert call(persona, "workspace_write", DELETE, cid) == result
    assert (root_of(persona) / "memory/old.md").exists()


def test_two_calls_racing_on_one_correlation_id_make_one_request(monkeypatch) -> None:
    """V1-CONF-2: a second call under the same correlation id that writes its request first (it
    runs while the first is between its look-up and its write) leaves one record, and the first
    call answers with that record as pending, not with an error."""
    persona = standing_persona()
    call(persona, "workspace_write", {"path": "memory/old.md", "content": "keep me"})
    cid = correlation()
    real = registry.lookup
    raced: list[dict] = []

    def lookup_then_race(**kwargs):
        monkeypatch.setattr(registry, "lookup", real)
        raced.append(call(persona, "workspace_write", DELETE, cid))
        return real(**kwargs)

    monkeypatch.setattr(registry, "lookup", lookup_then_race)
    first = call(persona, "workspace_write", DELETE, cid)
    assert raced[0]["code"] == "confirmation_required"
    assert first == raced[0]
    assert DecisionRecord.objects.filter(correlation_id=cid).count() == 1
    assert (root_of(persona) / "memory/old.md").exists()


def test_another_operation_racing_onto_the_same_correlation_id_is_refused_as_a_mismatch(
    monkeypatch,
) -> None:
    """V1-CONF-2: when another operation writes its request under the same correlation id
    first, the call that lost the race is refused as a mismatch (recorded, loud), and neither
    runs."""
    persona = standing_persona()
    for path in ("memory/old.md", "memory/other.md"):
        call(persona, "workspace_write", {"path": path, "content": "keep me"})
    cid = correlation()
    real = registry.lookup
    raced: list[dict] = []

    def lookup_then_race(**kwargs):
        monkeypatch.setattr(registry, "lookup", real)
        raced.append(call(persona, "workspace_write", {**DELETE, "path": "memory/other.md"}, cid))
        return real(**kwargs)

    monkeypatch.setattr(registry, "lookup", lookup_then_race)
    first = call(persona, "workspace_write", DELETE, cid)
    assert raced[0]["code"] == "confirmation_required"
    assert (first["ok"], first["code"]) == (False, "correlation_mismatch")
    assert first["reason"] == f"correlation id {cid} belongs to a different operation"
    assert RefusalRecord.objects.get(correlation_id=cid).code == "correlation_mismatch"
    assert (root_of(persona) / "memory/old.md").exists()
    assert (root_of(persona) / "memory/other.md").exists()


def test_an_approved_call_repeated_while_it_runs_runs_once(monkeypatch) -> None:
    """V1-CONF-2: a repeat of an approved call that ran while the first was between reading its
    record and locking it gets the recorded result; the operation runs once."""
    persona = standing_persona()
    cid, record = held_delete(persona)
    confirmations.decide(record=record, approve=True, user=persona.agent.owner)
    real = confirmations.operation_digest
    repeated: list[dict] = []

    def digest_then_repeat(op):
        monkeypatch.setattr(confirmations, "operation_digest", real)
        repeated.append(call(persona, "workspace_write", DELETE, cid))
        return real(op)

    monkeypatch.setattr(confirmations, "operation_digest", digest_then_repeat)
    first = call(persona, "workspace_write", DELETE, cid)
    assert repeated[0]["ok"] is True and repeated[0]["result"]["deleted"] is True
    assert first == repeated[0]
    assert not (root_of(persona) / "memory/old.md").exists()
