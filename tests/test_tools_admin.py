"""The owner's admin over the persona tools' records: read-only, own rows only; the human gives
the authorizations a relay needs where they are the routed authority."""

from collections.abc import Iterator

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from runtime.models import (
    ConversationArchive,
    CoordinationMessage,
    Decision,
    HumanInstruction,
    LaneApproval,
    LaneBinding,
    Run,
    Task,
)
from runtime.tools.decisions import bind_lane
from runtime.tools.graph import archive_conversation
from runtime.tools.work import create_todo
from tests.factories import make_owner
from tests.runtime_support import call
from tests.tools_support import make_team, ok

pytestmark = pytest.mark.django_db

READ_ONLY = (Task, Decision, Run, CoordinationMessage, ConversationArchive)


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> Iterator[None]:
    cache.clear()
    yield


@pytest.fixture
def world():
    team = make_team()
    ok(call(team.deputy, "send_broker_message", {"recipient": "work/core/lead", "body": "hi"}))
    todo = create_todo(owner=team.owner, queue="reviews", title="review #1")
    ok(call(team.deputy, "claim", {"task": str(todo.uuid)}))
    ok(call(team.deputy, "raise_decision", {"title": "Merge #1?", "options": ["merge", "hold"]}))
    ok(call(team.lead, "create_run", {"title": "nightly", "kind": "build"}))
    archive_conversation(persona=team.lead, title="kickoff", started_at="2026-11-29T09:00:00Z")
    return team


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def urls(model, obj=None) -> tuple[str, str | None]:
    name = f"admin:runtime_{model._meta.model_name}"
    return reverse(f"{name}_changelist"), (
        reverse(f"{name}_change", args=[obj.pk]) if obj is not None else None
    )


@pytest.mark.parametrize("model", READ_ONLY, ids=lambda m: m.__name__)
def test_the_owner_reads_their_personas_records_and_changes_nothing(world, model) -> None:
    """The owner sees each persona's inbox, tasks, decisions, runs and archives, read-only."""
    obj = model.objects.first()
    changelist, change = urls(model, obj)
    client = signed_in(world.owner)
    listing = client.get(changelist)
    assert listing.status_code == 200
    assert listing.context["cl"].result_count == model.objects.count() >= 1
    page = client.get(change)
    assert page.status_code == 200
    assert page.context["has_change_permission"] is False
    assert client.post(change, {}).status_code == 403
    assert client.get(reverse(f"admin:runtime_{model._meta.model_name}_add")).status_code == 403


@pytest.mark.parametrize("model", READ_ONLY, ids=lambda m: m.__name__)
def test_another_owner_and_anonymous_see_none_of_it(world, model) -> None:
    obj = model.objects.first()
    changelist, change = urls(model, obj)
    other = signed_in(make_owner())
    assert other.get(changelist).context["cl"].result_count == 0
    assert other.get(change).status_code in (302, 404)
    anonymous = Client()
    assert anonymous.get(changelist).status_code == 302
    assert "/login/" in anonymous.get(changelist)["Location"]


def test_the_owner_records_the_decision_a_secretary_then_relays(world) -> None:
    """V1-MAT-2: the owner, the bound human authority, records an explicit decision in the
    admin; the secretary's resolution relays it and refers to it."""
    decision = Decision.objects.get()
    add = reverse("admin:runtime_humaninstruction_add")
    stranger = signed_in(make_owner())
    refused = stranger.post(add, {"decision": decision.pk, "resolution": "merge"})
    assert refused.status_code == 200 and "decision" in refused.context["adminform"].form.errors
    owner = signed_in(world.owner)
    invalid = owner.post(add, {"decision": decision.pk, "resolution": "ship"})
    assert "resolution" in invalid.context["adminform"].form.errors
    assert owner.post(add, {"decision": decision.pk, "resolution": "hold"}).status_code == 302
    instruction = HumanInstruction.objects.get()
    assert instruction.given_by == world.owner
    relayed = ok(
        call(
            world.secretary,
            "resolve_decision",
            {"decision": str(decision.uuid), "instruction": str(instruction.uuid)},
        )
    )
    assert relayed["decision"]["relayed_instruction"] == str(instruction.uuid)


def test_the_owner_binds_a_lane_and_only_its_approver_approves_in_it(world) -> None:
    """V1-MAT-3: the lane binding and the lane approval are given by the humans they name."""
    approver = make_owner("approver")
    owner = signed_in(world.owner)
    bound = owner.post(
        reverse("admin:runtime_lanebinding_add"),
        {"coordinator": world.coordinator.pk, "project": "", "approver_username": "approver"},
    )
    assert bound.status_code == 302
    lane = LaneBinding.objects.get()
    assert (lane.workspace, lane.approver, lane.bound_by) == ("work", approver, world.owner)
    not_theirs = signed_in(make_owner()).post(
        reverse("admin:runtime_lanebinding_add"),
        {"coordinator": world.coordinator.pk, "project": "", "approver_username": "approver"},
    )
    assert "coordinator" in not_theirs.context["adminform"].form.errors
    decision = Decision.objects.get()
    add = reverse("admin:runtime_laneapproval_add")
    form = {"lane": lane.pk, "decision": decision.pk, "resolution": "merge"}
    assert owner.post(add, form).status_code == 200
    assert not LaneApproval.objects.exists()
    assert signed_in(approver).post(add, form).status_code == 302
    approval = LaneApproval.objects.get()
    result = ok(
        call(
            world.coordinator,
            "resolve_decision",
            {"decision": str(decision.uuid), "approval": str(approval.uuid)},
        )
    )
    assert result["decision"]["basis"] == "lane-approval"
    assert signed_in(approver).get(urls(LaneBinding)[0]).context["cl"].result_count == 1
    assert signed_in(approver).get(urls(Decision)[0]).context["cl"].result_count == 0


def test_authorizations_are_never_changed_or_deleted(world) -> None:
    lane = bind_lane(actor=world.owner, coordinator=world.coordinator, approver=world.owner)
    owner = signed_in(world.owner)
    change = reverse("admin:runtime_lanebinding_change", args=[lane.pk])
    assert owner.get(change).context["has_change_permission"] is False
    assert owner.post(change, {"project": "web"}).status_code == 403
    delete = reverse("admin:runtime_lanebinding_delete", args=[lane.pk])
    assert owner.post(delete, {"post": "yes"}).status_code == 403
    assert LaneBinding.objects.get().project == ""
