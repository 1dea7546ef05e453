from django.urls import path

from cards import api, catalog, views
from cards.ard import views as ard
from cards.fastpath import CARD_ROUTE
from cards.status_list import STATUS_LIST_ROUTE

urlpatterns = [
    path(CARD_ROUTE, views.agent_card, name="agent-card"),
    path(".well-known/jwks.json", views.jwks, name="jwks"),
    path(STATUS_LIST_ROUTE, views.status_list, name="status-list"),
    path("api/directory/", api.DirectoryView.as_view(), name="directory"),
    path(".well-known/ai-catalog.json", catalog.ai_catalog, name="ai-catalog"),
    path("robots.txt", catalog.robots, name="robots"),
    path("api/ard/search", ard.SearchView.as_view(), name="ard-search"),
    path("api/ard/explore", ard.ExploreView.as_view(), name="ard-explore"),
    path("api/ard/agents", ard.AgentsView.as_view(), name="ard-agents"),
    path("api/ard/agents/<path:identifier>", ard.AgentView.as_view(), name="ard-agent"),
    path(".well-known/ard.json", catalog.ard, name="ard"),
]
