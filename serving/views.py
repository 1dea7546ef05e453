"""A persona's tools over the network (VX-REMOTE-1, VX-REMOTE-2): its MCP endpoint, and the
metadata that tells a client where to get a token for it. Thin: serving.access decides who may
call, serving.mcp_server what is served, and runtime.handler every call."""

import uuid
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from oauth2_provider.views import OAuthProtectedResourceMetadataView

from personas.models import Persona
from runtime import workspace_directory
from runtime.stamp import StampUnavailable
from serving import transport
from serving.access import Refused, check_access, connection_label
from serving.mcp_server import build_server
from serving.resources import SCOPE, resource_url
from virgo import auditing, limits

NO_ENDPOINT = {"error": "not_found", "detail": "no persona has this MCP endpoint"}


def too_many(seconds: int, detail: str) -> JsonResponse:
    response = JsonResponse({"error": "rate_limited", "detail": detail}, status=429)
    response["Retry-After"] = str(seconds)
    return response


def not_utf8(body: bytes) -> JsonResponse | None:
    """JSON-RPC's parse error for a body that is not UTF-8, which JSON must be (RFC 8259): the
    SDK parses only what decodes, and answers anything else with a 500 and a traceback."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        error = {
            "code": -32700,
            "message": f"Parse error: the body is not UTF-8 (byte {exc.object[exc.start]:#04x} "
            f"at offset {exc.start})",
        }
        return JsonResponse({"jsonrpc": "2.0", "id": None, "error": error}, status=400)
    return None


_workspaces_claimed = False


def claim_workspaces_once() -> None:
    """The first remote call of this process makes sure its workspaces are the installation's
    (runtime.workspace_directory); /readyz goes on checking them for the load balancer."""
    global _workspaces_claimed
    if not _workspaces_claimed:
        workspace_directory.claim_workspaces()
        _workspaces_claimed = True


@csrf_exempt
def persona_endpoint(request: HttpRequest, persona_uuid: uuid.UUID) -> HttpResponse:
    # A bearer token, never a cookie, authorizes a call, so there is nothing for CSRF to forge.
    seconds = limits.address_retry_after(request, group="mcp", rate=settings.VIRGO_MCP_RATE_LIMIT)
    if seconds is not None:
        return too_many(seconds, "Too many MCP requests from this address.")
    try:
        persona = Persona.objects.select_related("agent__owner").get(uuid=persona_uuid)
    except Persona.DoesNotExist:
        return JsonResponse(NO_ENDPOINT, status=404)
    try:
        token = check_access(request, persona)
    except Refused as refused:
        response = JsonResponse(
            {"error": refused.error or "unauthorized", "detail": refused.reason},
            status=refused.status,
        )
        response["WWW-Authenticate"] = refused.challenge(persona)
        return response
    if persona.revoked_at is not None:
        return JsonResponse(
            {"error": "gone", "detail": "the persona is revoked: its tools are served to nobody"},
            status=410,
        )
    if request.method != "POST":
        # Stateless: no stream for the server to speak first on (GET) and no session to end
        # (DELETE), which the transport lets a server say with 405.
        response = JsonResponse(
            {"error": "method_not_allowed", "detail": "the endpoint takes JSON-RPC by POST only"},
            status=405,
        )
        response["Allow"] = "POST"
        return response
    unreadable = not_utf8(request.body)
    if unreadable is not None:
        return unreadable
    try:
        claim_workspaces_once()
    except workspace_directory.NotShared as refused:
        return JsonResponse(
            {"error": "unavailable", "detail": f"{refused.reason}: {refused.fix}"}, status=503
        )
    try:
        server = build_server(persona, one_request=True)
    except StampUnavailable as unavailable:
        return JsonResponse({"error": "unavailable", "detail": unavailable.reason}, status=503)
    with auditing.connection(connection_label(token)):
        return transport.answer(server, request)


class PersonaResourceMetadata(OAuthProtectedResourceMetadataView):
    """RFC 9728 metadata of one persona's endpoint, at the path-inserted well-known address."""

    persona_uuid: uuid.UUID

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        self.persona_uuid = kwargs["persona_uuid"]
        if not Persona.objects.filter(uuid=self.persona_uuid).exists():
            return JsonResponse(NO_ENDPOINT, status=404)
        return super().get(request)

    def get_resource(self, request: HttpRequest) -> str:
        return resource_url(self.persona_uuid)

    def get_authorization_servers(self, request: HttpRequest) -> list[str]:
        return [settings.VIRGO_PUBLIC_BASE_URL]

    def get_scopes_supported(self) -> list[str]:
        return [SCOPE]

    def get_resource_name(self) -> str:
        return "The tools of a Virgo persona"
