"""Decision tools: list and raise for every class; resolve under the class matrix and footnotes.

Who may resolve is read from the stamp: the `resolve_decision` tool exists only for the classes
the matrix gives it, and its scope carries the footnote condition of the class's cell.

- no condition (project lead): the lead resolves in its own scope on its own authority;
- `relay-of-bound-human-decision` (secretary, footnote 1): only by relaying a HumanInstruction
  that the persona's bound human authority recorded for exactly that decision;
- `authorized-by-lane-approver` (team coordinator, footnote 2): only with a LaneApproval given by
  the approver currently bound to one of the coordinator's lanes covering the decision.

Neither relay class self-originates a resolution: without the authorization there is nothing to
resolve with, and the resolution text is the authorizer's, never the persona's own. A coder
deputy has no resolve tool at all, so the handler refuses it before anything here runs.

The owner-side functions at the end (recording an instruction, binding a lane, approving in a
lane) are how the humans give those authorizations; the admin calls them.
"""

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from personas.addresses import address_problem
from personas.models import Persona, PersonaClass
from runtime.confirmations import human_authority
from runtime.models import Decision, HumanInstruction, LaneApproval, LaneBinding
from runtime.tools.params import TEXT_MAX, TITLE_MAX, Choice, Id, Key, Strings, Text
from runtime.tools.toolkit import (
    PAGE,
    Arguments,
    Invalid,
    Missing,
    NotAuthorized,
    Refused,
    StateConflict,
    ToolCall,
    iso,
    peer_reference,
    scope_of,
    takes,
)
from runtime.tools.work import visible_task
from stamps.profiles import Condition

OPTIONS_MAX = 20


def decision_json(decision: Decision) -> dict[str, Any]:
    return {
        "id": str(decision.uuid),
        "title": decision.title,
        "question": decision.question,
        "options": decision.options,
        "workspace": decision.workspace,
        "project": decision.project or None,
        "task": str(decision.task.uuid) if decision.task else None,
        "raised_by": peer_reference(decision.raised_by),
        "state": decision.state,
        "resolution": decision.resolution,
        "resolved_by": peer_reference(decision.resolved_by) if decision.resolved_by else None,
        "basis": decision.basis or None,
        "relayed_instruction": (
            str(decision.relayed_instruction.uuid) if decision.relayed_instruction else None
        ),
        "lane_approval": str(decision.lane_approval.uuid) if decision.lane_approval else None,
        "raised_at": iso(decision.created_at),
        "resolved_at": iso(decision.resolved_at),
    }


def _decisions() -> Any:
    return Decision.objects.select_related(
        "raised_by__address",
        "resolved_by__address",
        "task",
        "relayed_instruction",
        "lane_approval",
    )


@takes(
    Choice(
        "state", "Which decisions of your scope.", options=("open", "resolved", "all"),
        default="open",
    ),
    *PAGE,
)  # fmt: skip
def list_decisions(call: ToolCall, args: Arguments) -> dict[str, Any]:
    state = args["state"]
    page = args.page()
    decisions = _decisions().filter(scope_of(call).records())
    if state != "all":
        decisions = decisions.filter(state=state)
    rows, next_cursor = page.of(decisions.order_by("created_at", "id"))
    return {"decisions": [decision_json(d) for d in rows], "next_cursor": next_cursor}


@takes(
    Text("title", "What is to be decided, in a line.", required=True, max_length=TITLE_MAX),
    Text(
        "question",
        "The question in full, with what the decider needs.",
        max_length=TEXT_MAX,
        key=Key.DIGEST,
    ),
    Strings(
        "options",
        "The answers to choose from; a resolution must then be one of them.",
        max_items=OPTIONS_MAX,
        max_length=TITLE_MAX,
        unique=True,
    ),
    Id("task", "The id of a task of yours this decision is about.", key=Key.TARGET),
)
def raise_decision(call: ToolCall, args: Arguments) -> dict[str, Any]:
    scope = scope_of(call)
    task_id = args["task"]
    task = visible_task(call, task_id) if task_id else None
    decision = Decision.objects.create(
        owner_id=scope.owner_id,
        raised_by_id=call.persona.pk,
        workspace=scope.workspace,
        project=scope.project or "",
        title=args["title"],
        question=args["question"],
        options=args["options"],
        task=task,
    )
    return {"decision": decision_json(_decisions().get(pk=decision.pk))}


def _decision_in_scope(call: ToolCall, decision_id: str, *, lock: bool = False) -> Decision:
    scope = scope_of(call)
    decisions = _decisions().filter(owner_id=scope.owner_id, uuid=decision_id)
    if lock:
        decisions = decisions.select_for_update(of=("self",))
    decision = decisions.first()
    if decision is None:
        raise Missing(f"decision {decision_id} is not one of this installation's decisions")
    if not scope.covers(workspace=decision.workspace, project=decision.project):
        raise Refused(
            f"decision {decision_id} belongs to {decision.workspace}/{decision.project or '-'}, "
            "outside this persona's scope"
        )
    return decision


def _relayed(resolution: str, authorized: str, what: str) -> str:
    """The authorizer's resolution, which the relaying persona may repeat but never change."""
    if resolution and resolution != authorized:
        raise NotAuthorized(
            f"the resolution must be the {what}'s own; a relay cannot originate or alter it"
        )
    return authorized


@takes(
    Id("decision", "The id of an open decision of your scope.", required=True, key=Key.TARGET),
    Text(
        "resolution",
        "The resolution. Relayed resolutions are the authorizer's own: leave it out or repeat it.",
        max_length=TEXT_MAX,
        key=Key.DIGEST,
    ),
    Id("instruction", "Secretary: the recorded instruction of your bound human you relay."),
    Id("approval", "Team coordinator: the lane approval of your bound lane approver."),
)
def resolve_decision(call: ToolCall, args: Arguments) -> dict[str, Any]:
    decision_id = args["decision"]
    resolution = args["resolution"]
    instruction_id = args["instruction"]
    approval_id = args["approval"]
    condition = call.tool.scope.get("condition")
    with transaction.atomic():
        decision = _decision_in_scope(call, decision_id, lock=True)
        if decision.state != Decision.State.OPEN:
            raise StateConflict(f"decision {decision_id} is already {decision.state}")
        updates: dict[str, Any]
        if condition == Condition.HUMAN_RELAY:
            updates = _human_relay(call, decision, resolution, instruction_id, approval_id)
        elif condition == Condition.LANE_APPROVER:
            updates = _lane_approval(call, decision, resolution, instruction_id, approval_id)
        elif condition is None:
            if instruction_id or approval_id:
                raise Invalid("a resolution on one's own authority takes no instruction/approval")
            if not resolution.strip():
                raise Invalid("resolve_decision needs a resolution")
            updates = {"resolution": resolution, "basis": Decision.Basis.OWN_AUTHORITY}
        else:
            raise NotAuthorized(f"the stamp's condition {condition!r} allows no resolution here")
        if decision.options and updates["resolution"] not in decision.options:
            raise Invalid(f"the resolution must be one of: {', '.join(decision.options)}")
        for field, value in updates.items():
            setattr(decision, field, value)
        decision.state = Decision.State.RESOLVED
        decision.resolved_by_id = call.persona.pk
        decision.resolved_at = timezone.now()
        decision.save()
    return {"decision": decision_json(_decisions().get(pk=decision.pk))}


def _human_relay(
    call: ToolCall,
    decision: Decision,
    resolution: str,
    instruction_id: str | None,
    approval_id: str | None,
) -> dict[str, Any]:
    if approval_id or instruction_id is None:
        raise NotAuthorized(
            "a secretary resolves only as the relay of its bound human authority's explicit "
            "decision: name the recorded instruction"
        )
    instruction = HumanInstruction.objects.filter(uuid=instruction_id, decision=decision).first()
    if instruction is None:
        raise Missing(f"instruction {instruction_id} is not an instruction on this decision")
    if instruction.given_by_id != human_authority(call.stamp, call.persona).pk:
        raise NotAuthorized(
            f"instruction {instruction_id} was not given by this persona's bound human authority"
        )
    return {
        "resolution": _relayed(resolution, instruction.resolution, "human authority"),
        "basis": Decision.Basis.HUMAN_RELAY,
        "relayed_instruction": instruction,
    }


def _lane_approval(
    call: ToolCall,
    decision: Decision,
    resolution: str,
    instruction_id: str | None,
    approval_id: str | None,
) -> dict[str, Any]:
    if instruction_id or approval_id is None:
        raise NotAuthorized(
            "a team coordinator resolves only when its bound lane approver authorized the "
            "decision: name the lane approval"
        )
    approval = (
        LaneApproval.objects.select_related("lane")
        .filter(uuid=approval_id, decision=decision)
        .first()
    )
    if approval is None:
        raise Missing(f"approval {approval_id} is not an approval of this decision")
    lane = approval.lane
    if lane.coordinator_id != call.persona.pk or not lane.active:
        raise NotAuthorized(f"approval {approval_id} was not given in a lane bound to this persona")
    if approval.approved_by_id != lane.approver_id:
        raise NotAuthorized(f"approval {approval_id} was not given by the lane's bound approver")
    if not lane.covers(workspace=decision.workspace, project=decision.project):
        raise NotAuthorized(f"the lane of approval {approval_id} does not cover this decision")
    return {
        "resolution": _relayed(resolution, approval.resolution, "lane approver"),
        "basis": Decision.Basis.LANE_APPROVAL,
        "lane_approval": approval,
    }


IMPLEMENTATIONS = {
    "decisions.list": list_decisions,
    "decisions.raise": raise_decision,
    "decisions.resolve": resolve_decision,
}


# The humans' side: the authorizations a relay needs ----------------------------------------


def _open_decision(decision: Decision) -> Decision:
    decision = Decision.objects.select_for_update().get(pk=decision.pk)
    if decision.state != Decision.State.OPEN:
        raise ValidationError({"decision": [f"already {decision.state}"]})
    return decision


def _checked_resolution(decision: Decision, resolution: str) -> str:
    if not isinstance(resolution, str) or not resolution.strip():
        raise ValidationError({"resolution": ["must not be blank"]})
    if decision.options and resolution not in decision.options:
        raise ValidationError({"resolution": [f"must be one of: {', '.join(decision.options)}"]})
    return resolution


@transaction.atomic
def record_human_decision(
    *, user: AbstractBaseUser, decision: Decision, resolution: str
) -> HumanInstruction:
    """The owner's explicit decision, which the owner's secretary may then relay durably."""
    if not (user.is_authenticated and user.is_active and decision.owner_id == user.pk):
        raise PermissionDenied("only the decision's owner, the bound human authority, decides it")
    decision = _open_decision(decision)
    return HumanInstruction.objects.create(
        decision=decision, given_by=user, resolution=_checked_resolution(decision, resolution)
    )


@transaction.atomic
def bind_lane(
    *,
    actor: AbstractBaseUser,
    coordinator: Persona,
    approver: AbstractBaseUser,
    project: str | None = None,
) -> LaneBinding:
    """Bind a lane of the coordinator's workspace (or one project of it) to its approver.

    A new binding of the same lane replaces the old one, whose approvals stop counting.
    """
    coordinator = Persona.objects.select_related("agent", "address").get(pk=coordinator.pk)
    if not (actor.is_authenticated and actor.is_active and coordinator.agent.owner_id == actor.pk):
        raise PermissionDenied("only the coordinator's owner binds its lanes")
    if coordinator.persona_class != PersonaClass.TEAM_COORDINATOR:
        raise ValidationError({"coordinator": ["lanes belong to team-coordinator personas"]})
    if not (approver.is_active and approver.pk):
        raise ValidationError({"approver": ["must be an active user"]})
    workspace = coordinator.address.workspace
    project = project or ""
    if project and address_problem(f"{workspace}/{project}/lane"):
        raise ValidationError({"project": ["must be a project slug of the workspace"]})
    LaneBinding.objects.filter(
        coordinator=coordinator, workspace=workspace, project=project, active=True
    ).update(active=False)
    return LaneBinding.objects.create(
        coordinator=coordinator,
        workspace=workspace,
        project=project,
        approver=approver,
        bound_by=actor,
    )


@transaction.atomic
def approve_in_lane(
    *, user: AbstractBaseUser, lane: LaneBinding, decision: Decision, resolution: str
) -> LaneApproval:
    """The bound lane approver authorizes one decision's resolution for the lane's coordinator."""
    lane = LaneBinding.objects.select_related("coordinator__agent").get(pk=lane.pk)
    if not (user.is_authenticated and user.is_active and lane.approver_id == user.pk):
        raise PermissionDenied("only the lane's bound approver authorizes in it")
    if not lane.active:
        raise ValidationError({"lane": ["this lane binding was replaced"]})
    decision = _open_decision(decision)
    if decision.owner_id != lane.coordinator.agent.owner_id or not lane.covers(
        workspace=decision.workspace, project=decision.project
    ):
        raise ValidationError({"decision": ["the lane does not cover this decision"]})
    return LaneApproval.objects.create(
        lane=lane,
        decision=decision,
        approved_by=user,
        resolution=_checked_resolution(decision, resolution),
    )
