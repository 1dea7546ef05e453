"""What the persona tools share: their declared arguments, the persona's scope, peers, errors.

Every tool implementation declares what it takes once, with `@takes(Param, ...)`: that one
declaration is what its parser accepts (`Arguments`), what the MCP server lists as its input
schema (`Tool.input_schema`) and, through each argument's `key` role, what a learned choice is
keyed on and what a confirmation shows (runtime.operations); no list of argument names is kept
anywhere else. What a call's effect depends on beyond its arguments (the URL a webhook name
stands for) the tool declares as its `resolve`, read when the call is made.

A tool implementation receives a `ToolCall` whose operation the policy has already normalised
and classified; the identity keys (workspace, project, persona) in it are the persona's own or
the call was refused. What the policy cannot see (which queue a task id sits in, whose inbox a
message is in) each tool checks against the database, through these helpers.

Errors map onto the handler's results: `Refused` (and its kin) is a loud refusal with its own
code, recorded and logged; `Invalid`, `Missing` and `StateConflict` are failures of the call.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet

from personas.addresses import ROOT_WORKSPACE
from personas.models import Persona
from runtime.operations import IDENTITY_KEYS, Binding, Operation
from runtime.stamp import ActiveStamp, StampTool
from runtime.tools.params import (
    ArgumentError,
    Integer,
    Param,
    check_declaration,
    is_uuid,
    object_schema,
    parse,
)
from runtime.tools.workspace import Conflict, InvalidArgument, NotFound, OutOfScope, Workspace

PAGE_DEFAULT = 50
PAGE_MAX = 200


@dataclass(frozen=True, slots=True)
class ToolCall:
    """Everything an implementation may use: it acts only on what the stamp bound it to."""

    persona: Persona
    stamp: ActiveStamp
    tool: StampTool
    binding: Binding
    workspace: Workspace
    op: Operation
    correlation_id: str


class Invalid(InvalidArgument):
    """The arguments do not describe something this tool can do."""


class Missing(NotFound):
    """No such record among those the persona may see (other owners' records look the same)."""


class StateConflict(Conflict):
    """The record is not in a state that allows this (already done, already resolved)."""


class Refused(OutOfScope):
    """The record exists in the owner's installation but lies outside this persona's scope."""

    code = "out_of_scope"


class NotAuthorized(OutOfScope):
    """The persona's class or binding does not give it this authority over the record."""

    code = "not_authorized"


# What a tool takes ----------------------------------------------------------------------------

# The paging arguments of every list tool.
PAGE: tuple[Param, ...] = (
    Integer("cursor", "Where the page starts: next_cursor of the page before.", default=0),
    Integer("limit", "How many items at most.", default=PAGE_DEFAULT, minimum=1, maximum=PAGE_MAX),
)


class Arguments:
    """The call's own arguments (identity keys aside), parsed by the tool's declaration.

    `args[name]` is the checked value, or what the declaration gives when the caller left it
    out; `args.given(name)` says which. A name the tool does not declare, a missing required
    argument or a wrong value is refused (`Invalid`) before the implementation runs.
    """

    def __init__(self, call: "ToolCall", params: tuple[Param, ...]) -> None:
        self.tool = call.tool.name
        self._params = {param.name: param for param in params}
        own = {k: v for k, v in call.op.arguments.items() if k not in IDENTITY_KEYS}
        try:
            self._given = parse(params, own, tool=self.tool)
        except ArgumentError as exc:
            raise Invalid(str(exc)) from None

    def __getitem__(self, name: str) -> Any:
        if name in self._given:
            return self._given[name]
        return self._params[name].absent()

    def given(self, name: str) -> bool:
        return name in self._given

    def given_values(self) -> dict[str, Any]:
        """Only what the caller gave, checked, in the order of the declaration."""
        return dict(self._given)

    def page(self) -> "Page":
        return Page(cursor=self["cursor"], limit=self["limit"])


Implementation = Callable[["ToolCall", Arguments], dict[str, Any]]
# What a call's effect depends on beyond its arguments, read for the persona when it calls:
# (persona, the call's arguments) -> values that join the operation's shape (`resolved`).
Resolver = Callable[[Persona, Mapping[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Tool:
    """An implementation bound with the declaration of what it takes.

    This is what the handler registry holds for a handler action: the handler calls it with the
    ToolCall, it parses the arguments by `params` and runs the implementation with them; the MCP
    server lists `input_schema()` from the same `params` (V1-CONS-1); the policy keys the call
    by the same `params` and by what `resolve` reads (VX-SEC-2).
    """

    params: tuple[Param, ...]
    implementation: Implementation
    resolve: Resolver | None = None

    def __call__(self, call: "ToolCall") -> dict[str, Any]:
        return self.implementation(call, Arguments(call, self.params))

    def input_schema(self) -> dict[str, Any]:
        return object_schema(self.params)


def takes(*params: Param, resolve: Resolver | None = None) -> Callable[[Implementation], Tool]:
    """Declare, once, the arguments of the tool implementation it decorates (and, with
    `resolve`, what else its effect depends on)."""
    declared = check_declaration(params)

    def bind(implementation: Implementation) -> Tool:
        return Tool(declared, implementation, resolve)

    return bind


@dataclass(frozen=True, slots=True)
class Page:
    cursor: int
    limit: int

    def of(self, queryset: QuerySet[Any]) -> tuple[list[Any], int | None]:
        """One page of rows and the cursor of the next one (None at the end), without a COUNT."""
        rows = list(queryset[self.cursor : self.cursor + self.limit + 1])
        more = len(rows) > self.limit
        return rows[: self.limit], (self.cursor + self.limit if more else None)


def iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


# The persona's place in the hierarchy ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Scope:
    """Where the persona stands: the installation (root), a workspace, or one project."""

    owner_id: int
    level: str
    workspace: str
    project: str | None

    def covers(self, *, workspace: str, project: str) -> bool:
        """Whether a record of `workspace` and `project` ("" for none) lies in this scope."""
        if self.level == "root":
            return True
        if self.project is None:
            return workspace == self.workspace
        return workspace == self.workspace and project == self.project

    def records(self, prefix: str = "") -> Q:
        """The owner's records (with workspace/project columns) this scope covers."""
        condition = Q(**{f"{prefix}owner_id": self.owner_id})
        if self.level == "root":
            return condition
        condition &= Q(**{f"{prefix}workspace": self.workspace})
        if self.project is not None:
            condition &= Q(**{f"{prefix}project": self.project})
        return condition


def scope_of(call: "ToolCall") -> Scope:
    hierarchy = call.stamp.document["hierarchy"]
    return Scope(
        owner_id=owner_id_of(call.persona),
        level=hierarchy["level"],
        workspace=hierarchy["workspace"],
        project=hierarchy["project"],
    )


def owner_id_of(persona: Persona) -> int:
    return Persona.objects.filter(pk=persona.pk).values_list("agent__owner_id", flat=True).get()


def own_queues(call: "ToolCall") -> tuple[str, ...]:
    """The queues the persona's stamp binds it to (the whole binding, whatever the tool)."""
    return tuple(call.stamp.document["bindings"]["queues"])


# Peers ---------------------------------------------------------------------------------------


def owner_personas(owner_id: int) -> QuerySet[Persona]:
    return Persona.objects.filter(agent__owner_id=owner_id).select_related("address", "agent")


def find_persona(owner_id: int, reference: str, *, what: str) -> Persona:
    """A persona of the same owner, named by its id or by its registered address.

    Personas of other owners are never found: their ids and addresses look like nothing. An
    address several of the owner's personas share is ambiguous; the id then says which.
    """
    personas = owner_personas(owner_id)
    if is_uuid(reference):
        persona = personas.filter(uuid=reference).first()
        if persona is None:
            raise Missing(f"{what} {reference} is not one of this installation's personas")
        return persona
    found = list(personas.filter(address__path=reference)[:2])
    if not found:
        raise Missing(f"{what} {reference!r} is not a registered address of a peer persona")
    if len(found) > 1:
        raise Invalid(f"{what} {reference!r} names several personas; give the persona id")
    return found[0]


def peer_reference(persona: Persona) -> dict[str, Any]:
    """How one persona is named to another: id, name, address and class, nothing private."""
    return {
        "peer_id": str(persona.uuid),
        "name": persona.name,
        "address": persona.address.path,
        "class": persona.persona_class,
    }


def in_workspace_of(scope: Scope) -> Q:
    """Personas a persona counts as peers: its own workspace's, and the reserved root's.

    The reserved root stands above every workspace, so a root persona's peers are the whole
    installation, and every persona counts the root's personas among its peers.
    """
    if scope.level == "root":
        return Q()
    return Q(address__path__startswith=f"{scope.workspace}/") | Q(
        address__path__startswith=f"{ROOT_WORKSPACE}/"
    )
