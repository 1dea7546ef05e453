"""The OpenAPI 3 schema of Virgo's HTTP surface (drf-spectacular), served at /api/schema/.

The DRF views describe their bodies through their serializers. This module adds what a
serializer cannot say: the error answers every operation shares (400 for what breaks the
schema, 422 for what the domain refuses, 401/403, 404, 413 and 415 for bodies, 429 with
Retry-After), and the endpoints that are plain Django
views (the well-known Agent Card, the health probes, the hub's signed callback), which
drf-spectacular does not see. A status a view can answer is documented here; schemathesis
(tests/test_schemathesis_live.py) holds the live server to it.
"""

import copy
from typing import Any

from django.conf import settings
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.utils import OpenApiResponse
from rest_framework.views import APIView

# Reusable schemas, registered as components under these names.
ERROR = {
    "type": "object",
    "description": "A refusal: what went wrong, and (on most refusals) a stable code.",
    "required": ["detail"],
    "properties": {"detail": {"type": "string"}, "code": {"type": "string"}},
}
FIELD_ERRORS = {
    "type": "object",
    "description": (
        "The request was refused before anything was written. Each key names a field (or "
        "`non_field_errors`, or `detail` for a body that is not JSON); its value says why: a "
        "list of reasons, or for a list field an object keyed by the position of each bad item."
    ),
    "minProperties": 1,
    "additionalProperties": {
        "anyOf": [{"type": "string"}, {"type": "array"}, {"type": "object"}],
    },
}
PAYLOAD_TOO_LARGE = {
    "type": "object",
    "required": ["detail", "code", "limit"],
    "properties": {
        "detail": {"type": "string"},
        "code": {"type": "string", "enum": ["payload_too_large"]},
        "limit": {"type": "integer", "description": "The largest body accepted, in bytes."},
    },
}
RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before the budget allows another request.",
        "required": True,
        "schema": {"type": "integer", "minimum": 1},
    }
}
COMPONENTS = {"Error": ERROR, "FieldErrors": FIELD_ERRORS, "PayloadTooLarge": PAYLOAD_TOO_LARGE}

BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(description: str, name: str, **extra: Any) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": _ref(name)}},
        **copy.deepcopy(extra),
    }


def _limit_description() -> str:
    return f"The body is over {settings.VIRGO_MAX_BODY_BYTES} bytes; nothing of it was read."


class VirgoAutoSchema(AutoSchema):
    """drf-spectacular's AutoSchema, plus the error answers each operation can give."""

    def _get_response_bodies(self, direction: str = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        for name, schema in COMPONENTS.items():
            # A copy: the postprocessing hooks rewrite component schemas in place.
            self.registry.register_on_missing(
                ResolvedComponent(
                    name=name,
                    type=ResolvedComponent.SCHEMA,
                    object=name,
                    schema=copy.deepcopy(schema),
                )
            )
        for status, response in self._error_responses().items():
            responses.setdefault(status, response)
        if "429" in responses:
            responses["429"].setdefault("headers", {}).update(copy.deepcopy(RETRY_AFTER))
        return responses

    def _error_responses(self) -> dict[str, Any]:
        errors: dict[str, Any] = {}
        if self.method in BODY_METHODS:
            errors["400"] = _json(
                "The body breaks a rule this schema states (a type, length, pattern, choice, "
                "required or unknown key); each field says which.",
                "FieldErrors",
            )
        elif self._is_paginated_list():
            errors["400"] = _json("A paging value is not one this schema allows.", "FieldErrors")
        if self.method in BODY_METHODS or self.method == "DELETE":
            errors["422"] = _json(
                "The request is well formed, and refused by a rule no schema can state: an "
                "object the caller cannot see, a value outside the agent's grant, a name or "
                "binding already taken, credentials that match no account, an object still in "
                "use. Each field says why; nothing was written.",
                "FieldErrors",
            )
        # Every DRF view authenticates what it is sent: a bad token is a 401 even where none is
        # needed, and a session write without its CSRF token is a 403.
        errors["401"] = _json(
            "No credentials where they are required, or a token that is not valid.",
            "Error",
            headers={
                "WWW-Authenticate": {
                    "description": "How to authenticate: `Token`.",
                    "schema": {"type": "string"},
                }
            },
        )
        errors["403"] = _json(
            "Not allowed: no credentials where the session is asked first, a session write "
            "without its CSRF token, or an operation the caller's role does not permit.",
            "Error",
        )
        if "{" in self.path or self._is_paginated_list():
            errors["404"] = _json(
                "No such object among those the caller may see (another owner's objects are "
                "indistinguishable from missing ones), or a cursor that is not valid.",
                "Error",
            )
        if self.method in BODY_METHODS:
            errors["413"] = _json(_limit_description(), "PayloadTooLarge")
            errors["415"] = _json("The body is not in a media type this operation reads.", "Error")
        if self._is_throttled():
            errors["429"] = _json(
                "The caller's request budget is spent.", "Error", headers=RETRY_AFTER
            )
        return errors

    def _is_paginated_list(self) -> bool:
        return self.method == "GET" and self._get_paginator() is not None and self._is_list_view()

    def _is_throttled(self) -> bool:
        view: APIView = self.view
        for throttle in view.get_throttles():
            counted = getattr(throttle, "counted_methods", None)
            if counted is None or self.method in counted:
                return True
        return False


# Plain Django views --------------------------------------------------------------------------

_CARD_PATH = "/a/{persona_id}/.well-known/agent-card.json"


def _card_operation(method: str) -> dict[str, Any]:
    validators = {
        "ETag": {"schema": {"type": "string"}, "required": True},
        "Last-Modified": {"schema": {"type": "string"}, "required": True},
        "Cache-Control": {"schema": {"type": "string"}, "required": True},
    }
    card = {
        "type": "object",
        "description": (
            "A schema-valid A2A Agent Card (a2a-sdk's AgentCard), with `signatures` (A2A v1.0 "
            "§8.4) verifiable against /.well-known/jwks.json."
        ),
        "required": ["name", "description", "supportedInterfaces", "version", "skills"],
    }
    return {
        "operationId": f"agent_card_{method}",
        "summary": "One persona's A2A Agent Card",
        "description": (
            "Public for advertised personas (discoverable, and standing on a valid stamp); the "
            "owner, signed in, also sees an unlisted one. Read-only: any other method is 405. "
            "The url on the card is a discovery identifier, never a work-intake channel. "
            "Rate-limited per source address."
        ),
        "tags": ["cards"],
        "security": [{}, {"cookieAuth": []}],
        "parameters": [
            {
                "name": "persona_id",
                "in": "path",
                "required": True,
                "schema": {"type": "string", "format": "uuid"},
            },
            {
                "name": "If-None-Match",
                "in": "header",
                "required": False,
                "schema": {"type": "string"},
            },
            {
                "name": "If-Modified-Since",
                "in": "header",
                "required": False,
                "schema": {"type": "string"},
            },
        ],
        "responses": {
            "200": {
                "description": "The card." if method == "get" else "The card's headers.",
                "headers": validators,
                **({"content": {"application/json": {"schema": card}}} if method == "get" else {}),
            },
            "304": {"description": "The caller's copy is current.", "headers": validators},
            "404": _json(
                "No card is published at this address (missing and hidden look the same).",
                "Error",
            ),
            "412": _json("If-Match or If-Unmodified-Since did not match the card.", "Error"),
            "413": _json("The card endpoint accepts no body.", "Error"),
            "429": _json("Too many card requests from this address.", "Error", headers=RETRY_AFTER),
        },
    }


def _jwks_operation(method: str) -> dict[str, Any]:
    validators = {
        "ETag": {"schema": {"type": "string"}, "required": True},
        "Cache-Control": {"schema": {"type": "string"}, "required": True},
    }
    jwks = {
        "type": "object",
        "description": "An RFC 7517 JWK Set: the public keys whose kids cards' signatures name.",
        "required": ["keys"],
        "properties": {"keys": {"type": "array", "items": {"type": "object"}}},
    }
    return {
        "operationId": f"jwks_{method}",
        "summary": "The keys that sign Virgo's cards",
        "description": (
            "Public. Exactly the keys that sign cards now (the active key and any key in its "
            "rotation grace); a retired or revoked key is absent. Peers fetch it from the origin "
            "they pinned, never from a card's jku. Rate-limited per source address, with cards."
        ),
        "tags": ["cards"],
        "security": [{}],
        "parameters": [
            {
                "name": "If-None-Match",
                "in": "header",
                "required": False,
                "schema": {"type": "string"},
            }
        ],
        "responses": {
            "200": {
                "description": "The JWKS." if method == "get" else "The JWKS's headers.",
                "headers": validators,
                **({"content": {"application/json": {"schema": jwks}}} if method == "get" else {}),
            },
            "304": {"description": "The caller's copy is current.", "headers": validators},
            "412": _json("If-Match did not match the JWKS.", "Error"),
            "413": _json("The JWKS endpoint accepts no body.", "Error"),
            "429": _json("Too many requests from this address.", "Error", headers=RETRY_AFTER),
        },
    }


def _status_list_operation(method: str) -> dict[str, Any]:
    validators = {
        "ETag": {"schema": {"type": "string"}, "required": True},
        "Cache-Control": {"schema": {"type": "string"}, "required": True},
    }
    credential = {
        "type": "object",
        "description": (
            "A W3C Bitstring Status List credential (statusPurpose revocation), signed by the "
            "card keys: `signatures` as a card's, verifiable against /.well-known/jwks.json. "
            "credentialSubject.encodedList is 'u' + base64url(gzip(bits)); bit i set means the "
            "card whose revocation-status extension names index i is revoked."
        ),
        "required": ["type", "credentialSubject"],
        "properties": {
            "type": {"type": "array", "items": {"type": "string"}},
            "credentialSubject": {"type": "object"},
        },
    }
    operation = _jwks_operation(method)
    operation.update(
        operationId=f"revocation_status_list_{method}",
        summary="The revocation status of every card, in one signed list",
        description=(
            "Public. One fetch tells a peer which of the cards it holds are revoked: each card "
            "names its index here. A revocation sets its bit in the transaction that revokes, "
            "and every web process serves it (with a new ETag) on its next request. "
            "Rate-limited per source address, with cards."
        ),
    )
    operation["responses"]["200"] = {
        "description": "The list." if method == "get" else "The list's headers.",
        "headers": validators,
        **({"content": {"application/json": {"schema": credential}}} if method == "get" else {}),
    }
    operation["responses"]["412"] = _json("If-Match did not match the list.", "Error")
    operation["responses"]["413"] = _json("The status list accepts no body.", "Error")
    return operation


def _health_operation(name: str, summary: str, ready: bool) -> dict[str, Any]:
    if ready:
        body = {
            "type": "object",
            "required": ["status", "checks", "failed", "backlog"],
            "properties": {
                "status": {"type": "string", "enum": ["ready", "unavailable"]},
                "checks": {"type": "object", "additionalProperties": {"type": "string"}},
                "failed": {"type": "array", "items": {"type": "string"}},
                "backlog": {
                    "type": "object",
                    "nullable": True,
                    "description": "Personas owed work, by kind (stamp, card, recompute); null "
                    "when it could not be counted. Never a reason for a 503.",
                    "additionalProperties": {"type": "integer", "minimum": 0},
                },
            },
        }
        responses = {
            "200": {"description": "Every check answered.", "content": _content(body)},
            "503": {"description": "The named checks failed.", "content": _content(body)},
        }
    else:
        body = {
            "type": "object",
            "required": ["status"],
            "properties": {"status": {"type": "string", "enum": ["ok"]}},
        }
        responses = {"200": {"description": "The process answers.", "content": _content(body)}}
    return {
        "operationId": name,
        "summary": summary,
        "tags": ["health"],
        "security": [{}],
        "responses": responses,
    }


def _content(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _channel_callback() -> dict[str, Any]:
    refusal = {
        "type": "object",
        "required": ["error", "detail"],
        "properties": {"error": {"type": "string"}, "detail": {"type": "string"}},
    }

    def refused(description: str) -> dict[str, Any]:
        return {"description": description, "content": _content(refusal)}

    return {
        "operationId": "channel_decision_callback",
        "summary": "The virgo-channel hub answers a confirmation request",
        "description": (
            "Server to server: the hub signs the exact body with the shared callback secret "
            "(HMAC-SHA256, `X-Virgo-Signature: t=<unix seconds>,v1=<hex>`). See docs/channel.md."
        ),
        "tags": ["channel"],
        # Not a security scheme: the signature covers the body, so it is a parameter of each
        # request, which a client computes (and a fuzzer varies) like any other.
        "security": [{}],
        "parameters": [
            {
                "name": "X-Virgo-Signature",
                "in": "header",
                "required": True,
                "description": "`t=<unix seconds>,v1=<hex HMAC-SHA256 of '<t>.' + body>`",
                "schema": {"type": "string", "maxLength": 128},
            }
        ],
        "requestBody": {
            "required": True,
            "content": _content(
                {
                    "type": "object",
                    "required": ["correlation_id", "decision"],
                    "properties": {
                        "correlation_id": {"type": "string"},
                        "decision": {"type": "string", "enum": ["approve", "deny"]},
                        "principal": {
                            "type": "object",
                            "required": ["kind", "id"],
                            "properties": {
                                "kind": {"type": "string", "enum": ["human", "persona"]},
                                "id": {"type": "string"},
                            },
                        },
                    },
                }
            ),
        },
        "responses": {
            "200": {
                "description": "The decision is recorded.",
                "content": _content(
                    {
                        "type": "object",
                        "required": ["correlation_id", "decision"],
                        "properties": {
                            "correlation_id": {"type": "string"},
                            "decision": {"type": "string"},
                        },
                    }
                ),
            },
            "400": refused("The body is not JSON, or not a decision."),
            "401": refused("The signature is missing, malformed, stale or wrong."),
            "403": refused("The principal may not answer this request."),
            "404": refused("No confirmation request has this correlation id."),
            "409": refused(
                "The request was never routed through the hub, or is decided, or these signed "
                "bytes were received before (`replayed`)."
            ),
            "413": {
                "description": "Callback bodies are bounded by VIRGO_CHANNEL_CALLBACK_MAX_BYTES "
                "(the callback's refusal) and by the site-wide body limit (the middleware's).",
                "content": _content({"anyOf": [refusal, _ref("PayloadTooLarge")]}),
            },
            "429": {
                **refused(
                    "Too many callbacks from this address (VIRGO_CHANNEL_CALLBACK_RATE_LIMIT)."
                ),
                "headers": copy.deepcopy(RETRY_AFTER),
            },
        },
    }


def add_plain_django_endpoints(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: the endpoints that are not DRF views."""
    paths = result.setdefault("paths", {})
    paths[_CARD_PATH] = {
        "get": _card_operation("get"),
        "head": _card_operation("head"),
    }
    paths["/.well-known/jwks.json"] = {
        "get": _jwks_operation("get"),
        "head": _jwks_operation("head"),
    }
    paths["/.well-known/status/revocation"] = {
        "get": _status_list_operation("get"),
        "head": _status_list_operation("head"),
    }
    paths["/healthz"] = {"get": _health_operation("healthz", "The process is alive", ready=False)}
    paths["/readyz"] = {
        "get": _health_operation(
            "readyz", "The database, the cache and the Celery broker answer", ready=True
        )
    }
    paths["/api/channel/decisions/"] = {"post": _channel_callback()}
    components = result.setdefault("components", {})
    for name, schema in COMPONENTS.items():
        components.setdefault("schemas", {}).setdefault(name, copy.deepcopy(schema))
    schemes = components.setdefault("securitySchemes", {})
    schemes.setdefault(
        "cookieAuth", {"type": "apiKey", "in": "cookie", "name": settings.SESSION_COOKIE_NAME}
    )
    result["paths"] = dict(sorted(paths.items()))
    return result


def refusal(description: str) -> OpenApiResponse:
    """A documented refusal with the shared `Error` body, for use in `extend_schema`."""
    return OpenApiResponse(response=_ref("Error"), description=description)


def field_errors(description: str) -> OpenApiResponse:
    """A documented refusal with the shared `FieldErrors` body, for use in `extend_schema`."""
    return OpenApiResponse(response=_ref("FieldErrors"), description=description)
