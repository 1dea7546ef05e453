"""/api/docs/: the browsable API documentation (Swagger UI over /api/schema/).

Everything the page loads comes from this site (drf-spectacular-sidecar's Swagger UI build and
virgo/static/virgo/), and it runs no inline script or style, so the HTML pages' CSP
(default-src 'self') holds as it is. The one addition, for this view only, is `data:` images:
Swagger UI's stylesheet draws its icons as data: URIs, which load nothing from elsewhere.
Like the schema, the page is for signed-in owners; others are sent to the sign-in page.
"""

from csp.decorators import csp_update
from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_safe


def _csrf_header() -> str:
    """The header Django reads the CSRF token from, as a client sends it (X-CSRFToken)."""
    return settings.CSRF_HEADER_NAME.removeprefix("HTTP_").replace("_", "-")


@require_safe
@csp_update({"img-src": ["'self'", "data:"]})
def api_docs(request: HttpRequest) -> HttpResponse:
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path(), reverse("admin:login"))
    return render(
        request,
        "api/docs.html",
        {"schema_url": reverse("schema"), "csrf_header": _csrf_header()},
    )
