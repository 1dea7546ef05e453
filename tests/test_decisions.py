"""Decision tools: list and raise for all; resolve under the matrix and its footnotes."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from personas.models import PersonaClass
from runtime.models import Decision, HumanInstruction, LaneApproval
from runtime.tools.decisions import approve_in_lane, bind_lane, record_human_decision
from stamps.profiles import CLASSES
from tests.factories import address, make_owner
from tests.runtime_support import call, standing_persona
from tests.tools_support import Team, make_team, ok, refused

pytestmark = pytest.mark.django_db


def raised(persona, title: str = "Adopt ruff format?", **extra) -> Decision:
    result = ok(call(persona, "raise_decision", {"title": title, **extra}))
    return Decision.objects.get(uuid=result["decision"]["id"])


def resolve(persona, decision: Decision, **arguments) -> dict:
    return call(persona, "resolve_decision", {"decision": str(decision.uuid), **arguments})


def still_open(decision: Decision) -> bool:
    decision.refresh_from_db()
    return decision.state == Decision.State.OPEN and decision.resolved_by is None


def web_lead(team: Team):
    return standing_persona(
        team.owner,
        agent=team.agent,
        persona_class=PersonaClass.PROJECT_LEAD,
        address=address("work/web/lead"),
    )


@pytest.mark.parametrize("persona_class", CLASSES)
def test_every_class_raises_and_lists_decisions_in_its_scope(persona_class: str) -> None:
    """V1-STD-4, V1-MAT-1: decisions list/raise for every class, each in its own scope."""
    team = make_team()
    persona = team.of(persona_class)
    mine = raised(persona, options=["yes", "no"])
    assert (mine.workspace, mine.project) == {
        PersonaClass.SECRETARY: ("root", ""),
        PersonaClass.TEAM_COORDINATOR: ("work", ""),
        PersonaClass.PROJECT_LEAD: ("work", "core"),
        PersonaClass.CODER_DEPUTY: ("work", "core"),
    }[PersonaClass(persona_class)]
    raised(web_lead(team), "Web only")
    raised(make_team().lead, "Another owner's")
    listed = {d["title"] for d in ok(call(persona, "list_decisions"))["decisions"]}
    sees_web = persona_class in (PersonaClass.SECRETARY, PersonaClass.TEAM_COORDINATOR)
    assert ("Web only" in listed) is sees_web
    assert "Adopt ruff format?" in listed
    assert "Another owner's" not in listed


def test_a_lead_resolves_in_its_project_on_its_own_authority() -> None:
    """V1-MAT-1: the project lead's resolve cell is a plain W."""
    team = make_team()
    decision = raised(team.deputy, options=["merge", "hold"])
    refused(resolve(team.lead, decision, resolution="ship it"), "invalid_arguments")
    result = ok(resolve(team.lead, decision, resolution="merge"))["decision"]
    assert (result["state"], result["basis"], result["resolved_by"]["peer_id"]) == (
        "resolved",
        "own-authority",
        str(team.lead.uuid),
    )
    assert resolve(team.lead, decision, resolution="hold")["code"] == "conflict"
    other_project = raised(web_lead(team), "Web only")
    refused(resolve(team.lead, other_project, resolution="x"), "out_of_scope")
    assert still_open(other_project)


def test_a_coder_deputy_cannot_resolve() -> None:
    """V1-MAT-1: the deputy's resolve cell is '-': the handler refuses the tool outright."""
    team = make_team()
    decision = raised(team.deputy)
    refused(resolve(team.deputy, decision, resolution="mine"), "not_granted")
    assert still_open(decision)


def test_a_secretary_resolves_only_by_relaying_the_bound_humans_decision() -> None:
    """V1-MAT-2: the relay needs the bound human authority's recorded, explicit decision, and the
    resolution stores the reference to it."""
    team = make_team()
    decision = raised(team.deputy, options=["merge", "hold"])
    result = refused(resolve(team.secretary, decision, resolution="merge"), "not_authorized")
    assert "relay" in result["reason"]
    assert still_open(decision)
    instruction = record_human_decision(user=team.owner, decision=decision, resolution="hold")
    relayed = ok(resolve(team.secretary, decision, instruction=str(instruction.uuid)))
    assert relayed["decision"]["resolution"] == "hold"
    assert relayed["decision"]["basis"] == "human-relay"
    assert relayed["decision"]["relayed_instruction"] == str(instruction.uuid)
    decision.refresh_from_db()
    assert (decision.relayed_instruction, decision.resolved_by) == (instruction, team.secretary)


def test_a_secretary_cannot_alter_the_humans_decision() -> None:
    """V1-MAT-2, V1-MAT-3: a relay never self-originates a resolution."""
    team = make_team()
    decision = raised(team.deputy, options=["merge", "hold"])
    instruction = record_human_decision(user=team.owner, decision=decision, resolution="hold")
    result = resolve(
        team.secretary, decision, instruction=str(instruction.uuid), resolution="merge"
    )
    refused(result, "not_authorized")
    assert still_open(decision)
    same = resolve(team.secretary, decision, instruction=str(instruction.uuid), resolution="hold")
    assert ok(same)["decision"]["resolution"] == "hold"


def test_only_the_bound_human_authority_gives_a_relayable_decision() -> None:
    """V1-MAT-2: another user's instruction is not the bound authority's, however it got there."""
    team = make_team()
    decision = raised(team.deputy)
    intruder = make_owner()
    with pytest.raises(PermissionDenied):
        record_human_decision(user=intruder, decision=decision, resolution="merge")
    planted = HumanInstruction.objects.create(
        decision=decision, given_by=intruder, resolution="merge"
    )
    refused(resolve(team.secretary, decision, instruction=str(planted.uuid)), "not_authorized")
    other = raised(team.lead, "Another decision")
    elsewhere = record_human_decision(user=team.owner, decision=other, resolution="no")
    refused(resolve(team.secretary, decision, instruction=str(elsewhere.uuid)), "not_found")
    assert still_open(decision)


def test_a_coordinator_resolves_only_with_its_bound_lane_approvers_authorization() -> None:
    """V1-MAT-3: the bound lane approver authorizes; the resolution stores the approval."""
    team = make_team()
    approver = make_owner("lane-approver")
    decision = raised(team.deputy, options=["merge", "hold"])
    refused(resolve(team.coordinator, decision, resolution="merge"), "not_authorized")
    lane = bind_lane(actor=team.owner, coordinator=team.coordinator, approver=approver)
    with pytest.raises(PermissionDenied):
        approve_in_lane(user=team.owner, lane=lane, decision=decision, resolution="merge")
    approval = approve_in_lane(user=approver, lane=lane, decision=decision, resolution="merge")
    refused(
        resolve(team.coordinator, decision, approval=str(approval.uuid), resolution="hold"),
        "not_authorized",
    )
    assert still_open(decision)
    result = ok(resolve(team.coordinator, decision, approval=str(approval.uuid)))["decision"]
    assert (result["resolution"], result["basis"], result["lane_approval"]) == (
        "merge",
        "lane-approval",
        str(approval.uuid),
    )


def test_an_approval_counts_only_from_the_current_approver_of_a_covering_lane() -> None:
    """V1-MAT-3: a replaced binding, a lane that does not cover the decision and another
    coordinator's lane all authorize nothing."""
    team = make_team()
    first, second = make_owner(), make_owner()
    decision = raised(team.deputy)
    lane = bind_lane(actor=team.owner, coordinator=team.coordinator, approver=first)
    stale = approve_in_lane(user=first, lane=lane, decision=decision, resolution="go")
    bind_lane(actor=team.owner, coordinator=team.coordinator, approver=second)
    refused(resolve(team.coordinator, decision, approval=str(stale.uuid)), "not_authorized")
    web = bind_lane(actor=team.owner, coordinator=team.coordinator, approver=first, project="web")
    with pytest.raises(ValidationError):
        approve_in_lane(user=first, lane=web, decision=decision, resolution="go")
    planted = LaneApproval.objects.create(
        lane=web, decision=decision, approved_by=first, resolution="go"
    )
    refused(resolve(team.coordinator, decision, approval=str(planted.uuid)), "not_authorized")
    other = standing_persona(
        team.owner,
        agent=team.agent,
        persona_class=PersonaClass.TEAM_COORDINATOR,
        address=address("work/second-coordinator"),
    )
    theirs = bind_lane(actor=team.owner, coordinator=other, approver=first)
    borrowed = approve_in_lane(user=first, lane=theirs, decision=decision, resolution="go")
    refused(resolve(team.coordinator, decision, approval=str(borrowed.uuid)), "not_authorized")
    assert still_open(decision)
    assert ok(resolve(other, decision, approval=str(borrowed.uuid)))["decision"]["basis"] == (
        "lane-approval"
    )


def test_neither_relay_class_takes_the_others_authorization() -> None:
    """V1-MAT-2, V1-MAT-3: a coordinator cannot relay a human instruction, nor a secretary a
    lane approval."""
    team = make_team()
    decision = raised(team.deputy)
    instruction = record_human_decision(user=team.owner, decision=decision, resolution="go")
    lane = bind_lane(actor=team.owner, coordinator=team.coordinator, approver=team.owner)
    approval = approve_in_lane(user=team.owner, lane=lane, decision=decision, resolution="go")
    refused(
        resolve(team.coordinator, decision, instruction=str(instruction.uuid)), "not_authorized"
    )
    refused(resolve(team.secretary, decision, approval=str(approval.uuid)), "not_authorized")
    assert still_open(decision)


def test_only_the_owner_binds_lanes_and_only_for_coordinators() -> None:
    team = make_team()
    with pytest.raises(PermissionDenied):
        bind_lane(actor=make_owner(), coordinator=team.coordinator, approver=team.owner)
    with pytest.raises(ValidationError):
        bind_lane(actor=team.owner, coordinator=team.lead, approver=team.owner)
    for project in ("Core", "core/web", "root"):
        with pytest.raises(ValidationError):
            bind_lane(
                actor=team.owner, coordinator=team.coordinator, approver=team.owner, project=project
            )


def test_raise_validates_its_arguments_and_a_linked_task_must_be_visible() -> None:
    team = make_team()
    for arguments in (
        {},
        {"title": " "},
        {"title": "x", "options": ["a", "a"]},
        {"title": "x", "options": "a,b"},
        {"title": "x", "task": "nope"},
    ):
        refused(call(team.deputy, "raise_decision", arguments), "invalid_arguments")
    assert not Decision.objects.exists()
