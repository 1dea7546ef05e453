"""Site-wide error pages: JSON on the JSON surfaces, Django's own pages elsewhere.

The card endpoint and the API speak JSON with `detail` and `code` in every error, including
the ones no view of theirs produced: an unknown path under them, a malformed request, a crash.
"""

import functools
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.views import defaults

JSON_PREFIXES = ("/a/", "/api/")


def _wants_json(request: HttpRequest) -> bool:
    return request.path_info.startswith(JSON_PREFIXES)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _wants_json(request):
        return JsonResponse({"detail": "Bad request.", "code": "bad_request"}, status=400)
    return defaults.bad_request(request, exception)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _wants_json(request):
        return JsonResponse({"detail": "Not found.", "code": "not_found"}, status=404)
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    if _wants_json(request):
        return JsonResponse(
            {"detail": "The server failed to answer this request.", "code": "server_error"},
            status=500,
        )
    return defaults.server_error(request)


def allow_methods(*methods: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Answer any other method with a JSON 405 naming the allowed ones (in `Allow`, RFC 9110).

    Django's require_http_methods answers with an empty HTML page instead.
    """
    allowed = ", ".join(methods)

    def decorator(view: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(view)
        def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            if request.method not in methods:
                response = JsonResponse(
                    {"detail": f"Allowed methods: {allowed}.", "code": "method_not_allowed"},
                    status=405,
                )
                response["Allow"] = allowed
                return response
            return view(request, *args, **kwargs)

        return guarded

    return decorator
