"""Virgo as the authorization server of its personas' MCP endpoints (VX-REMOTE-1).

django-oauth-toolkit issues, stores (hashed), refreshes and revokes the tokens; this module adds
what makes one of them a persona's: every grant and every token names exactly one resource, the
MCP endpoint of a live persona, and only that persona's owner, signed in and active, grants it.
The consent page is shown for every grant: neither an application's `skip_authorization` nor a
client's `approval_prompt=auto` lets an earlier consent (for another persona, perhaps) stand in
for this one.
"""

from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from oauth2_provider.models import get_application_model
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauth2_provider.views import AuthorizationView
from oauth2_provider.views import TokenView as ToolkitTokenView
from oauthlib.oauth2.rfc6749 import errors

from personas.models import Persona
from serving.resources import persona_uuid_of
from virgo import limits

ONE_RESOURCE = (
    "name exactly one resource: the MCP endpoint of one of your personas "
    "(<base URL>/mcp/<persona uuid>)"
)
NOT_THE_OWNER = "only the persona's owner, signed in, can grant access to its tools"
NOT_YOUR_CLIENT = (
    "this client was not registered by the persona's owner: register your own agent host in "
    "the admin (Remote access > Clients)"
)


def grantable_persona(
    resources: list[str], user: AbstractBaseUser | AnonymousUser | None, client: Any
) -> Persona | str:
    """The persona `resources` name if `user` may grant `client` access to it, else why not.

    Another owner's persona and a persona that does not exist are refused alike, so the answer
    tells nobody which persona ids exist. Only a client its owner registered is granted: a
    client is named by whoever registers it, and another owner's could call itself anything."""
    if len(resources) != 1:
        return ONE_RESOURCE
    named = persona_uuid_of(resources[0])
    if named is None:
        return f"{resources[0][:200]!r} is not the MCP endpoint of a persona of this installation"
    if user is None or not user.is_authenticated or not user.is_active:
        return NOT_THE_OWNER
    persona = Persona.objects.select_related("agent").filter(uuid=named).first()
    if persona is None or persona.agent.owner_id != user.pk:
        return NOT_THE_OWNER
    if client is None or client.user_id != user.pk:
        return NOT_YOUR_CLIENT
    if persona.revoked_at is not None:
        return "the persona is revoked: its tools are served to nobody"
    return persona


class PersonaResourceValidator(OAuth2Validator):
    """Every code and token is bound to one persona its owner may grant (RFC 8707)."""

    def _check_and_set_request_resource(self, request: Any) -> None:
        # Token requests of every grant (code, refresh, client credentials) come through here
        # once the toolkit has settled the request's resource (inherited from the grant or the
        # refresh token, or narrowed): a refresh after the persona was revoked, or the owner's
        # account closed, is refused here.
        super()._check_and_set_request_resource(request)
        self._require_grantable(request)

    def _create_authorization_code(
        self, request: Any, code: dict[str, str], expires: Any = None
    ) -> Any:
        self._require_grantable(request)
        return super()._create_authorization_code(request, code, expires)

    def _require_grantable(self, request: Any) -> None:
        verdict = grantable_persona(
            list(getattr(request, "resource", None) or []), request.user, request.client
        )
        if isinstance(verdict, str):
            raise errors.CustomOAuth2Error(
                error="invalid_target", description=verdict, request=request
            )


class PersonaAuthorizationView(AuthorizationView):
    """The consent page: the owner, signed in to the admin, approves one client for one persona."""

    template_name = "serving/authorize.html"

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        refusal = self._refusal(request, request.GET.getlist("resource"))
        if refusal is not None:
            return refusal
        # Every grant is consented to on this page (module docstring).
        request.GET = request.GET.copy()
        request.GET.pop("approval_prompt", None)
        return super().get(request, *args, **kwargs)

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        refusal = self._refusal(request, request.POST.get("resource", "").split())
        return refusal if refusal is not None else super().post(request, *args, **kwargs)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        context.update(admin.site.each_context(self.request))
        context["persona"] = self.persona
        context["title"] = "Grant access to a persona's tools"
        return context

    def _refusal(self, request: HttpRequest, resources: list[str]) -> HttpResponse | None:
        client_id = request.GET.get("client_id") or request.POST.get("client_id")
        client = get_application_model().objects.filter(client_id=client_id).first()
        if client is not None and client.skip_authorization:
            reason = (
                "this client is set to skip the owner's consent, which Virgo never does: "
                "clear its skip authorization setting"
            )
        else:
            verdict = grantable_persona(resources, request.user, client)
            if not isinstance(verdict, str):
                self.persona = verdict
                return None
            reason = verdict
        return render(
            request,
            "serving/authorize_refused.html",
            {**admin.site.each_context(request), "title": "Access not granted", "reason": reason},
            status=400,
        )


class TokenView(ToolkitTokenView):
    """The toolkit's token endpoint, every error framed as RFC 6749 §5.2 asks: JSON, never cached.
    (An error raised while the token is saved, such as invalid_target, comes back from the toolkit
    with no headers at all.)"""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        seconds = limits.address_retry_after(
            request, group="oauth-token", rate=settings.VIRGO_TOKEN_RATE_LIMIT
        )
        if seconds is not None:
            response = JsonResponse(
                {"error": "slow_down", "error_description": "Too many token requests."},
                status=429,
            )
            response["Retry-After"] = str(seconds)
            response["Cache-Control"] = "no-store"
            return response
        response = super().post(request, *args, **kwargs)
        if response.status_code >= 400:
            response["Content-Type"] = "application/json"
            response["Cache-Control"] = "no-store"
        return response
