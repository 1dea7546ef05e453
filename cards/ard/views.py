"""The ARD registry API: POST search, POST explore, GET agents and GET agents/{identifier} (ARD
v0.9 §7, v0.91 §5.3).

Authenticated like the directory (token or session), counted against the directory's
per-principal budget (one client harvesting either is one client), and limited to the personas
the directory lists, standing and unrevoked (cards.ard.matching.registry_personas). Refusals are
ARD's Appendix B: `{"errorCode", "message"}`, with the field at fault for a 400.
"""

import hashlib
import re
import uuid
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db.models import Q, QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cards.api import PrincipalRateThrottle
from cards.ard import entries, facets, federation, matching, paging
from cards.ard.requests import (
    Invalid,
    Query,
    StrictJSONParser,
    read_explore,
    read_listing,
    read_search,
)
from personas.models import Persona

# How a search was federated (ARD §8): `auto` when peers were asked (cards.ard.federation),
# `referrals` when there are none to ask, `none` when the client said so.
ANSWERED_AS = "Virgo-ARD-Federation"
_CODES = {
    exceptions.NotAuthenticated: "UNAUTHENTICATED",
    exceptions.AuthenticationFailed: "UNAUTHENTICATED",
    exceptions.PermissionDenied: "PERMISSION_DENIED",
    exceptions.Throttled: "RATE_LIMIT_EXCEEDED",
    exceptions.NotFound: "NOT_FOUND",
    exceptions.ParseError: "INVALID_ARGUMENT",
    exceptions.ValidationError: "INVALID_ARGUMENT",
    Invalid: "INVALID_ARGUMENT",
}


# ARD's own OpenAPI (spec/schemas/ard.openapi.yaml) is these operations' schema; Virgo's
# documents its own API and leaves them out (decision 216).
@extend_schema(exclude=True)
class RegistryView(APIView):
    permission_classes = [IsAuthenticated]
    throttle_classes = [PrincipalRateThrottle]
    parser_classes = [StrictJSONParser]
    renderer_classes = [JSONRenderer]

    def handle_exception(self, exc: Exception) -> Response:
        response = super().handle_exception(exc)
        if isinstance(exc, exceptions.APIException):
            code = next(
                (name for kind, name in _CODES.items() if isinstance(exc, kind)),
                str(exc.default_code).upper(),
            )
            message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
            response.data = {"errorCode": code, "message": str(message)}
            if isinstance(exc, Invalid):
                response.data["field"] = exc.field
        return response


def _matched(query: Query) -> QuerySet[Persona]:
    personas = matching.registry_personas().filter(matching.filter_condition(query.filters))
    return matching.ranked(personas, query.words) if query.words else personas


def _page_token(token: str | None, query: dict[str, Any]) -> list[Any] | None:
    if token is None:
        return None
    try:
        return paging.read_token(token, query)
    except paging.BadToken as error:
        raise Invalid("pageToken", str(error)) from None


def referrals() -> list[dict[str, str]]:
    """The registries the operator named (VIRGO_ARD_REFERRALS); none is ever called."""
    return [
        {
            "identifier": f"urn:air:{urlsplit(url).hostname}:registry",
            "displayName": urlsplit(url).hostname or url,
            "type": entries.REGISTRY_TYPE,
            "url": url,
        }
        for url in settings.VIRGO_ARD_REFERRALS
    ]


class SearchView(RegistryView):
    """POST /api/ard/search: ranked entries for `query.text`, narrowed by `query.filter`."""

    def post(self, request: Request) -> Response:
        search = read_search(request.data)
        key = {"op": "search", **search.query.canonical()}
        personas = _matched(search.query).only(*entries.PERSONA_COLUMNS)
        after = _page_token(search.page_token, key)
        if after is not None:
            score, last = after
            if not isinstance(score, int):
                raise Invalid("pageToken", "was not issued by this registry")
            personas = personas.filter(Q(score__lt=score) | Q(score=score, id__gt=last))
        page = list(personas[: search.page_size + 1])
        shown = page[: search.page_size]
        source = entries.api_base()
        results = [
            {**document, "score": persona.score, "source": source}
            for persona, document in zip(shown, entries.entries(shown), strict=True)
        ]
        body: dict[str, Any] = {"results": results}
        answered = "none" if search.federation == "none" else "referrals"
        more_here = len(page) > search.page_size
        peers = federation.enabled_peers() if search.federation == "auto" and not more_here else []
        # The peers' entries follow the last of this registry's own: on the page it ends on,
        # or, when that page is full, on one more page.
        room = search.page_size - len(shown)
        if peers:
            answered = "auto"
            results += federation.federated(request.data["query"], room, peers)
        if answered != "none" and (named := referrals()):
            body["referrals"] = named
        if more_here or (peers and room == 0):
            body["pageToken"] = paging.make_token(key, [shown[-1].score, shown[-1].pk])
        response = Response(body)
        response[ANSWERED_AS] = answered
        return response


class ExploreView(RegistryView):
    """POST /api/ard/explore: facet counts over the whole matched set (ARD §7.3)."""

    def post(self, request: Request) -> Response:
        explore = read_explore(request.data)
        return Response(
            {
                "resultType": "facets",
                "facets": facets.count_facets(_matched(explore.query), explore.facets),
            }
        )


class AgentsView(RegistryView):
    """GET /api/ard/agents: every listed entry in a stable order, filtered (ARD §7.4)."""

    def get(self, request: Request) -> Response:
        listing = read_listing(request.query_params)
        key = {"op": "agents", "filter": listing.expression, "orderBy": listing.order_by}
        personas = matching.registry_personas().filter(matching.filter_condition(listing.filters))
        if listing.display_name is not None:
            personas = personas.filter(name__icontains=listing.display_name)
        if listing.created_after is not None:
            personas = personas.filter(created_at__gt=listing.created_after)
        if listing.updated_after is not None:
            personas = personas.filter(updated_at__gt=listing.updated_after)
        column = listing.order_field
        after = _page_token(listing.page_token, key)
        if after is not None:
            value = after[0]
            if column != "name":
                value = _instant(value)
            beyond = {f"{column}__{'lt' if listing.descending else 'gt'}": value}
            personas = personas.filter(Q(**beyond) | Q(**{column: value}, id__gt=after[1]))
        ordering = f"-{column}" if listing.descending else column
        personas = personas.order_by(ordering, "id").only(*entries.PERSONA_COLUMNS, column)
        page = list(personas[: listing.page_size + 1])
        shown = page[: listing.page_size]
        body: dict[str, Any] = {"items": entries.entries(shown)}
        if len(page) > listing.page_size:
            last = getattr(shown[-1], column)
            value = last if isinstance(last, str) else last.isoformat()
            body["pageToken"] = paging.make_token(key, [value, shown[-1].pk])
        return Response(body)


# ARD v0.91's identifier, as its OpenAPI document states it (Appendix C gives no pattern).
IDENTIFIER = re.compile(r"urn:air:[a-zA-Z0-9.-]+(:[a-zA-Z0-9._-]+)+")


class AgentView(RegistryView):
    """GET /api/ard/agents/{identifier}: one listed entry by its identifier (ARD v0.91
    §5.3.4). The identifier is one path segment, percent-decoded once by the server before it
    reaches here; the lookup is exact and case-sensitive, in this registry alone."""

    def get(self, request: Request, identifier: str) -> Response:
        if not IDENTIFIER.fullmatch(identifier):
            raise Invalid("identifier", "is not an ARD identifier: urn:air:<publisher>:<name>")
        parsed = entries.parse_identifier(identifier)
        persona = None
        if parsed is not None:
            persona = (
                matching.registry_personas()
                .filter(uuid=_uuid_or_none(parsed[1]))
                .only(*entries.PERSONA_COLUMNS)
                .first()
            )
        found = entries.entries([persona])[0] if persona is not None else None
        if found is None or found["identifier"] != identifier:
            raise exceptions.NotFound(f"no entry {identifier} in this registry")
        body = JSONRenderer().render(found)
        etag = f'"{hashlib.sha256(body).hexdigest()[:32]}"'
        headers = {"ETag": etag, "Cache-Control": "private, no-cache", "Vary": "Authorization"}
        if etag in request.headers.get("If-None-Match", ""):
            return Response(status=304, headers=headers)
        return Response(found, headers=headers)


def _uuid_or_none(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


def _instant(value: Any) -> datetime:
    try:
        return datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise Invalid("pageToken", "was not issued by this registry") from None
