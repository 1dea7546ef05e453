"""What the persona tools share: argument parsing, the persona's scope, peers, paging, errors.

A tool implementation receives a `ToolCall` whose operation the policy has already normalised
and classified; the identity keys (workspace, project, persona) in it are the persona's own or
the call was refused. What the policy cannot see (which queue a task id sits in, whose inbox a
message is in) each tool checks against the database, through these helpers.

Errors map onto the handler's results: `Refused` (and its kin) is a loud refusal with its own
code, recorded and logged; `Invalid`, `Missing` and `StateConflict` are failures of the call.
"""

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import rfc8785
from django.db.models import Q, QuerySet

from personas.addresses import ROOT_WORKSPACE
from personas.models import Persona
from runtime.policy import IDENTITY_KEYS
from runtime.workspace import Conflict, InvalidArgument, NotFound, OutOfScope

if TYPE_CHECKING:
    from runtime.handler import ToolCall

PAGE_DEFAULT = 50
PAGE_MAX = 200
TEXT_MAX = 64 * 1024
TITLE_MAX = 200


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


_MISSING = object()


class Arguments:
    """The call's arguments without the identity keys, refusing any name the tool does not take."""

    def __init__(self, call: "ToolCall", names: Iterable[str]) -> None:
        self.tool = call.tool.name
        self.values = {k: v for k, v in call.op.arguments.items() if k not in IDENTITY_KEYS}
        unknown = sorted(set(self.values) - set(names))
        if unknown:
            raise Invalid(f"{self.tool} does not take: {', '.join(unknown)}")

    def _get(self, name: str, required: bool) -> Any:
        value = self.values.get(name, _MISSING)
        if value is _MISSING or value is None:
            if required:
                raise Invalid(f"{self.tool} needs {name}")
            return _MISSING
        return value

    def text(
        self,
        name: str,
        *,
        required: bool = False,
        default: str = "",
        max_length: int = TEXT_MAX,
        blank: bool = True,
    ) -> str:
        value = self._get(name, required)
        if value is _MISSING:
            return default
        if not isinstance(value, str):
            raise Invalid(f"{name} must be a string")
        if len(value) > max_length:
            raise Invalid(f"{name} is longer than {max_length} characters")
        if (required or not blank) and not value.strip():
            raise Invalid(f"{name} must not be blank")
        return value

    def choice(self, name: str, choices: Sequence[str], *, default: str | None = None) -> str:
        value = self._get(name, default is None)
        if value is _MISSING:
            assert default is not None
            return default
        if value not in choices:
            raise Invalid(f"{name} must be one of {', '.join(choices)}")
        return str(value)

    def integer(
        self, name: str, *, default: int | None, low: int, high: int | None = None
    ) -> int | None:
        value = self._get(name, False)
        if value is _MISSING:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise Invalid(f"{name} must be an integer")
        if value < low or (high is not None and value > high):
            raise Invalid(f"{name} must be between {low} and {high if high else 'any'}")
        return value

    def boolean(self, name: str, *, default: bool) -> bool:
        value = self._get(name, False)
        if value is _MISSING:
            return default
        if not isinstance(value, bool):
            raise Invalid(f"{name} must be true or false")
        return value

    def uuid(self, name: str, *, required: bool = True) -> str | None:
        value = self._get(name, required)
        if value is _MISSING:
            return None
        if not is_uuid(value):
            raise Invalid(f"{name} must be an id (a UUID)")
        return str(uuid.UUID(value))

    def strings(self, name: str, *, max_items: int, max_length: int) -> list[str]:
        value = self._get(name, False)
        if value is _MISSING:
            return []
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise Invalid(f"{name} must be a list of strings")
        if len(value) > max_items:
            raise Invalid(f"{name} takes at most {max_items} items")
        if any(len(item) > max_length or not item.strip() for item in value):
            raise Invalid(f"each of {name} must be 1-{max_length} characters")
        return value

    def mapping(self, name: str, *, max_bytes: int = TEXT_MAX) -> dict[str, Any]:
        value = self._get(name, False)
        if value is _MISSING:
            return {}
        if not isinstance(value, dict):
            raise Invalid(f"{name} must be an object")
        try:
            size = len(rfc8785.dumps(value))
        except (TypeError, ValueError, rfc8785.CanonicalizationError):
            raise Invalid(f"{name} must be plain JSON") from None
        if size > max_bytes:
            raise Invalid(f"{name} is larger than {max_bytes} bytes")
        return value

    def page(self) -> "Page":
        cursor = self.integer("cursor", default=0, low=0)
        limit = self.integer("limit", default=PAGE_DEFAULT, low=1, high=PAGE_MAX)
        assert cursor is not None and limit is not None
        return Page(cursor=cursor, limit=limit)


@dataclass(frozen=True, slots=True)
class Page:
    cursor: int
    limit: int

    def of(self, queryset: QuerySet[Any]) -> tuple[list[Any], int | None]:
        """One page of rows and the cursor of the next one (None at the end), without a COUNT."""
        rows = list(queryset[self.cursor : self.cursor + self.limit + 1])
        more = len(rows) > self.limit
        return rows[: self.limit], (self.cursor + self.limit if more else None)


def is_uuid(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def http_url(value: str, name: str) -> str:
    """An http(s) URL with a host and no credentials in it."""
    try:
        parts = urlsplit(value)
        host = parts.hostname
    except ValueError:
        raise Invalid(f"{name} is not a URL") from None
    if parts.scheme not in ("https", "http") or not host:
        raise Invalid(f"{name} must be an http(s) URL")
    if parts.username or parts.password:
        raise Invalid(f"{name} must not carry credentials")
    return value


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
