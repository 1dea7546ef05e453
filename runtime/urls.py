"""The runtime's API routes, included under /api/ by virgo.urls."""

from django.urls import path

from runtime.api import ExplainView

urlpatterns = [
    path("personas/<uuid:uuid>/explain/", ExplainView.as_view(), name="api-persona-explain"),
]
