"""Reads over stored stamps: who may see them, comparing two."""

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError, connection
from django.db.models import CharField, F, Func, QuerySet, Value

from personas import selectors
from personas.models import Generation, Persona
from stamps.models import CapabilityStamp
from stamps.projections import HandlerRule, handler_table
from virgo.canonical import MalformedStamp


def may_view_stamps(user: Any, persona: Persona) -> bool:
    """Stamps are owner-private: the persona's owner and superusers see them, nobody else."""
    return selectors.is_moderator(user) or selectors.owns(user, persona)


def generations_visible_to(user: Any, persona: Persona) -> QuerySet[Generation]:
    if not may_view_stamps(user, persona):
        return Generation.objects.none()
    return persona.generations.select_related("stamp").order_by("-number")


# Standing stamps standing_personas_granting reads at once (a page of digests costs about what a
# page of 500 does: fewer pages, each a few MB of bodies where no digest is read), and distinct
# tool lists it keeps.
_TABLES_BATCH = 2000
_TABLES_KEPT = 4096
# In the stored bytes (RFC 8785, keys sorted), the last member: the tools, up to the closing brace.
_TOOLS_MEMBER = b',"tools":'


class _ToolsDigest(Func):
    """PostgreSQL: the SHA-256 (hex) of a stored stamp's bytes from its tools member on, so a
    batch reads 64 characters per persona instead of every body, and a body only for a tool list
    not seen. Bytes without the member are digested whole, and read whole when first seen."""

    template = "encode(sha256(%(expressions)s), 'hex')"
    output_field = CharField()

    def __init__(self, body: str) -> None:
        start = Func(Value(_TOOLS_MEMBER), F(body), function="position", arg_joiner=" in ")
        super().__init__(Func(F(body), start, function="substring", arg_joiner=" from "))


def standing_personas_granting(
    wanted: Callable[[str], bool],
) -> Iterator[tuple[Persona, list[str]]]:
    """Each standing persona whose current generation's stored stamp grants a handler action
    `wanted` says yes to, with the names of the tools that grant them, in persona order.

    For the boot checks of the apps that serve those handlers (`virgo check`), which name such
    personas. Nothing before the tables are migrated; a stamp that does not parse is left to the
    stamp checks, which report it. Read in batches of column values, so memory does not grow with
    the fleet and only the personas named become model objects; and the tools granted are a
    function of the tool list alone, which personas made alike share, so each distinct list is
    parsed and asked about once (`_granted`) rather than every stamp in full. On PostgreSQL the
    list is told apart by a digest the database computes (_ToolsDigest), and only a list not
    seen yet is read.
    """
    # Read from the persona side, paged on its primary key: paged on the generation's persona_id
    # instead, PostgreSQL merge-joins the personas from the first one for every page (a page
    # read N personas in, the whole fleet's check quadratic in it).
    standing = Persona.objects.filter(
        generations__number=F("generation"),
        generations__standing=True,
        generations__stamp__isnull=False,
    ).order_by("pk")
    digested = connection.vendor == "postgresql"
    if digested:
        standing = standing.annotate(tools_digest=_ToolsDigest("generations__stamp__body"))
    granted: dict[bytes | str, list[str]] = {}
    last_persona = 0
    while True:
        try:
            if digested:
                digests = list(
                    standing.filter(pk__gt=last_persona).values_list("pk", "tools_digest")[
                        :_TABLES_BATCH
                    ]
                )
                tools_of = _tools_by_digest(digests, wanted, granted)
                rows = [(persona_id, tools_of[digest]) for persona_id, digest in digests]
            else:
                bodies = standing.filter(pk__gt=last_persona).values_list(
                    "pk", "generations__stamp__body"
                )[:_TABLES_BATCH]
                rows = [
                    (persona_id, _granted(bytes(body), wanted, granted))
                    for persona_id, body in bodies
                ]
        except DatabaseError:
            return
        if not rows:
            return
        granting = {persona_id: tools for persona_id, tools in rows if tools}
        personas = Persona.objects.in_bulk(list(granting))
        for persona_id, tools in granting.items():
            yield personas[persona_id], tools
        last_persona = rows[-1][0]


def _tools_by_digest(
    rows: list[tuple[int, str]],
    wanted: Callable[[str], bool],
    granted: dict[bytes | str, list[str]],
) -> dict[str, list[str]]:
    """The tools granted under each digest of a batch: those seen before as kept, the others
    worked out from one body each (one query for all of them)."""
    tools_of = {digest: granted[digest] for _, digest in rows if digest in granted}
    unseen = {digest: persona_id for persona_id, digest in rows if digest not in tools_of}
    bodies = dict(
        CapabilityStamp.objects.filter(
            generation__persona_id__in=unseen.values(),
            generation__number=F("generation__persona__generation"),
        ).values_list("generation__persona_id", "body")
    )
    for digest, persona_id in unseen.items():
        tools_of[digest] = _keep(granted, digest, _granted(bytes(bodies[persona_id]), wanted, {}))
    return tools_of


def _keep(granted: dict[bytes | str, list[str]], key: bytes | str, tools: list[str]) -> list[str]:
    if len(granted) >= _TABLES_KEPT:
        del granted[next(iter(granted))]
    granted[key] = tools
    return tools


def _granted(
    data: bytes, wanted: Callable[[str], bool], granted: dict[bytes | str, list[str]]
) -> list[str]:
    """The sorted names of the tools of stored stamp bytes whose handler action is wanted; none
    if the bytes do not parse.

    Stored bytes are the factory's canonical encoding, whose last member is the tools array: that
    text is the key, and it is read strictly (parse_strict, as a document of the tools alone)
    once. Bytes laid out otherwise (a row edited behind every guard) are read whole, as before.
    """
    start = data.rfind(_TOOLS_MEMBER)
    if start < 0 or not data.endswith(b"]}"):
        return _wanted_tools(_whole_table(data), wanted)
    tools = data[start + len(_TOOLS_MEMBER) : -1]
    if tools in granted:
        return granted[tools]
    return _keep(granted, tools, _wanted_tools(_whole_table(b'{"tools":' + tools + b"}"), wanted))


def _wanted_tools(table: dict[str, HandlerRule] | None, wanted: Callable[[str], bool]) -> list[str]:
    return sorted(rule.tool for action, rule in (table or {}).items() if wanted(action))


def _whole_table(data: bytes) -> dict[str, HandlerRule] | None:
    try:
        return handler_table(data)
    except MalformedStamp:
        return None


def stamp_document(stamp: CapabilityStamp) -> dict[str, Any]:
    return json.loads(stamp.data)


@dataclass
class StampDiff:
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    access_changed: list[tuple[str, str, str]] = field(default_factory=list)
    scope_changed: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.access_changed or self.scope_changed)


def stamp_diff(old: dict[str, Any], new: dict[str, Any]) -> StampDiff:
    """What changed from one generation's tools to another's."""
    before = {tool["name"]: tool for tool in old.get("tools", [])}
    after = {tool["name"]: tool for tool in new.get("tools", [])}
    diff = StampDiff(
        added=[name for name in after if name not in before],
        removed=[name for name in before if name not in after],
    )
    for name, tool in after.items():
        previous = before.get(name)
        if previous is None:
            continue
        if previous["access"] != tool["access"]:
            diff.access_changed.append((name, previous["access"], tool["access"]))
        if previous["scope"] != tool["scope"]:
            diff.scope_changed.append(name)
    return diff
