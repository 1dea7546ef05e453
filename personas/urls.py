"""The owners' API, included under /api/ by virgo.urls."""

from rest_framework.routers import SimpleRouter

from personas.api import AgentViewSet, PersonaViewSet

router = SimpleRouter()
router.register("agents", AgentViewSet, basename="api-agent")
router.register("personas", PersonaViewSet, basename="api-persona")

urlpatterns = router.urls
