"""The well-known Agent Card endpoint (SPEC-0009 "Well-Known Card Endpoint").

A plain Django view rather than DRF: this is the hot path, and DRF's negotiation and
authentication would cost more than everything else the request does (PERF-NOTES.md). It is reached
only by requests the fast path (cards.fastpath) did not answer from memory: the first request
for a card in each web process, hidden or missing personas, the owner's preview, other methods
and errors. Per request it counts once against the rate limit (or reuses the fast path's count)
and makes one SQL query for the persona and its stored card; the bytes and validators were
computed once per generation.
"""

import json
import logging
import time
import uuid

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseNotModified, JsonResponse
from django.utils.cache import get_conditional_response
from django.utils.http import http_date
from django.views.decorators.csrf import csrf_exempt

from cards import fastpath, keys
from cards.base_url import BaseUrlMismatch
from cards.keys import public_jwks
from cards.models import PublishedCard
from cards.publishing import card_etag, publish_card
from cards.signing import sign_document
from cards.status_list import current_list
from cards.tombstones import tombstone_bytes, tombstone_document
from personas.models import Persona, PurgedPersona, Tombstone

logger = logging.getLogger(__name__)

READ_METHODS = fastpath.READ_METHODS
RATE_LIMIT_GROUP = "virgo.agent-card"

# The columns the endpoint needs, so the hot query never drags prompts or compositions along.
_CARD_COLUMNS = (
    "uuid",
    "discoverable",
    "standing",
    "generation",
    "agent__owner_id",
    "published_card__generation",
    "published_card__body",
    "published_card__etag",
    "published_card__last_modified",
    "published_card__base_url",
    "published_card__pinned",
    "published_card__status_listed",
    "revoked_at",
    "revocation_reason",
)


def json_error(status: int, code: str, detail: str) -> JsonResponse:
    return JsonResponse({"detail": detail, "code": code}, status=status)


def not_found() -> JsonResponse:
    """One answer for a missing id and a hidden persona alike, so ids cannot be enumerated."""
    response = json_error(404, "not_found", "No agent card is published at this address.")
    response["Cache-Control"] = "no-store"
    return response


def _try_later(code: str, detail: str) -> JsonResponse:
    """503 with Retry-After, so a peer and a load balancer try another machine or later."""
    response = json_error(503, code, detail)
    response["Retry-After"] = str(settings.VIRGO_DEGRADED_RETRY_SECONDS)
    response["Cache-Control"] = "no-store"
    return response


def cannot_sign(refused: keys.CannotSign) -> JsonResponse:
    """What a document this process would have to sign answers while it cannot (VX-SCALE-4):
    503, never a 500. The reason goes to the operator's log only: it names keys."""
    logger.error("cannot sign a public document: %s", refused)
    return _try_later(
        "cannot_sign", "This server cannot sign documents right now; try again later."
    )


def base_url_mismatch(refused: BaseUrlMismatch) -> JsonResponse:
    """What a document this process would have to sign answers while its public base URL is not
    the installation's (VX-SCALE-4): 503, never a 500, and never a document signed under the
    wrong URL. Both URLs go to the operator's log."""
    logger.error("will not sign a public document: %s; %s", refused, refused.fix)
    return _try_later(
        "base_url_mismatch",
        "This server is not configured with this installation's public address; try again later.",
    )


@csrf_exempt  # Nothing here changes state; exemption lets unsafe methods reach their 405.
def agent_card(request: HttpRequest, persona_id: uuid.UUID) -> HttpResponse:
    """Serve exactly this persona's current card, publicly only while it is advertised."""
    usage = fastpath.count_card_request(request, str(persona_id))
    if usage.limited:
        response = json_error(429, "rate_limited", "Too many card requests from this address.")
        response["Retry-After"] = str(usage.retry_after)
        return response
    if request.method not in READ_METHODS:
        response = json_error(
            405, "method_not_allowed", "The agent card is read-only: use GET or HEAD."
        )
        response["Allow"] = ", ".join(READ_METHODS)
        return response
    if _declares_body(request):
        return json_error(413, "body_not_accepted", "The agent card endpoint accepts no body.")
    try:
        return _card_answer(request, persona_id, usage)
    except keys.CannotSign as refused:
        return cannot_sign(refused)
    except BaseUrlMismatch as refused:
        return base_url_mismatch(refused)


def _card_answer(
    request: HttpRequest, persona_id: uuid.UUID, usage: fastpath.Usage
) -> HttpResponse:
    """The card, its tombstone or 404: each of the first two may have to be signed here."""
    persona = (
        Persona.objects.select_related("published_card", "agent")
        .only(*_CARD_COLUMNS)
        .filter(uuid=persona_id)
        .first()
    )
    if persona is not None and persona.is_advertised:
        cache_control = f"public, max-age={settings.VIRGO_CARD_MAX_AGE}"
        card = _current_card(persona)
        fastpath.remember(
            str(persona_id),
            usage=usage,
            body=bytes(card.body),
            etag=card.etag,
            last_modified=int(card.last_modified.timestamp()),
            cache_control=cache_control,
        )
        return _card_response(request, card, cache_control)
    # Missing and hidden ids both consult the session, so their answers (headers included: the
    # session adds Vary: Cookie) are identical for everyone but the owner.
    signed_in = request.user.is_authenticated
    is_owner = persona is not None and signed_in and persona.agent.owner_id == request.user.pk
    if persona is not None and persona.standing is False and (persona.discoverable or is_owner):
        tombstone = persona.tombstone()
        if tombstone is not None:
            return _gone(persona.uuid, tombstone)
    if persona is None:
        purged = PurgedPersona.objects.filter(uuid=persona_id, listed=True).first()
        return not_found() if purged is None else _gone(purged.uuid, purged.tombstone)
    if not is_owner:
        return not_found()
    # The owner previewing an unlisted persona: never kept by shared caches, and always
    # revalidated so an edit shows on the next load.
    return _card_response(request, _current_card(persona), "private, no-cache")


def _gone(persona_id: uuid.UUID, tombstone: Tombstone) -> HttpResponse:
    """410 Gone with the tombstone of a revoked persona or current generation (VX-TRUST-5).

    Public when the persona was listed (peers may hold its card), else for its owner only: an
    unlisted id answers 404 to everyone else, revoked or not. A purged persona's tombstone
    (personas.models.PurgedPersona) is answered as its persona's was, while it was listed.
    """
    document = tombstone_document(
        persona_id=str(persona_id),
        revoked_at=tombstone.revoked_at,
        reason_code=tombstone.reason,
        generation=tombstone.generation,
    )
    # Signed per answer (a tombstone is rare, and signed by whatever key signs cards now, so a
    # rotation or a key revocation needs nothing re-signed); the document is the same each time.
    signed = sign_document(document)
    response = HttpResponse(tombstone_bytes(signed), status=410, content_type="application/json")
    response["Cache-Control"] = "no-store"
    return response


def _declares_body(request: HttpRequest) -> bool:
    """Whether the request carries content (chunked bodies were counted by the middleware)."""
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0) != 0
    except ValueError:
        return True


def _current_card(persona: Persona) -> PublishedCard:
    try:
        card: PublishedCard | None = persona.published_card
    except PublishedCard.DoesNotExist:
        card = None
    if card is None or not card.is_current_for(persona):
        # The task that follows every change publishes the card; this covers a request that
        # arrives before it has run, and the first request after the base URL moved.
        try:
            card = publish_card(persona)
        except BaseUrlMismatch as refused:
            # The card as the installation published it, unchanged: signing it again under
            # this process's URL is what made two machines rewrite each other's cards on every
            # other request (VX-SCALE-4).
            if card is None or not card.is_current_for(persona, base_url=refused.recorded):
                raise
    return card


def _card_response(request: HttpRequest, card: PublishedCard, cache_control: str) -> HttpResponse:
    last_modified = int(card.last_modified.timestamp())
    precondition = get_conditional_response(request, etag=card.etag, last_modified=last_modified)
    if precondition is None:
        body = b"" if request.method == "HEAD" else card.body
        response = HttpResponse(body, content_type="application/json")
    elif precondition.status_code == 304:
        response = HttpResponseNotModified()
        # A 304 has no Content-Type to tell the CSP middleware this validates JSON; it must
        # not loosen the policy a cache stored with the card.
        response._csp_config = settings.VIRGO_JSON_CSP  # type: ignore[attr-defined]
    else:
        return json_error(
            412, "precondition_failed", "If-Match or If-Unmodified-Since did not match the card."
        )
    # The length of the card itself, also on HEAD (RFC 9110 8.6); it also keeps CommonMiddleware
    # from announcing "Content-Length: 0" on a 304, where the fast path's middleware removes it.
    response["Content-Length"] = str(len(card.body))
    response["ETag"] = card.etag
    response["Last-Modified"] = http_date(last_modified)
    response["Cache-Control"] = cache_control
    return response


# Counted against the same per-address budget as cards: a peer fetches a card and the JWKS that
# verifies it, and a client hammering either is one client.
_JWKS_RATE_KEY = "jwks"


@csrf_exempt  # As the card: nothing changes state, and unsafe methods get their 405.
def jwks(request: HttpRequest) -> HttpResponse:
    """`/.well-known/jwks.json`: the public keys that sign Virgo's cards (RFC 7517), public and
    cacheable; a retired or revoked key is gone from it on the next request."""
    usage = fastpath.count(request.META, _JWKS_RATE_KEY)
    if usage.limited:
        response = json_error(429, "rate_limited", "Too many requests from this address.")
        response["Retry-After"] = str(usage.retry_after)
        return response
    if request.method not in READ_METHODS:
        response = json_error(405, "method_not_allowed", "The JWKS is read-only: use GET or HEAD.")
        response["Allow"] = ", ".join(READ_METHODS)
        return response
    if _declares_body(request):
        return json_error(413, "body_not_accepted", "The JWKS endpoint accepts no body.")
    body = json.dumps(public_jwks(), separators=(",", ":"), sort_keys=True).encode()
    return public_document(
        request,
        body=body,
        etag=card_etag(body),
        name="the JWKS",
        max_age=settings.VIRGO_JWKS_MAX_AGE,
    )


def public_document(
    request: HttpRequest,
    *,
    body: bytes,
    etag: str,
    name: str,
    max_age: int,
    content_type: str = "application/json",
) -> HttpResponse:
    """A public, cacheable JSON document (the JWKS, the status list, the AI Catalog): the body
    or its headers, 304 to a peer holding `etag`, 412 to an If-Match that names another."""
    precondition = get_conditional_response(request, etag=etag)
    if precondition is None:
        response = HttpResponse(b"" if request.method == "HEAD" else body, content_type)
    elif precondition.status_code == 304:
        response = HttpResponseNotModified()
        # As for cards: a 304 must not loosen the JSON policy a cache stored with the body.
        response._csp_config = settings.VIRGO_JSON_CSP  # type: ignore[attr-defined]
    else:
        return json_error(412, "precondition_failed", f"If-Match did not match {name}.")
    response["Content-Length"] = str(len(body))
    response["ETag"] = etag
    response["Cache-Control"] = f"public, max-age={max_age}"
    return response


# Counted against the same per-address budget as cards and the JWKS: one client, one budget.
_STATUS_LIST_RATE_KEY = "status-list"


@csrf_exempt  # As the card: nothing changes state, and unsafe methods get their 405.
def status_list(request: HttpRequest) -> HttpResponse:
    """The revocation status list (VX-TRUST-7, cards.status_list): public, cacheable briefly,
    one query per request while it is unchanged, and 304 to a peer holding the current one."""
    usage = fastpath.count(request.META, _STATUS_LIST_RATE_KEY)
    if usage.limited:
        response = json_error(429, "rate_limited", "Too many requests from this address.")
        response["Retry-After"] = str(usage.retry_after)
        return response
    if request.method not in READ_METHODS:
        response = json_error(
            405, "method_not_allowed", "The status list is read-only: use GET or HEAD."
        )
        response["Allow"] = ", ".join(READ_METHODS)
        return response
    if _declares_body(request):
        return json_error(413, "body_not_accepted", "The status list endpoint accepts no body.")
    try:
        signed = current_list()
    except keys.CannotSign as refused:
        return cannot_sign(refused)
    except BaseUrlMismatch as refused:
        return base_url_mismatch(refused)
    # No cache keeps it past its validUntil (VX-TRUST-8), whatever max-age would allow.
    until = signed.validity.valid_until
    left = max(0, int(until.timestamp() - time.time()))
    response = public_document(
        request,
        body=signed.body,
        etag=signed.etag,
        name="the status list",
        max_age=min(settings.VIRGO_STATUS_LIST_MAX_AGE, left),
    )
    response["Expires"] = http_date(until.timestamp())
    return response
