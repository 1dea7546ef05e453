"""Site-wide error pages: JSON on the JSON surfaces, pages in the admin's look elsewhere
(templates/403.html, 404.html, 500.html).

The card endpoint and the API speak JSON with `detail` and `code` in every error, including
the ones no view of theirs produced: an unknown path under them, a malformed request, a crash.

A database that cannot be reached (PostgreSQL down or restarting, VX-REL-3) is no crash: the
request answers 503 with Retry-After, in the JSON error shape on the JSON surfaces and as a page
elsewhere (the admin), and the outage is logged once (virgo.outages), not once per request.
"""

import sys

from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template import loader
from django.utils.cache import add_never_cache_headers
from django.views import defaults

from virgo import metrics
from virgo.outages import DATABASE, logged_by_outage

JSON_PREFIXES = ("/a/", "/api/")
# What the database driver raises while the server cannot be reached, is restarting or dropped
# the connection (Django wraps psycopg's errors in these).
DATABASE_ERRORS = (OperationalError, InterfaceError)
DATABASE_UNAVAILABLE = "The database is unavailable for a moment; try again shortly."


def _wants_json(request: HttpRequest) -> bool:
    return request.path_info.startswith(JSON_PREFIXES)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _wants_json(request):
        return JsonResponse({"detail": "Bad request.", "code": "bad_request"}, status=400)
    return defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _wants_json(request):
        return JsonResponse(
            {"detail": "You do not have permission to do this.", "code": "permission_denied"},
            status=403,
        )
    return defaults.permission_denied(request, exception)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _wants_json(request):
        return JsonResponse({"detail": "Not found.", "code": "not_found"}, status=404)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    # Reached for what a middleware layer raised (a session saved after the view, say); the
    # views' own database errors were answered by DatabaseUnavailableMiddleware already.
    error = sys.exc_info()[1]
    if isinstance(error, DATABASE_ERRORS):
        return database_unavailable(request, error)
    if _wants_json(request):
        return JsonResponse(
            {"detail": "The server failed to answer this request.", "code": "server_error"},
            status=500,
        )
    return defaults.server_error(request)


def database_unavailable(request: HttpRequest, error: BaseException) -> HttpResponse:
    """503 with Retry-After for a request the database failed: a moment's outage, no crash."""
    DATABASE.failed("request", error)
    metrics.UNAVAILABLE_RESPONSES.labels(reason="database").inc()
    response: HttpResponse
    if _wants_json(request):
        response = JsonResponse(
            {"detail": DATABASE_UNAVAILABLE, "code": "database_unavailable"}, status=503
        )
    else:
        # A page of its own: the admin's would ask the database who is signed in.
        response = HttpResponse(loader.render_to_string("503.html"), status=503)
    response["Retry-After"] = str(settings.VIRGO_DEGRADED_RETRY_SECONDS)
    add_never_cache_headers(response)
    return logged_by_outage(response)
