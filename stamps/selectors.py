"""Reads over stored stamps: who may see them, comparing two."""

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError
from django.db.models import F, QuerySet

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


# Standing stamps standing_personas_granting reads at once, and distinct tool lists it keeps.
_TABLES_BATCH = 500
_TABLES_KEPT = 4096
# In the stored bytes (RFC 8785, keys sorted), the last member: the tools, up to the closing brace.
_TOOLS_MEMBER = b',"tools":'


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
    parsed and asked about once (`_granted`) rather than every stamp in full.
    """
    standing = Generation.objects.filter(
        number=F("persona__generation"), standing=True, stamp__isnull=False
    ).order_by("persona_id")
    granted: dict[bytes, list[str]] = {}
    last_persona = 0
    while True:
        try:
            rows = list(
                standing.filter(persona_id__gt=last_persona).values_list(
                    "persona_id", "stamp__body"
                )[:_TABLES_BATCH]
            )
        except DatabaseError:
            return
        if not rows:
            return
        granting = {
            persona_id: tools
            for persona_id, body in rows
            if (tools := _granted(bytes(body), wanted, granted))
        }
        personas = Persona.objects.in_bulk(list(granting))
        for persona_id, tools in granting.items():
            yield personas[persona_id], tools
        last_persona = rows[-1][0]


def _granted(
    data: bytes, wanted: Callable[[str], bool], granted: dict[bytes, list[str]]
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
    if tools not in granted:
        if len(granted) >= _TABLES_KEPT:
            del granted[next(iter(granted))]
        granted[tools] = _wanted_tools(_whole_table(b'{"tools":' + tools + b"}"), wanted)
    return granted[tools]


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
