"""The prompt registry: exact matches only, never broadening, never outliving a stamp unreviewed."""

import hashlib
import json
from pathlib import Path

import pytest
import rfc8785
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client
from django.urls import reverse

from runtime import confirmations, registry
from runtime.models import DecisionRecord, PromptRegistryEntry, RefusalRecord
from runtime.stamp import load_active_stamp
from stamps.registry import HANDLERS
from tests.factories import make_owner, update_persona
from tests.runtime_support import call, correlation, standing_persona

pytestmark = pytest.mark.django_db

Choice = PromptRegistryEntry.Choice


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, settings) -> Path:
    settings.VIRGO_HOME = tmp_path / "home"
    return settings.VIRGO_HOME


def delete(path: str) -> dict:
    return {"path": path, "mode": "delete"}


def prepare(persona, path: str = "memory/old.md") -> None:
    assert call(persona, "workspace_write", {"path": path, "content": "x"})["ok"]


def teach(persona, path: str = "memory/old.md", *, approve: bool = True) -> PromptRegistryEntry:
    """The owner answers one held delete and asks for the answer to be remembered."""
    prepare(persona, path)
    cid = correlation()
    assert call(persona, "workspace_write", delete(path), cid)["code"] == "confirmation_required"
    record = DecisionRecord.objects.get(correlation_id=cid)
    record = confirmations.decide(record=record, approve=approve, user=persona.agent.owner)
    entry = registry.learn(record=record, user=persona.agent.owner)
    call(persona, "workspace_write", delete(path), cid)
    return entry


def test_an_exact_learned_choice_applies_without_asking() -> None:
    """V1-PR-1, V1-ACC-7: same stamp, action, target and shape: no new confirmation."""
    persona = standing_persona()
    entry = teach(persona)
    assert entry.stamp_hash == load_active_stamp(persona).stamp_hash
    assert (entry.handler_action, entry.target_scope) == (
        "workspace.write",
        {"path": "memory/old.md"},
    )
    prepare(persona)
    cid = correlation()
    result = call(persona, "workspace_write", delete("memory/old.md"), cid)
    assert result["ok"] is True and result["result"]["deleted"] is True
    record = DecisionRecord.objects.get(correlation_id=cid)
    assert (record.decided_via, record.registry_entry) == (
        DecisionRecord.Via.PROMPT_REGISTRY,
        entry,
    )
    assert record.decided_at is not None and record.decision == DecisionRecord.Decision.APPROVED
    assert record.executed_at is not None


def test_a_learned_approval_whose_run_the_workspace_refuses_is_refused_loudly() -> None:
    """V1-PR-1, VX-SEC-11: a learned choice approves the operation, not what the file became:
    the file given a second name (a hard link) since, the run is refused and recorded."""
    persona = standing_persona()
    teach(persona)
    prepare(persona)
    stamp = load_active_stamp(persona)
    root = stamp.workspace_for(stamp.tools["workspace_write"]).root
    (root / "memory/old.md").unlink()
    (root / "memory/keep.md").write_text("keep me")
    (root / "memory/old.md").hardlink_to(root / "memory/keep.md")
    cid = correlation()
    result = call(persona, "workspace_write", delete("memory/old.md"), cid)
    assert (result["ok"], result["code"]) == (False, "hard_link")
    assert result["boundary"] == "cross-scope-access"
    assert RefusalRecord.objects.get(correlation_id=cid).code == "hard_link"
    record = DecisionRecord.objects.get(correlation_id=cid)
    assert record.decided_via == DecisionRecord.Via.PROMPT_REGISTRY
    assert (root / "memory/keep.md").read_text() == "keep me"


def test_a_near_miss_does_not_match() -> None:
    """V1-PR-1, V1-ACC-7: another path, or another persona of the same owner, still asks."""
    persona = standing_persona()
    teach(persona)
    prepare(persona, "memory/older.md")
    assert call(persona, "workspace_write", delete("memory/older.md"))["code"] == (
        "confirmation_required"
    )
    sibling = standing_persona(persona.agent.owner, agent=persona.agent)
    prepare(sibling)
    assert call(sibling, "workspace_write", delete("memory/old.md"))["code"] == (
        "confirmation_required"
    )


def test_a_learned_refusal_refuses_without_asking() -> None:
    """V1-PR-1, V1-CONF-2: the call is refused, and its decision record says it was denied by
    the learned choice (an audit that read "approved" would lie about what happened)."""
    persona = standing_persona()
    entry = teach(persona, approve=False)
    cid = correlation()
    result = call(persona, "workspace_write", delete("memory/old.md"), cid)
    assert (result["ok"], result["code"]) == (False, "denied_by_learned_choice")
    assert result["reason"] == (
        "a learned choice refuses this exact operation (deleting 'memory/old.md' cannot be undone)"
    )
    assert result["boundary"] == "destructive-or-irreversible"
    record = DecisionRecord.objects.get(correlation_id=cid)
    assert (record.decision, record.decided_via, record.registry_entry) == (
        DecisionRecord.Decision.DENIED,
        DecisionRecord.Via.PROMPT_REGISTRY,
        entry,
    )
    assert record.decided_at is not None and record.executed_at is None


def test_a_changed_stamp_does_not_carry_choices_until_the_owner_reviews_them() -> None:
    """V1-PR-3, V1-ACC-7: a new stamp hash starts empty; the owner's review carries entries."""
    persona = standing_persona()
    entry = teach(persona)
    old_hash = load_active_stamp(persona).stamp_hash
    persona = update_persona(persona, queues=["reviews", "triage"])
    assert load_active_stamp(persona).stamp_hash != old_hash
    prepare(persona)
    assert call(persona, "workspace_write", delete("memory/old.md"))["code"] == (
        "confirmation_required"
    )
    with pytest.raises(PermissionDenied):
        registry.carry_forward(entries=[entry], reviewer=make_owner())
    [outcome] = registry.carry_forward(entries=[entry], reviewer=persona.agent.owner)
    carried = outcome.carried
    assert carried is not None
    assert (carried.carried_from, carried.reviewed_by, carried.stamp_hash) == (
        entry,
        persona.agent.owner,
        load_active_stamp(persona).stamp_hash,
    )
    assert call(persona, "workspace_write", delete("memory/old.md"))["ok"] is True
    [again] = registry.carry_forward(entries=[entry], reviewer=persona.agent.owner)
    assert again.carried is None


def test_the_owner_carries_choices_forward_in_the_admin() -> None:
    """V1-PR-3: the review is an admin action for the owner; another owner cannot do it."""
    persona = standing_persona()
    entry = teach(persona)
    persona = update_persona(persona, queues=["reviews", "triage"])
    url = reverse("admin:runtime_promptregistryentry_changelist")
    form = {"action": "carry_forward", "_selected_action": [entry.pk]}
    other = Client()
    other.force_login(make_owner())
    other.post(url, form, follow=True)
    assert not PromptRegistryEntry.objects.filter(carried_from=entry).exists()
    owner = Client()
    owner.force_login(persona.agent.owner)
    response = owner.post(url, form, follow=True)
    assert response.status_code == 200
    assert PromptRegistryEntry.objects.get(carried_from=entry).reviewed_by == persona.agent.owner


def test_a_choice_about_a_tool_the_new_stamp_lacks_is_not_carried(monkeypatch) -> None:
    """V1-PR-2, V1-PR-3: a learned choice never outlives the capability it was about."""
    monkeypatch.setitem(HANDLERS._handlers, "deploy.trigger_webhook", lambda call: {"sent": 1})
    persona = standing_persona(extra=("trigger_webhook",))
    cid = correlation()
    assert call(persona, "trigger_webhook", {"webhook": "prod"}, cid)["code"] == (
        "confirmation_required"
    )
    record = DecisionRecord.objects.get(correlation_id=cid)
    record = confirmations.decide(record=record, approve=True, user=persona.agent.owner)
    entry = registry.learn(record=record, user=persona.agent.owner)
    assert call(persona, "trigger_webhook", {"webhook": "prod"})["ok"] is True
    persona = update_persona(
        persona, verb_subset=[v for v in persona.verb_subset if v != "trigger_webhook"]
    )
    [outcome] = registry.carry_forward(entries=[entry], reviewer=persona.agent.owner)
    assert outcome.carried is None and "no longer grants" in outcome.reason
    assert call(persona, "trigger_webhook", {"webhook": "prod"})["code"] == "not_granted"


def _forge(persona, *, action: str, target: dict, shape: dict) -> PromptRegistryEntry:
    stamp = load_active_stamp(persona)
    return PromptRegistryEntry.objects.create(
        location=PromptRegistryEntry.Location.EXPERIENCE,
        persona=persona,
        stamp_hash=stamp.stamp_hash,
        handler_action=action,
        target_scope=target,
        operation_shape=shape,
        key_digest=registry.key_digest(
            stamp_hash=stamp.stamp_hash, handler_action=action, target_scope=target, shape=shape
        ),
        choice=Choice.APPROVE,
        review=PromptRegistryEntry.Review.ACCEPTED,
    )


def test_a_learned_choice_cannot_grant_a_tool_nor_lift_a_deny_boundary() -> None:
    """V1-PR-2, V1-ACC-7: even a well-formed entry for the exact key cannot broaden the profile."""
    persona = standing_persona()
    _forge(
        persona,
        action="deploy.register_webhook",
        target={"webhook": "ci"},
        shape={"arguments": []},
    )
    assert call(persona, "register_webhook", {"webhook": "ci"})["code"] == "not_granted"
    _forge(
        persona,
        action="workspace.read",
        target={"path": "memory/.env"},
        shape={"arguments": ["length", "offset"]},
    )
    denied = call(persona, "workspace_read", {"path": "memory/.env"})
    assert (denied["code"], denied["boundary"]) == ("boundary_denied", "secret-credential-values")


def test_only_the_routed_authority_teaches_and_only_decided_requests() -> None:
    """V1-PR-2: nobody else can add to a persona's experience layer."""
    persona = standing_persona()
    prepare(persona)
    cid = correlation()
    call(persona, "workspace_write", delete("memory/old.md"), cid)
    record = DecisionRecord.objects.get(correlation_id=cid)
    with pytest.raises(ValidationError):
        registry.learn(record=record, user=persona.agent.owner)
    record = confirmations.decide(record=record, approve=True, user=persona.agent.owner)
    with pytest.raises(PermissionDenied):
        registry.learn(record=record, user=make_owner())
    with pytest.raises(PermissionDenied):
        registry.learn_for_class(record=record, user=persona.agent.owner)


def test_the_class_overlay_is_shared_by_a_class_and_written_by_staff_only() -> None:
    """V1-PR-4: a genuinely class-common choice lives in the shared class overlay."""
    persona = standing_persona()
    prepare(persona, "memory/scratch.md")
    cid = correlation()
    call(persona, "workspace_write", delete("memory/scratch.md"), cid)
    record = DecisionRecord.objects.get(correlation_id=cid)
    record = confirmations.decide(record=record, approve=True, user=persona.agent.owner)
    staff = make_owner()
    staff.is_superuser = True
    staff.save()
    entry = registry.learn_for_class(record=record, user=staff)
    assert (entry.location, entry.persona, entry.persona_class) == (
        PromptRegistryEntry.Location.CLASS_OVERLAY,
        None,
        persona.persona_class,
    )
    someone_else = standing_persona()
    prepare(someone_else, "memory/scratch.md")
    assert call(someone_else, "workspace_write", delete("memory/scratch.md"))["ok"] is True
    lead = standing_persona(persona_class="project-lead")
    prepare(lead, "memory/scratch.md")
    assert call(lead, "workspace_write", delete("memory/scratch.md"))["code"] == (
        "confirmation_required"
    )


def test_machine_local_memory_is_no_registry() -> None:
    """V1-PR-4: a file claiming a learned approval changes nothing."""
    persona = standing_persona()
    fake = {"stamp_hash": load_active_stamp(persona).stamp_hash, "approve": ["workspace.write"]}
    call(
        persona,
        "workspace_write",
        {"path": "memory/prompt-registry.json", "content": json.dumps(fake)},
    )
    prepare(persona)
    assert call(persona, "workspace_write", delete("memory/old.md"))["code"] == (
        "confirmation_required"
    )


def admin_review(user, entry: PromptRegistryEntry, action: str = "accept") -> list[str]:
    """What the admin tells `user` after the review action on `entry`."""
    client = Client()
    client.force_login(user)
    url = reverse("admin:runtime_promptregistryentry_changelist")
    response = client.post(url, {"action": action, "_selected_action": [entry.pk]}, follow=True)
    assert response.status_code == 200
    return [str(message) for message in response.context["messages"]]


def test_the_review_tells_who_may_review_and_what_was_reviewed_already() -> None:
    """V1-PR-4, VX-SEC-1: an owner reviewing the shared class overlay is told only staff may;
    staff reviewing another owner's experience layer is told only its owner may; an accepted
    overlay choice (taught by staff, not imported) is answered, not failed, as reviewed."""
    persona = standing_persona()
    prepare(persona, "memory/scratch.md")
    cid = correlation()
    call(persona, "workspace_write", delete("memory/scratch.md"), cid)
    record = DecisionRecord.objects.get(correlation_id=cid)
    record = confirmations.decide(record=record, approve=True, user=persona.agent.owner)
    staff = make_owner()
    staff.is_superuser = True
    staff.save()
    overlay = registry.learn_for_class(record=record, user=staff)
    assert admin_review(persona.agent.owner, overlay) == [
        "only staff may review the shared class overlay"
    ]
    assert admin_review(staff, overlay) == [f"Not reviewed ({overlay}): it was reviewed already"]
    own = teach(persona)
    assert admin_review(staff, own, "reject") == [
        "only the persona's owner may review its learned choices"
    ]
    own.refresh_from_db()
    assert own.review == PromptRegistryEntry.Review.ACCEPTED


def test_an_operation_answered_already_is_not_learned_twice() -> None:
    """V1-PR-1: two requests held for one exact operation, both answered with "remember": the
    second is refused naming the entry, and the first choice stays the one that applies."""
    persona = standing_persona()
    prepare(persona)
    held = []
    for _ in range(2):
        cid = correlation()
        assert call(persona, "workspace_write", delete("memory/old.md"), cid)["code"] == (
            "confirmation_required"
        )
        record = DecisionRecord.objects.get(correlation_id=cid)
        held.append(confirmations.decide(record=record, approve=True, user=persona.agent.owner))
    first = registry.learn(record=held[0], user=persona.agent.owner)
    with pytest.raises(ValidationError) as refused:
        registry.learn(record=held[1], user=persona.agent.owner)
    assert refused.value.message_dict == {
        "entry": ["this exact operation already has a learned choice"]
    }
    assert list(persona.prompt_registry_entries.all()) == [first]


def test_a_choice_on_another_personas_layer_never_answers_for_this_one() -> None:
    """V1-PR-1, V1-PR-4: a learned choice belongs to the experience layer it is in: a row on a
    sibling's layer, even keyed exactly as this persona's operation (no writer makes one; a
    damaged or hand-edited database could), does not answer this persona's call."""
    persona = standing_persona()
    sibling = standing_persona(persona.agent.owner, agent=persona.agent)
    stamp = load_active_stamp(persona)
    target = {"path": "memory/old.md"}
    prepare(persona)
    cid = correlation()
    assert call(persona, "workspace_write", delete("memory/old.md"), cid)["code"] == (
        "confirmation_required"
    )
    record = DecisionRecord.objects.get(correlation_id=cid)
    forged = PromptRegistryEntry.objects.create(
        location=PromptRegistryEntry.Location.EXPERIENCE,
        persona=sibling,
        stamp_hash=stamp.stamp_hash,
        handler_action="workspace.write",
        target_scope=target,
        operation_shape=record.operation["shape"],
        key_digest=registry.key_digest(
            stamp_hash=stamp.stamp_hash,
            handler_action="workspace.write",
            target_scope=target,
            shape=record.operation["shape"],
        ),
        choice=Choice.APPROVE,
        review=PromptRegistryEntry.Review.ACCEPTED,
    )
    assert call(persona, "workspace_write", delete("memory/old.md"))["code"] == (
        "confirmation_required"
    )
    # The same row on the persona's own layer is its exact key: it answers.
    PromptRegistryEntry.objects.filter(pk=forged.pk).update(persona=persona)
    assert call(persona, "workspace_write", delete("memory/old.md"))["ok"] is True


def test_a_class_overlay_choice_answers_only_for_its_own_class() -> None:
    """V1-PR-4, V1-PR-2: a shared overlay row belongs to the class it names: one of another
    class, even keyed exactly as this persona's class profile would be (no writer makes one),
    does not answer this persona's call."""
    persona = standing_persona()
    stamp = load_active_stamp(persona)
    prepare(persona)
    cid = correlation()
    assert call(persona, "workspace_write", delete("memory/old.md"), cid)["code"] == (
        "confirmation_required"
    )
    shape = DecisionRecord.objects.get(correlation_id=cid).operation["shape"]
    target = {"path": "memory/old.md"}
    forged = PromptRegistryEntry.objects.create(
        location=PromptRegistryEntry.Location.CLASS_OVERLAY,
        persona_class="project-lead",
        stamp_hash=stamp.profile_hash,
        handler_action="workspace.write",
        target_scope=target,
        operation_shape=shape,
        key_digest=registry.key_digest(
            stamp_hash=stamp.profile_hash,
            handler_action="workspace.write",
            target_scope=target,
            shape=shape,
        ),
        choice=Choice.APPROVE,
        review=PromptRegistryEntry.Review.ACCEPTED,
    )
    assert stamp.persona_class != "project-lead"
    assert call(persona, "workspace_write", delete("memory/old.md"))["code"] == (
        "confirmation_required"
    )
    # The same row under the persona's own class is its exact key: it answers.
    PromptRegistryEntry.objects.filter(pk=forged.pk).update(persona_class=stamp.persona_class)
    assert call(persona, "workspace_write", delete("memory/old.md"))["ok"] is True


def test_the_key_of_a_stored_choice_is_the_digest_of_its_four_named_parts() -> None:
    """V1-PR-1: the stored key is the sha256 of the canonical JSON (RFC 8785) of exactly the
    stamp hash, handler action, target scope and operation shape under those names; a row
    stored today is found by the same key after an upgrade, and a reader can recompute it."""
    persona = standing_persona()
    entry = teach(persona)
    parts = {
        "stamp_hash": load_active_stamp(persona).stamp_hash,
        "handler_action": "workspace.write",
        "target_scope": {"path": "memory/old.md"},
        "operation_shape": entry.operation_shape,
    }
    assert entry.key_digest == hashlib.sha256(rfc8785.dumps(parts)).hexdigest()
