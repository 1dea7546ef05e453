"""Render each persona generation's card once, and keep its bytes for the endpoint."""

import hashlib
import json

from django.utils import timezone

from cards.models import PublishedCard
from cards.rendering import build_card, validate_card
from personas.models import Persona


def render_card_bytes(persona: Persona) -> bytes:
    generation = persona.generations.get(number=persona.generation)
    card = build_card(
        generation.composition, generation=generation.number, system_prompt=persona.system_prompt
    )
    validate_card(card)
    return json.dumps(card, ensure_ascii=False, separators=(",", ":")).encode()


def publish_card(persona: Persona) -> PublishedCard:
    """Store the card of the persona's current generation unless it is already stored."""
    existing = PublishedCard.objects.filter(persona=persona).first()
    if existing is not None and existing.generation == persona.generation:
        return existing
    body = render_card_bytes(persona)
    card, _ = PublishedCard.objects.update_or_create(
        persona=persona,
        defaults={
            "generation": persona.generation,
            "body": body,
            "etag": '"' + hashlib.sha256(body).hexdigest()[:32] + '"',
            "last_modified": timezone.now().replace(microsecond=0),
        },
    )
    return card
