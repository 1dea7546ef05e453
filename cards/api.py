"""The bounded discovery directory (SPEC-0009 "Discoverability Is Owner-Controlled").

Authenticated (session or token), advertised personas only, keyset pages of a capped size,
and a per-principal rate limit: the directory is for finding personas, not for harvesting.
Filters (cards.filters) narrow it by skill, tag, provider and words; personas.search says how
each is answered from an index on PostgreSQL.
"""

from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.http import QueryDict
from django.utils.cache import patch_vary_headers
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import exceptions
from rest_framework.generics import ListAPIView
from rest_framework.permissions import IsAuthenticated
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from cards.directory_page import DirectoryPageRenderer
from cards.filters import PARAMETERS, read_filters
from cards.serializers import DirectoryEntrySerializer
from personas.models import Persona
from personas.search import search_filter
from virgo import limits
from virgo.api import StrictCursorPagination

RATE_LIMIT_GROUP = "virgo.directory"


class DirectoryPagination(StrictCursorPagination):
    """Keyset pages over the persona key: each page is one indexed range scan, at any depth."""

    ordering = "id"

    def __init__(self) -> None:
        self.page_size = settings.VIRGO_DIRECTORY_PAGE_SIZE
        self.max_page_size = settings.VIRGO_DIRECTORY_MAX_PAGE_SIZE


class DirectoryRateLimited(exceptions.APIException):
    status_code = 429
    default_code = "rate_limited"

    def __init__(self, wait: int) -> None:
        super().__init__(
            detail={"detail": "Too many directory requests; slow down.", "code": "rate_limited"}
        )
        self.wait = wait


class PrincipalRateThrottle(BaseThrottle):
    """VIRGO_DIRECTORY_RATE_LIMIT per signed-in user, counted by django-ratelimit (virgo.limits).

    Throttles run after authentication and permissions, so every counted request has a user.
    """

    def __init__(self) -> None:
        self.retry_after: int | None = None

    def allow_request(self, request: Request, view: APIView) -> bool:
        self.retry_after = limits.retry_after(
            request, group=RATE_LIMIT_GROUP, key="user", rate=settings.VIRGO_DIRECTORY_RATE_LIMIT
        )
        return self.retry_after is None

    def wait(self) -> int | None:
        return self.retry_after


# The page for browsers is chosen by Accept (decision 211); the `format` override DRF would
# offer beside it is not part of the API.
@extend_schema_view(
    get=extend_schema(parameters=[*PARAMETERS, OpenApiParameter("format", exclude=True)])
)
class DirectoryView(ListAPIView):
    """GET /api/directory/: the personas their owners listed, and that stand."""

    permission_classes = [IsAuthenticated]
    throttle_classes = [PrincipalRateThrottle]
    # JSON for clients (first: what `Accept: */*` or none gets); a page for a browser.
    renderer_classes = [JSONRenderer, DirectoryPageRenderer]
    pagination_class = DirectoryPagination
    serializer_class = DirectoryEntrySerializer

    def get_queryset(self) -> QuerySet[Persona]:
        query = self.request.query_params
        if isinstance(self.request.accepted_renderer, DirectoryPageRenderer):
            # The page's form sends every field, the ones left blank empty: those filter nothing.
            query = QueryDict(mutable=True)
            for name, values in self.request.query_params.lists():
                query.setlist(name, [value for value in values if value != ""])
        filters = read_filters(query)
        return (
            Persona.objects.advertised()
            .filter(
                search_filter(
                    skills=filters.skills,
                    tags=filters.tags,
                    provider=filters.provider,
                    words=filters.words,
                )
            )
            .only("id", "uuid", "name", "description", "system_prompt", "skills")
        )

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        patch_vary_headers(response, ["Accept"])
        return response

    def throttled(self, request: Request, wait: float | None) -> None:
        raise DirectoryRateLimited(int(wait or 1))

    def handle_exception(self, exc: Exception) -> Response:
        """Every refusal names its code beside its detail, as the card endpoint's do."""
        response = super().handle_exception(exc)
        if isinstance(exc, exceptions.APIException) and isinstance(response.data, dict):
            codes = exc.get_codes()
            if isinstance(codes, str):
                response.data.setdefault("code", codes)
        return response
