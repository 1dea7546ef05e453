"""A JSON 405 for the methods a view does not serve.

Apart from virgo.errors, which counts its 503s in virgo.metrics, so that the /metrics view can
use it without a circle.
"""

import functools
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponseBase, JsonResponse


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
