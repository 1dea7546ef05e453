from django.urls import path

from cards import api, views
from cards.fastpath import CARD_ROUTE
from cards.status_list import STATUS_LIST_ROUTE

urlpatterns = [
    path(CARD_ROUTE, views.agent_card, name="agent-card"),
    path(".well-known/jwks.json", views.jwks, name="jwks"),
    path(STATUS_LIST_ROUTE, views.status_list, name="status-list"),
    path("api/directory/", api.DirectoryView.as_view(), name="directory"),
]
