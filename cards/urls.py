from django.urls import path

from cards import api, views
from cards.fastpath import CARD_ROUTE

urlpatterns = [
    path(CARD_ROUTE, views.agent_card, name="agent-card"),
    path("api/directory/", api.DirectoryView.as_view(), name="directory"),
]
