"""The owners' API, included under /api/ by virgo.urls."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from personas.api import (
    AgentViewSet,
    PersonaViewSet,
    ProposalViewSet,
    SurfaceViewSet,
    TokenView,
)

router = SimpleRouter()
router.register("agents", AgentViewSet, basename="api-agent")
router.register("personas", PersonaViewSet, basename="api-persona")
router.register("surfaces", SurfaceViewSet, basename="api-surface")
router.register("proposals", ProposalViewSet, basename="api-proposal")

urlpatterns = [path("auth/token/", TokenView.as_view(), name="api-token"), *router.urls]
