"""Render each persona generation's card once, and keep its bytes for the endpoint.

The endpoint serves the stored bytes with the stored validators (ETag, Last-Modified), so a
card is serialised and hashed once per generation, never per request. Publishing happens in
the Celery task that follows a change, and on the fly when the endpoint finds the stored card
missing or behind; both may race, so every write is conditional on the generation.
"""

import hashlib
import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import DateTimeField, F, Q, QuerySet, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from cards import keys
from cards.base_url import claim_base_url
from cards.fastpath import card_changed
from cards.models import PublishedCard
from cards.rendering import FIRST_GRANT_DEFINITION, build_card, pinned_grant, validate_card
from cards.signing import (
    card_payload,
    current_marker,
    resigned_card_body,
    signed_card_body,
    signers_marker,
)
from cards.status_list import status_extension
from personas.models import Generation, Persona
from personas.status_list import status_indexes
from virgo.bulk import update_each

# HTTP dates have one-second resolution: each generation's Last-Modified is at least this much
# later than the one it replaces, so If-Modified-Since never mistakes a new card for the old.
_HTTP_DATE_STEP = timedelta(seconds=1)


def render_card(persona: Persona, generation: Generation | None = None) -> dict[str, Any]:
    """The card of `persona.generation`, from that generation's composition, unsigned."""
    return _rendered(persona, generation)[0]


def _rendered(
    persona: Persona, generation: Generation | None = None, status_index: int | None = None
) -> tuple[dict[str, Any], bytes]:
    """render_card, validated, and the payload its signatures cover. `status_index` is the
    generation's index in the revocation status list, when the caller has read it already."""
    if generation is None:
        generation = persona.generations.get(number=persona.generation)
    if status_index is None:
        status_index = status_indexes([generation.pk])[generation.pk]
    card = build_card(
        generation.composition,
        generation=generation.number,
        system_prompt=persona.system_prompt,
        pin=_pin(generation),
        status=status_extension(status_index),
    )
    validate_card(card)
    return card, card_payload(card)


def unsigned_card(body: bytes) -> dict[str, Any]:
    """A served card without its signatures."""
    card: dict[str, Any] = json.loads(body)
    card.pop("signatures", None)
    return card


def _pin(generation: Generation) -> dict[str, object] | None:
    """The pinned-grant extension once the stamp is built; a card rendered before is owed
    again when it is (PublishedCard.is_current_for)."""
    if not generation.stamp_hash:
        return None
    return pinned_grant(
        generation=generation.number,
        stamp_hash=generation.stamp_hash,
        grant_digest=generation.grant_digest,
        grant_definition=generation.grant_definition or FIRST_GRANT_DEFINITION,
    )


def card_etag(body: bytes) -> str:
    """A strong validator: it changes exactly when the served bytes change."""
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def publish_card(persona: Persona) -> PublishedCard:
    """Store the card of `persona.generation` and return the newest stored card.

    A card rendered under another VIRGO_PUBLIC_BASE_URL is rendered again (a new ETag, a later
    Last-Modified), once the installation's public base URL has moved to this one: a process
    configured with another URL than the installation's publishes nothing (BaseUrlMismatch,
    cards.base_url). Never replaces a newer generation with an older one: a publisher holding a
    stale persona (a slow task, an endpoint request that read just before an update) leaves
    the newer card in place and gets it back.
    """
    # Refused before the card's token moves: a misconfigured machine asked for the card on
    # every request would otherwise send every other process back to the database each time.
    claim_base_url()
    try:
        return _publish(persona)
    finally:
        # After the card and the stamp outcome before it are committed: a web process that
        # loaded the persona while they were being written reloads it (cards.fastpath).
        card_changed([persona.uuid])


def _publish(persona: Persona) -> PublishedCard:
    stored = PublishedCard.objects.filter(persona_id=persona.pk).first()
    if stored is not None and stored.is_current_for(persona):
        return stored
    generation = persona.generations.get(number=persona.generation)
    signers = keys.signers()
    card, payload = _rendered(persona, generation)
    body, payload = signed_card_body(card, signers, payload)
    fields = {
        "generation": persona.generation,
        "body": body,
        "payload": payload,
        "etag": card_etag(body),
        "base_url": settings.VIRGO_PUBLIC_BASE_URL,
        "pinned": bool(generation.stamp_hash),
        "signed_by": signers_marker(signers),
        "status_listed": True,
    }
    now = timezone.now().replace(microsecond=0)
    if stored is None:
        created = _create(persona, fields, now)
        if created is not None:
            return created
    same = Q(generation=persona.generation)
    behind = Q(generation__lt=persona.generation) | same & ~Q(
        base_url=settings.VIRGO_PUBLIC_BASE_URL
    )
    if fields["pinned"]:
        behind |= same & Q(pinned=False)
    # Published before cards named their place in the status list (VX-TRUST-7).
    behind |= same & Q(status_listed=False)
    PublishedCard.objects.filter(behind, persona_id=persona.pk).update(
        **fields,
        last_modified=Greatest(
            Value(now, output_field=DateTimeField()),
            F("last_modified") + _HTTP_DATE_STEP,
            output_field=DateTimeField(),
        ),
    )
    return PublishedCard.objects.get(persona_id=persona.pk)


def publish_cards(personas: Sequence[Persona], generations: Sequence[Generation] = ()) -> None:
    """publish_card for many personas (the fan-out's batches): one lock, one insert, one update.

    The same rule as publish_card: a stored card is replaced only by a newer generation's, and
    each new Last-Modified is at least a second after the one it replaces. `generations` are
    current generations the caller has read already (their compositions are most of a batch's
    read); the rest are read here. Refused, as publish_card is, where this process's public
    base URL is not the installation's.
    """
    claim_base_url()
    try:
        _publish_many(personas, generations)
    finally:
        card_changed([persona.uuid for persona in personas])


def _publish_many(personas: Sequence[Persona], known: Sequence[Generation]) -> None:
    with transaction.atomic():
        stored = {
            card.persona_id: card
            # Not the bytes: an owed card gets new ones, a current one is left as it is.
            for card in PublishedCard.objects.select_for_update()
            .defer("body", "payload")
            .filter(persona__in=[persona.pk for persona in personas])
        }
        owed = [
            persona
            for persona in personas
            if persona.pk not in stored or not stored[persona.pk].is_current_for(persona)
        ]
        generations = {
            (generation.persona_id, generation.number): generation for generation in known
        }
        unread = [
            persona for persona in owed if (persona.pk, persona.generation) not in generations
        ]
        if unread:
            generations |= {
                (generation.persona_id, generation.number): generation
                for generation in Generation.objects.filter(
                    persona__in=[persona.pk for persona in unread],
                    number__in={persona.generation for persona in unread},
                )
            }
        indexes = status_indexes(
            generations[(persona.pk, persona.generation)].pk for persona in owed
        )
        now = timezone.now().replace(microsecond=0)
        created: list[PublishedCard] = []
        replaced: list[PublishedCard] = []
        signers = keys.signers() if owed else []
        marker = signers_marker(signers)
        for persona in owed:
            generation = generations[(persona.pk, persona.generation)]
            card_document, payload = _rendered(persona, generation, indexes[generation.pk])
            body, payload = signed_card_body(card_document, signers, payload)
            card = stored.get(persona.pk)
            if card is None:
                card = PublishedCard(persona_id=persona.pk, last_modified=now)
                created.append(card)
            else:
                card.last_modified = max(now, card.last_modified + _HTTP_DATE_STEP)
                replaced.append(card)
            card.generation, card.body, card.etag = persona.generation, body, card_etag(body)
            card.base_url, card.signed_by = settings.VIRGO_PUBLIC_BASE_URL, marker
            card.payload, card.pinned = payload, bool(generation.stamp_hash)
            card.status_listed = True
        PublishedCard.objects.bulk_create(created)
        update_each(
            replaced,
            [
                *("generation", "body", "etag", "base_url", "pinned"),
                *("signed_by", "payload", "last_modified", "status_listed"),
            ],
        )


def cards_owed_signatures(marker: str | None = None) -> QuerySet[PublishedCard]:
    """Published cards not signed by exactly the current signing set (a rotation, retirement or
    revocation since), by persona id."""
    if marker is None:
        marker = current_marker()
    return PublishedCard.objects.exclude(signed_by=marker).order_by("persona_id")


def resign_cards(persona_ids: Sequence[int]) -> int:
    """Sign again, by the current signing set, the stored cards of these personas that are owed
    it; how many were. The card itself is not rendered again: its stored bytes, without their
    signatures, are what the new signatures cover.

    Idempotent and resumable: what is owed is read under a lock, so a batch redone after a
    worker died signs only what the dead run did not commit. A new ETag and a Last-Modified a
    second on, as for any new card bytes; one statement writes the batch (a second the cards
    published before cards were signed).
    """
    signers = keys.signers()
    marker = signers_marker(signers)
    with transaction.atomic():
        owed = list(
            PublishedCard.objects.select_for_update()
            .filter(persona__in=list(persona_ids))
            .exclude(signed_by=marker)
            .only("persona_id", "body", "payload", "last_modified")
        )
        now = timezone.now().replace(microsecond=0)
        resigned, first_signed = [], []
        for card in owed:
            if card.payload:
                card.body = resigned_card_body(bytes(card.body), signers, bytes(card.payload))
                resigned.append(card)
            else:
                # Published before cards were signed: no payload kept yet.
                card.body, card.payload = signed_card_body(unsigned_card(bytes(card.body)), signers)
                first_signed.append(card)
            card.etag, card.signed_by = card_etag(card.body), marker
            card.last_modified = max(now, card.last_modified + _HTTP_DATE_STEP)
        # The payload a card was signed over stays as it is: not written again (a third of
        # the bytes a rotation would write).
        update_each(resigned, ["body", "etag", "signed_by", "last_modified"])
        update_each(first_signed, ["body", "payload", "etag", "signed_by", "last_modified"])
    if owed:
        card_changed(
            Persona.objects.filter(pk__in=[card.persona_id for card in owed]).values_list(
                "uuid", flat=True
            )
        )
    return len(owed)


def _create(persona: Persona, fields: dict[str, object], now: datetime) -> PublishedCard | None:
    """Insert the first card; None when a concurrent publisher inserted one first."""
    try:
        with transaction.atomic():
            return PublishedCard.objects.create(persona_id=persona.pk, last_modified=now, **fields)
    except IntegrityError:
        return None
