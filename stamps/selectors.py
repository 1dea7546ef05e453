"""Reads over stored stamps: who may see them, comparing two."""

import json
from collections.abc import Iterator
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


def standing_handler_tables() -> Iterator[tuple[Persona, dict[str, HandlerRule]]]:
    """Each standing persona's handler table, from its current generation's stored stamp.

    For the boot checks of the apps that serve those handlers. Nothing before the tables are
    migrated; a stamp that does not parse is left to the stamp checks, which report it.
    """
    try:
        generations = list(
            Generation.objects.filter(number=F("persona__generation"), standing=True)
            .select_related("persona", "stamp")
            .order_by("persona_id")
        )
    except DatabaseError:
        return
    for generation in generations:
        stored = getattr(generation, "stamp", None)
        if stored is None:
            continue
        try:
            yield generation.persona, handler_table(stored.data)
        except MalformedStamp:
            continue


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
