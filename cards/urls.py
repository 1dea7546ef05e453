from django.urls import path

from cards import api, views

urlpatterns = [
    path("a/<uuid:persona_id>/.well-known/agent-card.json", views.agent_card, name="agent-card"),
    path("api/directory/", api.DirectoryView.as_view(), name="directory"),
]
