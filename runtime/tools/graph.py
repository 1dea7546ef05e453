"""query_graph_context: a read-only, bounded walk over the project graph in the persona's namespace.

The graph is read from the runtime's records, never stored twice: personas, the agents they run
on, tasks, decisions and runs, and the persona's own conversation archives. What a persona sees
is fixed by its stamp's graph namespace N: the owner's personas whose namespace is N or lies
below it (`N/...`) are the members; a task, decision or run is in the graph when a member created,
was addressed by, was assigned, raised or resolved it; an agent when a member runs on it. Archives
are the exception: only the querying persona's own lineage is ever served, whatever namespace
another persona shares with it.

Bounds: depth (default 2, at most 4), node count (default 50, at most 200) and a time budget
(VIRGO_GRAPH_TIME_BUDGET_MS, default 2000 ms). A request above a bound is clamped and says so; a
walk that stops at a bound says which (`truncated`). Nothing here writes.
"""

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import Q

from personas.models import Agent, Persona
from runtime.models import ConversationArchive, Decision, Run, Task
from runtime.tools.params import Integer, Strings, Text
from runtime.tools.toolkit import (
    Arguments,
    Invalid,
    Missing,
    Refused,
    ToolCall,
    is_uuid,
    iso,
    owner_id_of,
    takes,
)

DEFAULT_DEPTH, MAX_DEPTH = 2, 4
DEFAULT_NODES, MAX_NODES = 50, 200
KINDS = ("persona", "agent", "task", "decision", "run", "archive")
SUMMARY_MAX = 500

Node = tuple[str, str]
Neighbour = tuple[str, Node, Any]


def time_budget_ms() -> int:
    return settings.VIRGO_GRAPH_TIME_BUDGET_MS


@dataclass
class View:
    """What one persona may see of its owner's graph."""

    owner_id: int
    persona_pk: int
    namespace: str
    members: frozenset[int]

    def task_q(self) -> Q:
        return Q(owner_id=self.owner_id) & (
            Q(created_by_id__in=self.members)
            | Q(for_persona_id__in=self.members)
            | Q(assignee_id__in=self.members)
        )

    def decision_q(self) -> Q:
        return Q(owner_id=self.owner_id) & (
            Q(raised_by_id__in=self.members) | Q(resolved_by_id__in=self.members)
        )

    def run_q(self) -> Q:
        return Q(owner_id=self.owner_id, created_by_id__in=self.members)


def view_of(call: ToolCall) -> View:
    namespace = call.stamp.document["bindings"]["graph_namespace"]
    below = f"{namespace}/"
    owner_id = owner_id_of(call.persona)
    members = Persona.objects.filter(agent__owner_id=owner_id).filter(
        Q(graph_namespace=namespace)
        | Q(graph_namespace__startswith=below)
        | Q(graph_namespace="", address__path=namespace)
        | Q(graph_namespace="", address__path__startswith=below)
    )
    return View(
        owner_id=owner_id,
        persona_pk=call.persona.pk,
        namespace=namespace,
        members=frozenset(members.values_list("pk", flat=True)),
    )


# Nodes ----------------------------------------------------------------------------------------


def _persona(p: Persona) -> dict[str, Any]:
    return {
        "name": p.name,
        "address": p.address.path,
        "class": p.persona_class,
        "standing": p.standing is True,
    }


def _task(t: Task) -> dict[str, Any]:
    return {"title": t.title, "queue": t.queue, "state": t.state}


def _decision(d: Decision) -> dict[str, Any]:
    return {
        "title": d.title,
        "state": d.state,
        "workspace": d.workspace,
        "project": d.project or None,
    }


def _run(r: Run) -> dict[str, Any]:
    return {"title": r.title, "run_kind": r.kind, "state": r.state}


def _archive(a: ConversationArchive) -> dict[str, Any]:
    return {
        "title": a.title,
        "summary": a.summary[:SUMMARY_MAX],
        "started_at": iso(a.started_at),
        "ended_at": iso(a.ended_at),
    }


def _agent(a: Agent) -> dict[str, Any]:
    return {"name": a.name}


def _key(kind: str, row: Any) -> Node:
    return (kind, str(row.pk if kind == "agent" else row.uuid))


class _Walker:
    """Neighbours of each kind of node, each query bounded by the room left in the walk."""

    def __init__(self, view: View) -> None:
        self.view = view
        self.personas = Persona.objects.filter(pk__in=view.members).select_related(
            "address", "agent"
        )

    def load(self, node: Node) -> Any:
        kind, ident = node
        if kind == "persona":
            return self.personas.filter(uuid=ident).first()
        if kind == "agent":
            return (
                Agent.objects.filter(pk=ident, personas__pk__in=self.view.members).first()
                if ident.isdigit()
                else None
            )
        if kind == "task":
            return Task.objects.filter(self.view.task_q(), uuid=ident).first()
        if kind == "decision":
            return Decision.objects.filter(self.view.decision_q(), uuid=ident).first()
        if kind == "run":
            return Run.objects.filter(self.view.run_q(), uuid=ident).first()
        own = ConversationArchive.objects.filter(persona_id=self.view.persona_pk)
        return own.filter(uuid=ident).first()

    def neighbours(self, kind: str, row: Any, room: int) -> Iterator[Neighbour]:
        yield from getattr(self, f"_from_{kind}")(row, room)

    def _from_persona(self, p: Persona, room: int) -> Iterator[Neighbour]:
        yield ("runs_on", ("agent", str(p.agent_id)), p.agent)
        for relation, column in (
            ("created_by", "created_by_id"),
            ("for", "for_persona_id"),
            ("assigned_to", "assignee_id"),
        ):
            for t in Task.objects.filter(owner_id=self.view.owner_id, **{column: p.pk})[:room]:
                yield (relation, _key("task", t), t)
        for relation, column in (("raised_by", "raised_by_id"), ("resolved_by", "resolved_by_id")):
            for d in Decision.objects.filter(owner_id=self.view.owner_id, **{column: p.pk})[:room]:
                yield (relation, _key("decision", d), d)
        for r in Run.objects.filter(owner_id=self.view.owner_id, created_by_id=p.pk)[:room]:
            yield ("created_by", _key("run", r), r)
        if p.pk == self.view.persona_pk:
            for a in ConversationArchive.objects.filter(persona_id=p.pk)[:room]:
                yield ("of", _key("archive", a), a)

    def _from_agent(self, a: Agent, room: int) -> Iterator[Neighbour]:
        for p in self.personas.filter(agent_id=a.pk)[:room]:
            yield ("runs_on", _key("persona", p), p)

    def _member(self, relation: str, pk: int | None) -> Iterator[Neighbour]:
        if pk is not None and pk in self.view.members:
            p = self.personas.get(pk=pk)
            yield (relation, _key("persona", p), p)

    def _from_task(self, t: Task, room: int) -> Iterator[Neighbour]:
        yield from self._member("created_by", t.created_by_id)
        yield from self._member("for", t.for_persona_id)
        yield from self._member("assigned_to", t.assignee_id)
        for r in Run.objects.filter(self.view.run_q(), task=t)[:room]:
            yield ("for_task", _key("run", r), r)
        for d in Decision.objects.filter(self.view.decision_q(), task=t)[:room]:
            yield ("about", _key("decision", d), d)

    def _from_decision(self, d: Decision, room: int) -> Iterator[Neighbour]:
        yield from self._member("raised_by", d.raised_by_id)
        yield from self._member("resolved_by", d.resolved_by_id)
        if d.task_id is not None:
            task = Task.objects.filter(self.view.task_q(), pk=d.task_id).first()
            if task is not None:
                yield ("about", _key("task", task), task)

    def _from_run(self, r: Run, room: int) -> Iterator[Neighbour]:
        yield from self._member("created_by", r.created_by_id)
        if r.task_id is not None:
            task = Task.objects.filter(self.view.task_q(), pk=r.task_id).first()
            if task is not None:
                yield ("for_task", _key("task", task), task)

    def _from_archive(self, a: ConversationArchive, room: int) -> Iterator[Neighbour]:
        own = ConversationArchive.objects.filter(persona_id=self.view.persona_pk)
        yield from self._member("of", a.persona_id)
        parent = own.filter(pk=a.parent_id).first() if a.parent_id else None
        if parent is not None:
            yield ("continues", _key("archive", parent), parent)
        for child in own.filter(parent_id=a.pk)[:room]:
            yield ("continued_by", _key("archive", child), child)


_DESCRIBE: dict[str, Callable[[Any], dict[str, Any]]] = {
    "persona": _persona,
    "agent": _agent,
    "task": _task,
    "decision": _decision,
    "run": _run,
    "archive": _archive,
}


def _node(node: Node, row: Any) -> dict[str, Any]:
    return {"id": f"{node[0]}:{node[1]}", "kind": node[0], **_DESCRIBE[node[0]](row)}


@dataclass
class _Result:
    nodes: dict[Node, dict[str, Any]] = field(default_factory=dict)
    edges: set[tuple[Node, str, Node]] = field(default_factory=set)
    truncated: set[str] = field(default_factory=set)


def _parse_start(call: ToolCall, start: str) -> Node:
    if not start:
        return ("persona", str(call.persona.uuid))
    kind, _, ident = start.partition(":")
    # Agent ids are integers: ASCII digits only (isdigit() alone takes '²', which int() refuses).
    agent_id = ident.isascii() and ident.isdigit()
    if kind not in KINDS or not ident or not (agent_id if kind == "agent" else is_uuid(ident)):
        raise Invalid("start must be '<kind>:<id>', kind one of " + ", ".join(KINDS))
    return (kind, ident if kind == "agent" else ident.lower())


def _clamped(args: Arguments, name: str, bound: int, clamps: dict) -> int:
    """The argument, cut to its bound (and said so); without a default of its own, the bound."""
    requested = args[name]
    if requested is None:
        return bound
    if requested > bound:
        clamps[name] = {"requested": requested, "used": bound}
        return bound
    return requested


@takes(
    Text(
        "start",
        f"The node to start from, '<kind>:<id>' with kind one of {', '.join(KINDS)}; "
        "yourself if left out.",
        max_length=100,
    ),
    Integer(
        "depth", f"How many hops to walk; above {MAX_DEPTH} is cut to it.", default=DEFAULT_DEPTH
    ),
    Integer(
        "max_nodes",
        f"How many nodes at most; above {MAX_NODES} is cut to it.",
        default=DEFAULT_NODES,
        minimum=1,
    ),
    Strings(
        "kinds", "Walk only to nodes of these kinds; all if left out.", max_items=len(KINDS),
        options=KINDS,
    ),
    Integer(
        "time_budget_ms",
        "Milliseconds the walk may take; the installation's budget (the default) is the most.",
        minimum=1,
    ),
)  # fmt: skip
def query_graph_context(call: ToolCall, args: Arguments) -> dict[str, Any]:
    clamps: dict[str, Any] = {}
    depth = _clamped(args, "depth", MAX_DEPTH, clamps)
    max_nodes = _clamped(args, "max_nodes", MAX_NODES, clamps)
    budget_ms = _clamped(args, "time_budget_ms", time_budget_ms(), clamps)
    kinds = args["kinds"] or list(KINDS)
    start = _parse_start(call, args["start"])
    view = view_of(call)
    walker = _Walker(view)
    row = walker.load(start)
    if row is None:
        _explain_absent(call, view, start)
    deadline = time.monotonic() + budget_ms / 1000
    result = _Result()
    result.nodes[start] = _node(start, row)
    frontier: list[tuple[Node, Any]] = [(start, row)]
    for _level in range(depth):
        following: list[tuple[Node, Any]] = []
        for node, current in frontier:
            if time.monotonic() >= deadline:
                result.truncated.add("time_budget")
                break
            # Each neighbour query reads at most one row more than the walk can take, so a hub
            # node never loads more than the bound and a cut-off is still seen.
            room = max_nodes + 1
            for relation, neighbour, data in walker.neighbours(node[0], current, room):
                if neighbour[0] not in kinds:
                    continue
                if neighbour not in result.nodes:
                    if len(result.nodes) >= max_nodes:
                        result.truncated.add("max_nodes")
                        continue
                    result.nodes[neighbour] = _node(neighbour, data)
                    following.append((neighbour, data))
                result.edges.add((node, relation, neighbour))
        if "time_budget" in result.truncated:
            break
        frontier = following
    return {
        "namespace": view.namespace,
        "start": f"{start[0]}:{start[1]}",
        "nodes": list(result.nodes.values()),
        "edges": [
            {"from": f"{a[0]}:{a[1]}", "relation": relation, "to": f"{b[0]}:{b[1]}"}
            for a, relation, b in sorted(result.edges)
            if a in result.nodes and b in result.nodes
        ],
        "limits": {"depth": depth, "max_nodes": max_nodes, "time_budget_ms": budget_ms},
        "clamped": clamps,
        "truncated": sorted(result.truncated),
    }


def _explain_absent(call: ToolCall, view: View, start: Node) -> None:
    """Refuse a start node that exists for the owner but lies outside this persona's view."""
    kind, ident = start
    exists: dict[str, Callable[[], bool]] = {
        "persona": lambda: Persona.objects.filter(
            agent__owner_id=view.owner_id, uuid=ident
        ).exists(),
        "agent": lambda: (
            ident.isdigit() and Agent.objects.filter(owner_id=view.owner_id, pk=ident).exists()
        ),
        "task": lambda: Task.objects.filter(owner_id=view.owner_id, uuid=ident).exists(),
        "decision": lambda: Decision.objects.filter(owner_id=view.owner_id, uuid=ident).exists(),
        "run": lambda: Run.objects.filter(owner_id=view.owner_id, uuid=ident).exists(),
        "archive": lambda: ConversationArchive.objects.filter(
            persona__agent__owner_id=view.owner_id, uuid=ident
        ).exists(),
    }
    if not exists[kind]():
        raise Missing(f"{kind} {ident} is not in this installation's graph")
    if kind == "archive":
        raise Refused(f"archive {ident} belongs to another persona's lineage")
    raise Refused(f"{kind} {ident} is outside graph namespace {view.namespace!r}")


IMPLEMENTATIONS = {"graph.query": query_graph_context}


# The runtime's side: archiving a conversation -------------------------------------------------


def archive_conversation(
    *,
    persona: Persona,
    title: str,
    started_at: Any,
    summary: str = "",
    ended_at: Any = None,
    parent: ConversationArchive | None = None,
) -> ConversationArchive:
    """Archive one conversation of `persona`, continuing `parent` (which must be its own)."""
    if parent is not None and parent.persona_id != persona.pk:
        raise ValidationError({"parent": ["a lineage never crosses personas"]})
    if not title.strip():
        raise ValidationError({"title": ["must not be blank"]})
    return ConversationArchive.objects.create(
        persona=persona,
        parent=parent,
        title=title[:200],
        summary=summary,
        started_at=started_at,
        ended_at=ended_at,
    )
