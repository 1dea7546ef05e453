from django.urls import path

from serving import views

urlpatterns = [
    path("mcp/<uuid:persona_uuid>", views.persona_endpoint, name="persona-mcp"),
    path(
        ".well-known/oauth-protected-resource/mcp/<uuid:persona_uuid>",
        views.PersonaResourceMetadata.as_view(),
        name="persona-mcp-metadata",
    ),
]
