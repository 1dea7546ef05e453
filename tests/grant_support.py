"""What the grant's tests share (stamps.grant): a persona changed through the API as its owner,
what runs after a write, a generation left broken by a write made before the door refused it, a
creation that would stand at once, and the pinned grant a peer reads on the card."""

import json
from typing import Any

from django.db import transaction
from django.test import Client

from cards.rendering import PINNED_GRANT_EXTENSION
from personas import services
from personas.models import Persona, PersonaClass
from personas.services.generations import _settle_generation
from settling.publication import publish_generation
from stamps.models import CapabilityStamp
from tests.factories import CLASS_ADDRESSES, address, run_on_commit, standing_verbs
from tests.owner_clients import token_client


def url(persona: Persona) -> str:
    return f"/api/personas/{persona.uuid}/"


def patch(persona: Persona, **changes: Any) -> Any:
    with run_on_commit():
        return token_client(persona.agent.owner).patch(url(persona), changes, format="json")


def state(persona: Persona) -> tuple[int, bool | None, str]:
    """What runs: the generation, whether it stands, and the stamp the runtime reads."""
    persona = Persona.objects.get(pk=persona.pk)
    stamp = CapabilityStamp.objects.filter(
        generation__persona=persona, generation_number=persona.generation
    ).first()
    return persona.generation, persona.standing, stamp.stamp_hash if stamp else ""


def broken_generation(persona: Persona, verb: str) -> Persona:
    """A generation with a verb its class may not have, as a write made before the door refused
    it left one: recorded as not standing, the generation before it stood."""
    with run_on_commit(), transaction.atomic():
        locked = Persona.objects.select_for_update().get(pk=persona.pk)
        locked.verb_subset = [*locked.verb_subset, verb]
        _settle_generation(locked, services.current_skill_map(), by_owner=True)
        locked.save()
    publish_generation(persona.pk)
    persona.refresh_from_db()
    assert persona.standing is False
    return persona


# A coder deputy's class tools: list_todos is granted to the agent but not yet to the persona.
ADDED = "list_todos"


def new_persona(agent: Any, **overrides: Any) -> dict[str, Any]:
    """A creation that would stand at once: the class tools and a verb the runtime can show."""
    body = {
        "agent": agent.pk,
        "name": "Created",
        "system_prompt": "You review pull requests. Be precise and kind.",
        "verb_subset": standing_verbs(PersonaClass.CODER_DEPUTY, ADDED),
        "queues": ["reviews"],
        "persona_class": PersonaClass.CODER_DEPUTY,
        "address": address(CLASS_ADDRESSES[PersonaClass.CODER_DEPUTY]).path,
    }
    return {**body, **overrides}


def fetch_card(persona: Persona) -> dict[str, Any]:
    response = Client().get(persona.card_path)
    assert response.status_code == 200, response.content
    return json.loads(response.content)


def pin_of(card: dict[str, Any]) -> dict[str, Any]:
    [pin] = [e for e in card["capabilities"]["extensions"] if e["uri"] == PINNED_GRANT_EXTENSION]
    return pin


def params(persona: Persona) -> dict[str, Any]:
    return pin_of(fetch_card(persona))["params"]
