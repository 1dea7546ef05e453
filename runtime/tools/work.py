"""Task tools and the switchboard todo verbs, over one Task model.

Work arrives as todos (SPEC-0009): a task sits in one of the owner's queues, and only personas
whose stamp binds them to that queue see, claim or complete it there. The task tools work on what
a persona owns: the tasks it created, was addressed by (`for_persona`) or is assigned.

- `list_todos`, `claim`, `complete` act only inside the persona's own queues. A queue named in the
  arguments is checked by the policy (foreign-queue, a loud cross-scope denial); a task named by
  id is checked here against its queue (a loud `out_of_scope` refusal).
- `create_for` is delegation: it adds one open todo *for* another persona of the same owner, in a
  queue that persona's stamp binds it to (`for_queue`). It is the one verb that writes into a
  queue that is not the caller's, and it can only add: it never reads, claims or completes there.
  The creator follows what it delegated through the task tools (it created the task).
- `assign_task` hands a task the persona created, or one in its own queues, to a peer whose stamp
  binds it to the task's queue.
"""

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from personas.models import Persona
from runtime.models import Task, TaskReport
from runtime.stamp import StampUnavailable, load_active_stamp
from runtime.tools.params import TEXT_MAX, TITLE_MAX, Choice, Id, Key, Lines, Text
from runtime.tools.toolkit import (
    PAGE,
    Arguments,
    Invalid,
    Missing,
    NotAuthorized,
    Refused,
    StateConflict,
    ToolCall,
    find_persona,
    iso,
    own_queues,
    owner_id_of,
    peer_reference,
    takes,
)

NOTES_MAX_ITEMS = 50
REPORTS_SHOWN = 50
QUEUE_MAX = 100


def _tasks() -> QuerySet[Task]:
    return Task.objects.select_related(
        "created_by__address", "for_persona__address", "assignee__address"
    )


def task_json(task: Task, persona_pk: int | None = None) -> dict[str, Any]:
    def ref(persona: Persona | None) -> dict[str, Any] | None:
        return peer_reference(persona) if persona else None

    data = {
        "id": str(task.uuid),
        "queue": task.queue,
        "title": task.title,
        "body": task.body,
        "state": task.state,
        "created_by": ref(task.created_by),
        "for": ref(task.for_persona),
        "assignee": ref(task.assignee),
        "created_at": iso(task.created_at),
        "updated_at": iso(task.updated_at),
        "done_at": iso(task.done_at),
    }
    if persona_pk is not None:
        data["relation"] = [
            name
            for name, field in (
                ("creator", task.created_by_id),
                ("for", task.for_persona_id),
                ("assignee", task.assignee_id),
            )
            if field == persona_pk
        ]
    return data


def _owned(persona_pk: int) -> Q:
    return Q(created_by_id=persona_pk) | Q(for_persona_id=persona_pk) | Q(assignee_id=persona_pk)


def _task(call: ToolCall, task_id: str, *, lock: bool = False) -> Task:
    tasks = _tasks().filter(owner_id=owner_id_of(call.persona), uuid=task_id)
    if lock:
        tasks = tasks.select_for_update(of=("self",))
    task = tasks.first()
    if task is None:
        raise Missing(f"task {task_id} is not one of this installation's tasks")
    return task


def visible_task(call: ToolCall, task_id: str, *, lock: bool = False) -> Task:
    """A task the persona owns or that sits in one of its queues; anything else is refused."""
    task = _task(call, task_id, lock=lock)
    me = call.persona.pk
    if me in (task.created_by_id, task.for_persona_id, task.assignee_id):
        return task
    if task.queue in own_queues(call):
        return task
    raise Refused(f"task {task_id} is in queue {task.queue!r}, which this persona is not bound to")


def _in_own_queue(call: ToolCall, task_id: str) -> Task:
    task = _task(call, task_id, lock=True)
    if task.queue not in call.binding.queues:
        raise Refused(
            f"task {task_id} is in queue {task.queue!r}; this persona works only "
            f"{', '.join(call.binding.queues) or 'no queue'}"
        )
    return task


def _bound_queues(persona: Persona) -> tuple[str, ...]:
    """The queues a peer's own active stamp binds it to: the registry's word, not the caller's."""
    try:
        stamp = load_active_stamp(persona)
    except StampUnavailable as exc:
        raise StateConflict(f"persona {persona.uuid} cannot take work now: {exc.reason}") from None
    return tuple(stamp.document["bindings"]["queues"])


def _notes(description: str) -> Lines:
    return Lines(
        "notes", description, max_items=NOTES_MAX_ITEMS, max_length=TEXT_MAX, key=Key.DIGEST
    )


_TASK = (
    "The id of a task of yours (created by, addressed to or assigned to you, or queued for you)."
)
_TODO = "The id of a todo in one of your queues."


# Task tools -----------------------------------------------------------------------------------


@takes(
    Choice(
        "state",
        "Which of your tasks: active (not done), one state, or all.",
        options=("active", *Task.State.values, "all"),
        default="active",
    ),
    *PAGE,
)
def list_tasks(call: ToolCall, args: Arguments) -> dict[str, Any]:
    state = args["state"]
    page = args.page()
    tasks = _tasks().filter(owner_id=owner_id_of(call.persona)).filter(_owned(call.persona.pk))
    if state == "active":
        tasks = tasks.exclude(state=Task.State.DONE)
    elif state != "all":
        tasks = tasks.filter(state=state)
    rows, next_cursor = page.of(tasks.order_by("created_at", "id"))
    return {"tasks": [task_json(t, call.persona.pk) for t in rows], "next_cursor": next_cursor}


@takes(Id("task", _TASK, required=True, key=Key.TARGET))
def get_task(call: ToolCall, args: Arguments) -> dict[str, Any]:
    task = visible_task(call, args["task"])
    reports = list(
        TaskReport.objects.filter(task=task)
        .select_related("by__address")
        .order_by("-at", "-id")[:REPORTS_SHOWN]
    )
    return {
        "task": task_json(task, call.persona.pk),
        "reports": [
            {
                "status": report.status,
                "notes": report.notes,
                "by": peer_reference(report.by),
                "at": iso(report.at),
            }
            for report in reversed(reports)
        ],
        "runs": [str(run) for run in task.runs.values_list("uuid", flat=True)],
        "decisions": [str(d) for d in task.decisions.values_list("uuid", flat=True)],
    }


@takes(
    Id("task", _TASK, required=True, key=Key.TARGET),
    Choice(
        "status",
        "What the report says; only the assignee reports done.",
        options=tuple(TaskReport.Status.values),
        default=TaskReport.Status.PROGRESS.value,
    ),
    _notes("What you report: one text or a list of lines."),
)
def report_task(call: ToolCall, args: Arguments) -> dict[str, Any]:
    task_id = args["task"]
    status = args["status"]
    notes = args["notes"]
    me = call.persona.pk
    with transaction.atomic():
        task = visible_task(call, task_id, lock=True)
        if me not in (task.created_by_id, task.for_persona_id, task.assignee_id):
            raise NotAuthorized(f"task {task_id} is not this persona's work to report on")
        if task.state == Task.State.DONE:
            raise StateConflict(f"task {task_id} is already done")
        if status == TaskReport.Status.DONE:
            if task.assignee_id != me:
                raise NotAuthorized("only the task's assignee reports it done")
            task.state, task.done_at = Task.State.DONE, timezone.now()
            task.save(update_fields=["state", "done_at", "updated_at"])
        else:
            task.save(update_fields=["updated_at"])
        report = TaskReport.objects.create(task=task, by_id=me, status=status, notes=notes)
    return {"task": task_json(task, me), "report": {"status": status, "at": iso(report.at)}}


@takes(
    Id(
        "task",
        "The id of a task you created or that is queued for you.",
        required=True,
        key=Key.TARGET,
    ),
    Text(
        "assignee",
        "The peer persona to take it: its id or registered address; bound to the task's queue.",
        required=True,
        max_length=TITLE_MAX,
    ),
)
def assign_task(call: ToolCall, args: Arguments) -> dict[str, Any]:
    task_id = args["task"]
    reference = args["assignee"]
    me = call.persona.pk
    with transaction.atomic():
        task = visible_task(call, task_id, lock=True)
        if task.created_by_id != me and task.queue not in own_queues(call):
            raise NotAuthorized(f"task {task_id} is neither created by nor queued for this persona")
        if task.state == Task.State.DONE:
            raise StateConflict(f"task {task_id} is already done")
        assignee = find_persona(task.owner_id, reference, what="assignee")
        if task.queue not in _bound_queues(assignee):
            raise Refused(f"{assignee.name} is not bound to queue {task.queue!r}")
        task.assignee, task.assigned_by_id, task.state = assignee, me, Task.State.ASSIGNED
        task.save(update_fields=["assignee", "assigned_by", "state", "updated_at"])
    return {"task": task_json(task, me)}


# Switchboard todo verbs -----------------------------------------------------------------------


@takes(
    Text(
        "queue",
        "One of your queues; all of them if left out.",
        max_length=QUEUE_MAX,
        key=Key.TARGET,
    ),
    Choice(
        "state",
        "open: claimable; mine: assigned to or claimed by you; done; or all.",
        options=("open", "mine", "done", "all"),
        default="open",
    ),
    *PAGE,
)
def list_todos(call: ToolCall, args: Arguments) -> dict[str, Any]:
    queues = call.binding.queues
    queue = args["queue"]
    if queue and queue not in queues:
        raise Refused(f"queue {queue!r} is not bound to this persona")
    state = args["state"]
    page = args.page()
    me = call.persona.pk
    todos = _tasks().filter(
        owner_id=owner_id_of(call.persona), queue__in=[queue] if queue else queues
    )
    if state == "open":
        todos = todos.filter(state=Task.State.OPEN).filter(
            Q(for_persona__isnull=True) | Q(for_persona_id=me)
        )
    elif state == "mine":
        todos = todos.filter(assignee_id=me, state__in=[Task.State.ASSIGNED, Task.State.CLAIMED])
    elif state == "done":
        todos = todos.filter(state=Task.State.DONE)
    rows, next_cursor = page.of(todos.order_by("created_at", "id"))
    return {"todos": [task_json(t, me) for t in rows], "next_cursor": next_cursor}


@takes(Id("task", _TODO, required=True, key=Key.TARGET))
def claim(call: ToolCall, args: Arguments) -> dict[str, Any]:
    task_id = args["task"]
    me = call.persona.pk
    with transaction.atomic():
        task = _in_own_queue(call, task_id)
        if task.for_persona_id not in (None, me):
            raise NotAuthorized(f"todo {task_id} was created for another persona")
        mine = task.state == Task.State.ASSIGNED and task.assignee_id == me
        if task.state != Task.State.OPEN and not mine:
            raise StateConflict(f"todo {task_id} is {task.state}, not open")
        task.assignee_id, task.state = me, Task.State.CLAIMED
        task.save(update_fields=["assignee", "state", "updated_at"])
    return {"todo": task_json(_tasks().get(pk=task.pk), me)}


@takes(
    Id("task", "The id of a todo you claimed.", required=True, key=Key.TARGET),
    _notes("What was done: one text or a list of lines."),
)
def complete(call: ToolCall, args: Arguments) -> dict[str, Any]:
    task_id = args["task"]
    notes = args["notes"]
    me = call.persona.pk
    with transaction.atomic():
        task = _in_own_queue(call, task_id)
        if task.assignee_id != me:
            raise NotAuthorized(f"todo {task_id} is not claimed by this persona")
        if task.state == Task.State.DONE:
            raise StateConflict(f"todo {task_id} is already done")
        task.state, task.done_at = Task.State.DONE, timezone.now()
        task.save(update_fields=["state", "done_at", "updated_at"])
        TaskReport.objects.create(task=task, by_id=me, status=TaskReport.Status.DONE, notes=notes)
    return {"todo": task_json(_tasks().get(pk=task.pk), me)}


@takes(
    Text(
        "recipient",
        "The peer persona the todo is for: its id or registered address.",
        required=True,
        max_length=TITLE_MAX,
        key=Key.TARGET,
    ),
    Text(
        "for_queue",
        "Which of the recipient's queues; needed only when it works several.",
        max_length=QUEUE_MAX,
    ),
    Text("title", "The todo in a line.", required=True, max_length=TITLE_MAX),
    Text("body", "What is to be done, in full.", max_length=TEXT_MAX, key=Key.DIGEST),
)
def create_for(call: ToolCall, args: Arguments) -> dict[str, Any]:
    owner_id = owner_id_of(call.persona)
    recipient = find_persona(owner_id, args["recipient"], what="recipient")
    if recipient.pk == call.persona.pk:
        raise Invalid("create_for delegates to another persona; a persona's own work is claimed")
    bound = _bound_queues(recipient)
    queue = args["for_queue"]
    if not queue:
        if len(bound) != 1:
            raise Invalid(f"{recipient.name} works several queues; name one as for_queue")
        queue = bound[0]
    if queue not in bound:
        raise Refused(f"{recipient.name} is not bound to queue {queue!r}")
    task = Task.objects.create(
        owner_id=owner_id,
        queue=queue,
        title=args["title"],
        body=args["body"],
        created_by_id=call.persona.pk,
        for_persona=recipient,
    )
    return {"todo": task_json(_tasks().get(pk=task.pk), call.persona.pk)}


IMPLEMENTATIONS = {
    "tasks.list": list_tasks,
    "tasks.get": get_task,
    "tasks.report": report_task,
    "tasks.assign": assign_task,
    "todos.list": list_todos,
    "todos.claim": claim,
    "todos.complete": complete,
    "todos.create_for": create_for,
}


# The owner's side -----------------------------------------------------------------------------


@transaction.atomic
def create_todo(
    *,
    owner: AbstractBaseUser,
    queue: str,
    title: str,
    body: str = "",
    for_persona: Persona | None = None,
) -> Task:
    """A todo the owner puts into one of their queues (work arriving from the human side)."""
    if not (owner.is_authenticated and owner.is_active):
        raise PermissionDenied("only an active owner puts work into their queues")
    errors: dict[str, list[str]] = {}
    if not isinstance(queue, str) or not queue.strip() or len(queue) > QUEUE_MAX:
        errors["queue"] = [f"must be 1-{QUEUE_MAX} characters"]
    if not isinstance(title, str) or not title.strip() or len(title) > TITLE_MAX:
        errors["title"] = [f"must be 1-{TITLE_MAX} characters"]
    if for_persona is not None and for_persona.agent.owner_id != owner.pk:
        errors["for_persona"] = ["must be one of the owner's personas"]
    if errors:
        raise ValidationError(errors)
    return Task.objects.create(
        owner=owner, queue=queue, title=title, body=body, for_persona=for_persona
    )
