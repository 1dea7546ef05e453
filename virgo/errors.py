"""Site-wide error pages: JSON on the JSON surfaces, Django's own pages elsewhere.

The card endpoint and the API speak JSON with `detail` and `code` in every error, including
the ones no view of theirs produced: an unknown path under them, a malformed request, a crash.
"""

from django.http import HttpRequest, HttpResponse, JsonResponse
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
