"""virgo-channel's endpoints, included under /api/channel/ by virgo.urls."""

from django.urls import path

from channel.views import decision_callback

urlpatterns = [
    path("decisions/", decision_callback, name="channel-decision"),
]
