from django.urls import path

from cards import api, views
from cards.fastpath import CARD_ROUTE

urlpatterns = [
    path(CARD_ROUTE, views.agent_card, name="agent-card"),
    path(".well-known/jwks.json", views.jwks, name="jwks"),
    path("api/directory/", api.DirectoryView.as_view(), name="directory"),
]
