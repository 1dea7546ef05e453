"""Run and artifact tools.

Every class lists and reads the runs of its scope (the installation for the reserved root, a
workspace, or one project). Writing is for the classes whose matrix cell gives it: a project lead
in its project, and a coder deputy only on its assigned task. That condition is read from the
stamp (`assigned-task` in the tool's scope): a deputy names the task, which must be assigned to
it, when it creates a run, and may touch only runs of tasks assigned to it.

Deployment and publication go through the confirm boundary before anything here runs: the policy
classifies a `create_run` of kind deploy or publish, and a `record_artifact` with `publish_to`,
as external publication (runtime.rules, rule "publication").
"""

from typing import Any

from django.db import transaction
from django.db.models import Max, QuerySet
from django.utils import timezone

from runtime.models import Artifact, Run, RunEvent, Task
from runtime.tools.params import TEXT_MAX, TITLE_MAX, Choice, Id, Integer, Key, Object, Text, url
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

EVENTS_SHOWN = 200
# Where a run may go from each state; the three at the end are terminal.
TRANSITIONS: dict[str, tuple[str, ...]] = {
    Run.State.CREATED: (Run.State.RUNNING, Run.State.CANCELLED),
    Run.State.RUNNING: (Run.State.SUCCEEDED, Run.State.FAILED, Run.State.CANCELLED),
    Run.State.SUCCEEDED: (),
    Run.State.FAILED: (),
    Run.State.CANCELLED: (),
}
TERMINAL = frozenset(state for state, onward in TRANSITIONS.items() if not onward)
# An event kind the runs keep for their own state changes; callers use advance_run for those.
STATE_EVENT = "state"


def _runs() -> QuerySet[Run]:
    return Run.objects.select_related("created_by__address", "task")


def run_json(run: Run) -> dict[str, Any]:
    return {
        "id": str(run.uuid),
        "title": run.title,
        "kind": run.kind,
        "state": run.state,
        "workspace": run.workspace,
        "project": run.project or None,
        "task": str(run.task.uuid) if run.task else None,
        "created_by": peer_reference(run.created_by),
        "created_at": iso(run.created_at),
        "updated_at": iso(run.updated_at),
        "finished_at": iso(run.finished_at),
    }


def artifact_json(artifact: Artifact) -> dict[str, Any]:
    return {
        "id": str(artifact.uuid),
        "name": artifact.name,
        "kind": artifact.kind,
        "location": artifact.location,
        "sha256": artifact.sha256 or None,
        "size": artifact.size,
        "published_to": artifact.published_to or None,
        "recorded_at": iso(artifact.created_at),
    }


def _run_in_scope(call: ToolCall, run_id: str, *, lock: bool = False) -> Run:
    scope = scope_of(call)
    runs = _runs().filter(owner_id=scope.owner_id, uuid=run_id)
    if lock:
        runs = runs.select_for_update(of=("self",))
    run = runs.first()
    if run is None:
        raise Missing(f"run {run_id} is not one of this installation's runs")
    if not scope.covers(workspace=run.workspace, project=run.project):
        raise Refused(f"run {run_id} is outside this persona's scope")
    return run


def _writable_run(call: ToolCall, run_id: str) -> Run:
    """A run this persona may write: any in scope for a lead; a deputy's own assigned work."""
    run = _run_in_scope(call, run_id, lock=True)
    if call.tool.scope.get("condition") == Condition.ASSIGNED_TASK and (
        run.task is None or run.task.assignee_id != call.persona.pk
    ):
        raise NotAuthorized(f"run {run_id} is not for a task assigned to this persona")
    return run


def _event(run: Run, call: ToolCall, kind: str, message: str, data: dict[str, Any]) -> RunEvent:
    last = run.events.aggregate(last=Max("seq"))["last"] or 0
    return RunEvent.objects.create(
        run=run, seq=last + 1, kind=kind, message=message, data=data, by_id=call.persona.pk
    )


_RUN = "The id of a run of your scope."
_WRITABLE_RUN = "The id of a run of your scope (a coder deputy: of a task assigned to it)."


@takes(
    Choice(
        "state",
        "all, active (not finished), or one state.",
        options=("all", "active", *Run.State.values),
        default="all",
    ),
    Choice("kind", "all, or one kind of run.", options=("all", *Run.Kind.values), default="all"),
    Id("task", "Only the runs for this task.", key=Key.TARGET),
    *PAGE,
)
def list_runs(call: ToolCall, args: Arguments) -> dict[str, Any]:
    state, kind, task_id = args["state"], args["kind"], args["task"]
    page = args.page()
    runs = _runs().filter(scope_of(call).records())
    if state == "active":
        runs = runs.exclude(state__in=TERMINAL)
    elif state != "all":
        runs = runs.filter(state=state)
    if kind != "all":
        runs = runs.filter(kind=kind)
    if task_id:
        runs = runs.filter(task__uuid=task_id)
    rows, next_cursor = page.of(runs.order_by("created_at", "id"))
    return {"runs": [run_json(r) for r in rows], "next_cursor": next_cursor}


@takes(Id("run", _RUN, required=True, key=Key.TARGET))
def get_run(call: ToolCall, args: Arguments) -> dict[str, Any]:
    run = _run_in_scope(call, args["run"])
    events = list(run.events.select_related("by").order_by("-seq")[:EVENTS_SHOWN])
    return {
        "run": run_json(run),
        "events": [
            {
                "seq": e.seq,
                "kind": e.kind,
                "message": e.message,
                "data": e.data,
                "by": str(e.by.uuid),
                "at": iso(e.at),
            }
            for e in reversed(events)
        ],
        "artifacts": [artifact_json(a) for a in run.artifacts.order_by("created_at", "id")],
    }


@takes(
    Text("title", "What the run is, in a line.", required=True, max_length=TITLE_MAX),
    Choice(
        "kind",
        "The kind of run; deploy and publish ask your bound human first.",
        options=tuple(Run.Kind.values),
        required=True,
    ),
    Id(
        "task",
        "The task the run is for (a coder deputy must name one assigned to it).",
        key=Key.TARGET,
    ),
)
def create_run(call: ToolCall, args: Arguments) -> dict[str, Any]:
    scope = scope_of(call)
    title, kind, task_id = args["title"], args["kind"], args["task"]
    assigned_only = call.tool.scope.get("condition") == Condition.ASSIGNED_TASK
    if assigned_only and task_id is None:
        raise NotAuthorized("this persona creates runs only for a task assigned to it: name it")
    with transaction.atomic():
        task = visible_task(call, task_id) if task_id else None
        if assigned_only:
            assert task is not None
            if task.assignee_id != call.persona.pk:
                raise NotAuthorized(f"task {task_id} is not assigned to this persona")
            if task.state == Task.State.DONE:
                raise StateConflict(f"task {task_id} is already done")
        run = Run.objects.create(
            owner_id=scope.owner_id,
            workspace=scope.workspace,
            project=scope.project or "",
            kind=kind,
            title=title,
            task=task,
            created_by_id=call.persona.pk,
        )
        _event(run, call, STATE_EVENT, f"created ({kind})", {"state": run.state})
    return {"run": run_json(_runs().get(pk=run.pk))}


@takes(
    Id("run", _WRITABLE_RUN, required=True, key=Key.TARGET),
    Choice(
        "state",
        "The state to move to: created -> running -> succeeded | failed; cancelled before the end.",
        options=tuple(Run.State.values),
        required=True,
    ),
    Text("note", "Why, for the run's log.", max_length=TEXT_MAX, key=Key.DIGEST),
)
def advance_run(call: ToolCall, args: Arguments) -> dict[str, Any]:
    run_id, target, note = args["run"], args["state"], args["note"]
    with transaction.atomic():
        run = _writable_run(call, run_id)
        if target not in TRANSITIONS[run.state]:
            raise StateConflict(f"run {run_id} cannot go from {run.state} to {target}")
        previous, run.state = run.state, target
        if target in TERMINAL:
            run.finished_at = timezone.now()
        run.save(update_fields=["state", "finished_at", "updated_at"])
        event = _event(run, call, STATE_EVENT, note, {"from": previous, "to": target})
    return {"run": run_json(run), "event": event.seq}


@takes(
    Id("run", _WRITABLE_RUN, required=True, key=Key.TARGET),
    Text(
        "kind",
        f"The event's kind; '{STATE_EVENT}' is advance_run's own.",
        default="log",
        max_length=32,
        blank=False,
    ),
    Text(
        "message",
        "The event; give a message, data or both.",
        max_length=TEXT_MAX,
        key=Key.DIGEST,
    ),
    Object("data", "Structured detail of the event; give a message, data or both.", key=Key.DIGEST),
)
def append_run_event(call: ToolCall, args: Arguments) -> dict[str, Any]:
    run_id, kind, message, data = args["run"], args["kind"], args["message"], args["data"]
    if kind == STATE_EVENT:
        raise Invalid("state events are written by advance_run")
    if not message and not data:
        raise Invalid("an event needs a message or data")
    with transaction.atomic():
        run = _writable_run(call, run_id)
        if run.state in TERMINAL:
            raise StateConflict(f"run {run_id} is {run.state}; its log is closed")
        event = _event(run, call, kind, message, data)
        run.save(update_fields=["updated_at"])
    return {"run": str(run.uuid), "event": event.seq, "at": iso(event.at)}


@takes(
    Id("run", _WRITABLE_RUN, required=True, key=Key.TARGET),
    Text("name", "The artifact's name.", required=True, max_length=TITLE_MAX),
    Text("kind", "What kind of artifact (report, wheel, image...).", max_length=32),
    Text("location", "Where it is kept (a path or URL).", max_length=1024),
    Text(
        "sha256",
        "Its sha256, 64 hex digits.",
        max_length=64,
        pattern="(?:[0-9a-fA-F]{64})?",
    ),
    Integer("size", "Its size in bytes."),
    url(
        "publish_to",
        "Where it is published outside (a public address); recording a publication asks your "
        "bound human first.",
        outbound=True,
    ),
)
def record_artifact(call: ToolCall, args: Arguments) -> dict[str, Any]:
    run_id, name, kind, location = args["run"], args["name"], args["kind"], args["location"]
    sha256, size, publish_to = args["sha256"].lower(), args["size"], args["publish_to"]
    with transaction.atomic():
        run = _writable_run(call, run_id)
        artifact = Artifact.objects.create(
            run=run,
            name=name,
            kind=kind,
            location=location,
            sha256=sha256,
            size=size,
            published_to=publish_to,
            recorded_by_id=call.persona.pk,
        )
        _event(
            run,
            call,
            "artifact",
            f"{'published' if publish_to else 'recorded'} {name}",
            {"artifact": str(artifact.uuid)},
        )
        run.save(update_fields=["updated_at"])
    return {"run": str(run.uuid), "artifact": artifact_json(artifact)}


IMPLEMENTATIONS = {
    "runs.list": list_runs,
    "runs.get": get_run,
    "runs.create": create_run,
    "runs.advance": advance_run,
    "runs.append_event": append_run_event,
    "runs.record_artifact": record_artifact,
}
