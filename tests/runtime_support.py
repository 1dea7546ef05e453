"""Helpers of the runtime tests: standing personas with real stamps, and calls through handle()."""

import itertools
from typing import Any

from django.contrib.auth.models import AbstractUser

from personas.models import Persona, PersonaClass
from runtime.handler import handle
from stamps.profiles import required_tools
from tests.factories import address, make_agent, make_owner, make_persona

_correlations = itertools.count(1)

CLASS_ADDRESSES = {
    PersonaClass.SECRETARY: "root/secretary",
    PersonaClass.TEAM_COORDINATOR: "work/coordinator",
    PersonaClass.PROJECT_LEAD: "work/core/lead",
    PersonaClass.CODER_DEPUTY: "work/core/deputy",
}


def standing_persona(
    owner: AbstractUser | None = None,
    *,
    persona_class: str = PersonaClass.CODER_DEPUTY,
    extra: tuple[str, ...] = (),
    **fields: Any,
) -> Persona:
    """A persona of `persona_class` whose generation stands: its stamp file is on disk."""
    owner = owner or make_owner()
    agent = fields.pop("agent", None) or make_agent(owner)
    verbs = list(required_tools(persona_class))
    fields.setdefault("verb_subset", verbs + [verb for verb in extra if verb not in verbs])
    fields.setdefault("queues", ["reviews"])
    fields.setdefault("address", address(CLASS_ADDRESSES[PersonaClass(persona_class)]))
    persona = make_persona(agent, persona_class=persona_class, **fields)
    assert persona.standing is True, persona.generations.first().not_standing_reasons
    return persona


def correlation() -> str:
    return f"corr-{next(_correlations)}"


def call(
    persona: Persona,
    tool: str,
    arguments: dict[str, Any] | None = None,
    correlation_id: str | None = None,
) -> dict[str, Any]:
    return handle(persona, tool, arguments or {}, correlation_id or correlation())
