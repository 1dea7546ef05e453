"""The authorization server's endpoints, under the toolkit's namespace (its metadata view finds
them by these names); no application management or dynamic registration is served."""

from django.urls import path
from oauth2_provider import views as oauth_views

from serving.oauth import PersonaAuthorizationView, TokenView

app_name = "oauth2_provider"

urlpatterns = [
    path(
        ".well-known/oauth-authorization-server",
        oauth_views.OAuthServerMetadataView.as_view(),
        name="oauth-server-metadata",
    ),
    path("oauth/authorize/", PersonaAuthorizationView.as_view(), name="authorize"),
    path("oauth/token/", TokenView.as_view(), name="token"),
    path("oauth/revoke/", oauth_views.RevokeTokenView.as_view(), name="revoke-token"),
]
