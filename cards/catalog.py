"""`/.well-known/ard.json` (ARD v0.91), `/.well-known/ai-catalog.json` (its predecessor) and
`/robots.txt`: how an orchestrator finds the registry.

The catalog (AI Catalog 1.0, as ARD v0.9 §4 extends it) names this installation as its host and
holds one entry, the ARD registry (cards.ard). It names no persona: the listing stays behind
authentication (SPEC-0009), so the catalog says where to ask, not what is there. Served as the
JWKS is: public, ETag and 304, counted against the cards' per-address budget.
"""

import json
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe

from cards import fastpath
from cards.ard import entries
from cards.publishing import card_etag
from cards.signing import jwks_url
from cards.views import READ_METHODS, json_error, public_document

ARD_PATH = "/.well-known/ard.json"
CATALOG_PATH = "/.well-known/ai-catalog.json"
CATALOG_TYPE = "application/ai-catalog+json"
_RATE_KEY = "ai-catalog"


def catalog_document() -> dict[str, Any]:
    base = settings.VIRGO_PUBLIC_BASE_URL
    host = entries.installation_host()
    return {
        "specVersion": "1.0",
        "host": {
            "displayName": settings.VIRGO_PROVIDER_ORGANIZATION,
            "identifier": base + "/",
            "documentationUrl": base + "/",
            # The installation's own identity: the origin that signs every card, and its keys.
            "trustManifest": {
                "identity": base + "/",
                "identityType": "https",
                "attestations": [
                    {
                        "type": "card-signing-keys",
                        "uri": jwks_url(),
                        "mediaType": "application/jwk-set+json",
                    }
                ],
            },
        },
        "entries": [
            {
                "identifier": f"urn:air:{host}:registry:personas",
                "displayName": f"{settings.VIRGO_PROVIDER_ORGANIZATION}: persona registry",
                "type": entries.REGISTRY_TYPE,
                # The AI Catalog's own name for `type`, for readers of that specification.
                "mediaType": entries.REGISTRY_TYPE,
                "url": entries.api_base(),
                "description": (
                    "ARD registry (POST search, POST explore, GET agents) of the personas "
                    "their owners listed here, each a signed A2A Agent Card. Signed-in "
                    "callers only: an API token (Authorization: Token) or a session."
                ),
                "tags": ["registry", "a2a", "personas"],
            }
        ],
    }


@csrf_exempt  # Nothing here changes state; exemption lets unsafe methods reach their 405.
def ai_catalog(request: HttpRequest) -> HttpResponse:
    """The predecessor path, which ARD v0.91 consumers MAY consult."""
    return _catalog(request, content_type=CATALOG_TYPE)


@csrf_exempt
def ard(request: HttpRequest) -> HttpResponse:
    """ARD v0.91's path (§5.1: a consumer MUST fetch it): the same document, whose `entries` is
    all v0.91 requires (`specVersion` and `host`, the AI Catalog's, are ignored by its readers).
    v0.91 names no media type for it: plain JSON."""
    return _catalog(request, content_type="application/json")


def _catalog(request: HttpRequest, *, content_type: str) -> HttpResponse:
    usage = fastpath.count(request.META, _RATE_KEY)
    if usage.limited:
        response = json_error(429, "rate_limited", "Too many requests from this address.")
        response["Retry-After"] = str(usage.retry_after)
        return response
    if request.method not in READ_METHODS:
        response = json_error(405, "method_not_allowed", "The catalog is read-only: GET or HEAD.")
        response["Allow"] = ", ".join(READ_METHODS)
        return response
    body = json.dumps(catalog_document(), separators=(",", ":"), sort_keys=True).encode()
    return public_document(
        request,
        body=body,
        etag=card_etag(body),
        name="the catalog",
        max_age=settings.VIRGO_CARD_MAX_AGE,
        content_type=content_type,
    )


@require_safe
def robots(request: HttpRequest) -> HttpResponse:
    """Crawlers keep out of the admin and the API; agents find the catalog (ARD §6.1)."""
    lines = [
        "User-agent: *",
        "Disallow: /admin/",
        "Disallow: /api/",
        f"Agentmap: {settings.VIRGO_PUBLIC_BASE_URL}{ARD_PATH}",
        f"Agentmap: {settings.VIRGO_PUBLIC_BASE_URL}{CATALOG_PATH}",
    ]
    return HttpResponse("\n".join(lines) + "\n", content_type="text/plain; charset=utf-8")
