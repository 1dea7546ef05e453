"""Request-body limits, content-type-aware CSP, response counts, and 503 for an unreachable
database, applied to every response."""

import io
from collections.abc import Callable

from csp.middleware import CSPMiddleware, PolicyParts
from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse

from virgo import metrics
from virgo.errors import DATABASE_ERRORS, database_unavailable

_CHUNK = 8192


def _payload_too_large(limit: int) -> HttpResponse:
    return JsonResponse(
        {
            "detail": f"Request body exceeds the limit of {limit} bytes.",
            "code": "payload_too_large",
            "limit": limit,
        },
        status=413,
    )


class ResponseCountMiddleware:
    """Count every response Django gives, by URL pattern, method and status (virgo.metrics).

    The outermost layer, so that it sees the answers the inner layers give early too (413, a
    disallowed Host's 400). Public cards the fast path answers from memory never reach Django;
    the fast path counts those itself, under the same route.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        metrics.HTTP_RESPONSES.labels(
            metrics.route_label(match.route) if match is not None else "unmatched",
            metrics.method_label(request.method),
            str(response.status_code),
        ).inc()
        return response


class BodySizeLimitMiddleware:
    """Refuse bodies over VIRGO_MAX_BODY_BYTES with 413 before anything reads them.

    A declared Content-Length is checked without reading. A chunked body has no length up
    front, and Django would otherwise treat it as empty; it is read here up to the limit, and
    the counted bytes are handed on as the request body. That needs a server that ends the
    input stream at the end of the body (`wsgi.input_terminated`, as granian, gunicorn and mod_wsgi
    set); on any other server a chunked body is refused with 411 rather than read as empty.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response
        self.limit = settings.VIRGO_MAX_BODY_BYTES

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        declared = request.META.get("CONTENT_LENGTH") or ""
        if declared:
            try:
                length = int(declared)
            except ValueError:
                length = -1
            if length < 0:
                return JsonResponse(
                    {"detail": "Content-Length is not a byte count.", "code": "bad_length"},
                    status=400,
                )
            if length > self.limit:
                return _payload_too_large(self.limit)
        elif "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
            if not request.META.get("wsgi.input_terminated"):
                return JsonResponse(
                    {
                        "detail": "This server cannot read chunked bodies; send Content-Length.",
                        "code": "length_required",
                    },
                    status=411,
                )
            body = self._read_chunked(request)
            if body is None:
                return _payload_too_large(self.limit)
            request._stream = io.BytesIO(body)  # type: ignore[attr-defined]
            request.META["CONTENT_LENGTH"] = str(len(body))
        return self.get_response(request)

    def _read_chunked(self, request: HttpRequest) -> bytes | None:
        stream = request.META["wsgi.input"]
        received = bytearray()
        while True:
            chunk = stream.read(_CHUNK)
            if not chunk:
                return bytes(received)
            received += chunk
            if len(received) > self.limit:
                return None


class ContentTypeCSPMiddleware(CSPMiddleware):
    """django-csp with a stricter policy for JSON: no active content may ever be loaded."""

    def get_policy_parts(
        self,
        request: HttpRequest,
        response: HttpResponseBase,
        report_only: bool = False,
    ) -> PolicyParts:
        parts = super().get_policy_parts(request, response, report_only)
        if not report_only and _is_json(response):
            parts.config = settings.VIRGO_JSON_CSP
        return parts


def _is_json(response: HttpResponseBase) -> bool:
    content_type = response.get("Content-Type", "")
    return content_type.startswith("application/json") or content_type.endswith("+json")


class DatabaseUnavailableMiddleware:
    """A view the database failed answers 503 with Retry-After, never 500 (VX-REL-3).

    DRF hands such errors on, so the API is answered here too; what a middleware layer raises
    reaches the same answer through the site's 500 handler (virgo.errors.server_error).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, DATABASE_ERRORS):
            return database_unavailable(request, exception)
        return None
