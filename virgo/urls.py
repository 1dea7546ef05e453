from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView

from virgo.docs import api_docs
from virgo.health import healthz, readyz
from virgo.landing import landing
from virgo.metrics import metrics_view
from virgo.signin import admin_login

urlpatterns = [
    path("", landing, name="landing"),
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("metrics", metrics_view, name="metrics"),
    # Before the admin's own URLs: its login page, held to the sign-in limit (virgo.signin).
    path("admin/login/", admin_login, name="admin-login"),
    # The admin's other doors: OpenID Connect sign-in and linking for owners (personas.oidc).
    path("admin/oidc/", include("personas.oidc")),
    path("admin/", admin.site.urls),
    path("", include("cards.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", api_docs, name="api-docs"),
    path("api/channel/", include("channel.urls")),
    path("api/", include("personas.urls")),
    path("api/", include("runtime.urls")),
    # Each persona's tools over MCP, and Virgo as the authorization server for them (serving/).
    path("", include("serving.urls")),
    path("", include("serving.oauth_urls")),
]

handler400 = "virgo.errors.bad_request"
handler403 = "virgo.errors.permission_denied"
handler404 = "virgo.errors.not_found"
handler500 = "virgo.errors.server_error"
