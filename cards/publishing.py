"""Render each persona generation's card once, and keep its bytes for the endpoint.

The endpoint serves the stored bytes with the stored validators (ETag, Last-Modified), so a
card is serialised and hashed once per generation, never per request. Publishing happens in
the Celery task that follows a change, and on the fly when the endpoint finds the stored card
missing or behind; both may race, so every write is conditional on the generation.
"""

import hashlib
import json
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import DateTimeField, F, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from cards.models import PublishedCard
from cards.rendering import build_card, validate_card
from personas.models import Persona

# HTTP dates have one-second resolution: each generation's Last-Modified is at least this much
# later than the one it replaces, so If-Modified-Since never mistakes a new card for the old.
_HTTP_DATE_STEP = timedelta(seconds=1)


def render_card_bytes(persona: Persona) -> bytes:
    generation = persona.generations.get(number=persona.generation)
    card = build_card(
        generation.composition, generation=generation.number, system_prompt=persona.system_prompt
    )
    validate_card(card)
    return json.dumps(card, ensure_ascii=False, separators=(",", ":")).encode()


def card_etag(body: bytes) -> str:
    """A strong validator: it changes exactly when the served bytes change."""
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def publish_card(persona: Persona) -> PublishedCard:
    """Store the card of `persona.generation` and return the newest stored card.

    Never replaces a newer generation with an older one: a publisher holding a stale persona
    (a slow task, an endpoint request that read just before an update) leaves the newer card
    in place and gets it back.
    """
    stored = PublishedCard.objects.filter(persona_id=persona.pk).first()
    if stored is not None and stored.generation >= persona.generation:
        return stored
    body = render_card_bytes(persona)
    fields = {"generation": persona.generation, "body": body, "etag": card_etag(body)}
    now = timezone.now().replace(microsecond=0)
    if stored is None:
        created = _create(persona, fields, now)
        if created is not None:
            return created
    PublishedCard.objects.filter(persona_id=persona.pk, generation__lt=persona.generation).update(
        **fields,
        last_modified=Greatest(
            Value(now, output_field=DateTimeField()),
            F("last_modified") + _HTTP_DATE_STEP,
            output_field=DateTimeField(),
        ),
    )
    return PublishedCard.objects.get(persona_id=persona.pk)


def _create(persona: Persona, fields: dict[str, object], now: datetime) -> PublishedCard | None:
    """Insert the first card; None when a concurrent publisher inserted one first."""
    try:
        with transaction.atomic():
            return PublishedCard.objects.create(persona_id=persona.pk, last_modified=now, **fields)
    except IntegrityError:
        return None
