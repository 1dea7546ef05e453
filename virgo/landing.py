"""`/`: what this installation is, and the doors to it (the admin, the API, the keys).

A page anyone may read: it names the installation and where things are, never who owns what,
and it asks the database nothing (the card and the directory are where personas are found).
"""

from django.conf import settings
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.views.decorators.http import require_safe


@require_safe
def landing(request: HttpRequest) -> HttpResponse:
    context = {
        **admin.site.each_context(request),
        "title": "Personas as scoped, signed A2A agent cards",
        "public_base_url": settings.VIRGO_PUBLIC_BASE_URL,
        "provider": settings.VIRGO_PROVIDER_ORGANIZATION,
    }
    return TemplateResponse(request, "landing.html", context)
