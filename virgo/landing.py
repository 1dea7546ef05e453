"""`/`: what this installation is, and the doors to it (the admin, the API, the keys).

A page anyone may read: it names the installation and where things are, never who owns what,
and it asks the database nothing (the card and the directory are where personas are found).
"""

from django.conf import settings
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_safe


@require_safe
def landing(request: HttpRequest) -> HttpResponse:
    context = {
        **admin.site.each_context(request),
        "title": "Personas as scoped, signed A2A agent cards",
        "public_base_url": settings.VIRGO_PUBLIC_BASE_URL,
        "provider": settings.VIRGO_PROVIDER_ORGANIZATION,
    }
    response = TemplateResponse(request, "landing.html", context)
    # ARD v0.91 §5.1: a consumer honours a rel="ard" link; the header says it to one that reads
    # no HTML. The AI Catalog's relation stays beside it, for readers of its predecessor.
    response["Link"] = (
        f'<{reverse("ard")}>; rel="ard", '
        f'<{reverse("ai-catalog")}>; rel="ai-catalog"; type="application/ai-catalog+json"'
    )
    return response
