"""VX-REMOTE-1, VX-REMOTE-2: a persona's tools served by the web tier over MCP streamable HTTP, to
the holder of a token its owner granted for that persona alone.

In-process, with Django's test client as the agent host and the browser both: the authorization
code flow with PKCE and a resource indicator, the endpoint's challenge and metadata, and every
token the endpoint must refuse. The `mcp` SDK's own OAuth client runs the same flow against a
live virgo-web in tests/test_remote_mcp_live.py.
"""

import asyncio
import hashlib
import html
import json
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application, Grant, RefreshToken
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from personas.models import AuditEvent, Generation, PersonaClass
from personas.services import persona_revoke
from runtime.stamp import load_active_stamp
from serving.connect import Redirect, issuer_of
from serving.resources import metadata_url, resource_url
from stamps.projections import launcher_allowlist, mcp_tool_list
from stamps.quarantine import FoundBy, quarantine
from stamps.storage import stamp_path
from tests.factories import make_owner
from tests.owner_clients import fresh_rate_limits  # noqa: F401 (autouse)
from tests.remote_support import (
    PROTOCOL,
    authorize_query,
    consent,
    exchange,
    granted,
    pkce,
    public_client,
    refresh,
    rpc,
)
from tests.runtime_support import call, handle_spans, in_memory_spans, standing_persona

pytestmark = pytest.mark.django_db


def test_the_endpoint_lists_exactly_the_stamps_tools_to_a_token_its_owner_granted() -> None:
    """VX-REMOTE-1, VX-REMOTE-2: code flow with PKCE and the persona's resource; the endpoint
    lists exactly tools[].name of the active stamp, in its order (the fourth consumer)."""
    persona = standing_persona()
    _, tokens = granted(persona)
    assert tokens["token_type"] == "Bearer" and "refresh_token" in tokens
    assert tokens["expires_in"] <= 600
    listed = rpc(persona, "tools/list", token=tokens["access_token"])
    assert listed.status_code == 200, listed.content
    names = [tool["name"] for tool in listed.json()["result"]["tools"]]
    assert names == list(load_active_stamp(persona).mcp_tools)


def test_a_call_is_decided_by_the_handler_and_audited() -> None:
    """VX-REMOTE-2: a remote tools/call runs through runtime.handler.handle: a tool the stamp
    does not list is a protocol error, a listed one answers as locally."""
    persona = standing_persona()
    _, tokens = granted(persona)
    token = tokens["access_token"]
    unknown = rpc(persona, "tools/call", {"name": "deploy_release", "arguments": {}}, token)
    assert unknown.json()["error"]["message"] == (
        "Unknown tool: deploy_release is not listed for this persona"
    )
    mistyped = rpc(persona, "tools/call", {"name": "workspace_lst", "arguments": {}}, token)
    assert mistyped.json()["error"]["message"] == (
        "Unknown tool: workspace_lst is not listed for this persona; did you mean workspace_list?"
    )
    listed = rpc(
        persona, "tools/call", {"name": "workspace_list", "arguments": {"path": "."}}, token
    )
    result = listed.json()["result"]
    assert result["structuredContent"]["ok"] is True, result


def test_tokens_are_stored_as_their_hash_alone() -> None:
    """VX-REMOTE-1: neither the access token nor the refresh token is stored; their SHA-256 is."""
    persona = standing_persona()
    _, tokens = granted(persona)
    access = AccessToken.objects.get()
    refresh = RefreshToken.objects.get()
    assert (access.token, refresh.token) == ("", "")
    assert access.token_checksum == hashlib.sha256(tokens["access_token"].encode()).hexdigest()
    assert access.resource == [resource_url(persona.uuid)]


def test_without_a_token_the_answer_names_the_resource_metadata() -> None:
    """VX-REMOTE-1: 401 with the RFC 9728 pointer and the scope; the document it names binds the
    resource to Virgo as its authorization server."""
    persona = standing_persona()
    refused = rpc(persona, "tools/list")
    assert refused.status_code == 401
    assert refused["WWW-Authenticate"] == (
        f'Bearer resource_metadata="{metadata_url(persona.uuid)}", scope="mcp"'
    )
    document = Client().get(urlsplit(metadata_url(persona.uuid)).path).json()
    assert document["resource"] == resource_url(persona.uuid)
    assert document["authorization_servers"] == [settings.VIRGO_PUBLIC_BASE_URL]
    assert document["scopes_supported"] == ["mcp"]
    assert document["resource_name"] == "The tools of a Virgo persona"


def test_an_endpoint_no_persona_has_is_a_404_for_its_calls_and_its_metadata() -> None:
    """VX-REMOTE-1: the answer names what is wrong, with or without a token, and so does the
    metadata address of an endpoint nobody has."""
    persona = standing_persona()
    _, tokens = granted(persona)
    nobody = uuid.uuid4()
    expected = {"error": "not_found", "detail": "no persona has this MCP endpoint"}
    for headers in ({}, {"HTTP_AUTHORIZATION": f"Bearer {tokens['access_token']}"}):
        answer = Client().post(f"/mcp/{nobody}", "{}", content_type="application/json", **headers)
        assert (answer.status_code, answer.json()) == (404, expected)
    metadata = Client().get(urlsplit(metadata_url(nobody)).path)
    assert (metadata.status_code, metadata.json()) == (404, expected)


def test_a_persona_whose_stamp_cannot_be_served_is_a_503_saying_why() -> None:
    """VX-REMOTE-2: a quarantined stamp is served to nobody, and its holder of a good token is
    told why rather than handed an empty list of tools."""
    persona = standing_persona()
    _, tokens = granted(persona)
    current = Generation.objects.get(persona=persona, number=persona.generation)
    quarantine(current, ["the file was altered"], found_by=FoundBy.CHECK)
    refused = rpc(persona, "tools/list", token=tokens["access_token"])
    assert refused.status_code == 503
    assert refused.json()["error"] == "unavailable"
    assert "is not standing" in refused.json()["detail"]
    assert "the file was altered" in refused.json()["detail"]


def test_the_authorization_server_metadata_offers_only_what_it_accepts() -> None:
    """VX-REMOTE-1: RFC 8414 metadata: the installation as issuer, S256 alone, iss in every
    authorization response; the two grants the token endpoint takes (a code its owner consented
    to, and its refresh), and no other; public clients, which send no secret, among the ways a
    client is known."""
    metadata = Client().get("/.well-known/oauth-authorization-server").json()
    base = settings.VIRGO_PUBLIC_BASE_URL
    assert metadata["issuer"] == base
    assert metadata["authorization_endpoint"] == f"{base}/oauth/authorize/"
    assert metadata["token_endpoint"] == f"{base}/oauth/token/"
    assert metadata["code_challenge_methods_supported"] == ["S256"]
    assert metadata["authorization_response_iss_parameter_supported"] is True
    assert metadata["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert "none" in metadata["token_endpoint_auth_methods_supported"]


@pytest.mark.parametrize("client_of", ["owner", "stranger"])
def test_a_client_credentials_client_gets_no_token_for_a_persona(client_of: str) -> None:
    """VX-REMOTE-1: tokens are issued only with the owner's consent. A confidential client
    allowed the client credentials grant (a superuser can register one) asks for a token for a
    persona's resource with its secret alone: no owner consented, so none is issued, whoever's
    client it is."""
    persona = standing_persona()
    user = persona.agent.owner if client_of == "owner" else make_owner("stranger")
    secret = "a-client-secret-of-forty-characters-0000"
    app = Application.objects.create(
        name="Headless",
        user=user,
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
        client_secret=secret,
    )
    refused = Client().post(
        "/oauth/token/",
        {
            "grant_type": "client_credentials",
            "client_id": app.client_id,
            "client_secret": secret,
            "resource": resource_url(persona.uuid),
            "scope": "mcp",
        },
    )
    assert refused.status_code == 400
    assert refused.json() == {
        "error": "invalid_target",
        "error_description": "only the persona's owner, signed in, can grant access to its tools",
    }
    assert not AccessToken.objects.filter(application=app).exists()


def refusal(response: Any) -> tuple[int, str]:
    return response.status_code, response["WWW-Authenticate"]


@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(lambda token, persona: token.revoke(), id="revoked"),
        pytest.param(
            lambda token, persona: AccessToken.objects.filter(pk=token.pk).update(
                expires=timezone.now() - timedelta(seconds=1)
            ),
            id="expired",
        ),
        pytest.param(
            lambda token, persona: AccessToken.objects.filter(pk=token.pk).update(
                resource=[resource_url(standing_persona(persona.agent.owner).uuid)]
            ),
            id="another-persona",
        ),
        pytest.param(
            lambda token, persona: AccessToken.objects.filter(pk=token.pk).update(resource=[]),
            id="unrestricted",
        ),
        pytest.param(
            lambda token, persona: AccessToken.objects.filter(pk=token.pk).update(
                resource=[resource_url(persona.uuid) + "/"]
            ),
            id="another-audience",
        ),
        pytest.param(
            lambda token, persona: (
                type(persona.agent.owner)
                .objects.filter(pk=persona.agent.owner_id)
                .update(is_active=False)
            ),
            id="owner-closed",
        ),
    ],
)
def test_a_token_that_does_not_stand_for_this_persona_is_refused(spoil: Any) -> None:
    """VX-REMOTE-1, VX-REMOTE-2: revoked, expired, bound to another persona or to no resource or
    another audience, or its owner's account closed: the very next call is refused, 401
    invalid_token with the metadata pointer."""
    persona = standing_persona()
    _, tokens = granted(persona)
    assert rpc(persona, "tools/list", token=tokens["access_token"]).status_code == 200
    spoil(AccessToken.objects.get(), persona)
    status, challenge = refusal(rpc(persona, "tools/list", token=tokens["access_token"]))
    assert status == 401
    assert 'error="invalid_token"' in challenge
    assert f'resource_metadata="{metadata_url(persona.uuid)}"' in challenge


def test_a_revoked_persona_serves_nobody_and_its_tokens_cannot_be_refreshed() -> None:
    """VX-REMOTE-2: revoking the persona ends the next call (410) and every refresh."""
    persona = standing_persona()
    app, tokens = granted(persona)
    persona_revoke(
        persona=persona, actor=persona.agent.owner, reason_code="retired", reason="done", via="test"
    )
    assert rpc(persona, "tools/list", token=tokens["access_token"]).status_code == 410
    refreshed = refresh(app, tokens["refresh_token"])
    assert refreshed.status_code == 400
    assert refreshed.json()["error"] == "invalid_target"


def test_a_refreshed_token_stays_bound_to_its_persona() -> None:
    """VX-REMOTE-1: refreshing gives a new token for the same resource, and the old refresh
    token is spent."""
    persona = standing_persona()
    app, tokens = granted(persona)
    renewed = refresh(app, tokens["refresh_token"])
    assert renewed.status_code == 200, renewed.content
    assert rpc(persona, "tools/list", token=renewed.json()["access_token"]).status_code == 200
    assert refresh(app, tokens["refresh_token"]).status_code == 400


def test_only_the_owner_consents_and_only_to_one_of_their_personas() -> None:
    """VX-REMOTE-1: another owner signed in, no resource, two resources, a URL that is no
    persona's endpoint: each is refused on the consent page, with the reason."""
    persona = standing_persona()
    stranger = make_owner()
    browser = Client()
    browser.force_login(stranger)
    app = public_client(stranger)
    _, challenge = pkce()
    for resources, reason in [
        ([resource_url(persona.uuid)], "only the persona's owner, signed in, can grant access"),
        ([], "name exactly one resource"),
        ([resource_url(persona.uuid)] * 2, "name exactly one resource"),
        ([settings.VIRGO_PUBLIC_BASE_URL + "/api/"], "is not the MCP endpoint of a persona"),
    ]:
        page = browser.get(authorize_query(app, challenge, resources))
        assert page.status_code == 400
        assert reason in html.unescape(page.content.decode())
    assert not AccessToken.objects.exists()


def test_an_earlier_consent_never_stands_in_for_this_one() -> None:
    """VX-REMOTE-1: a client the owner approved for one persona asks for another with
    approval_prompt=auto: the consent page is shown, not a code; a client set to skip
    authorization is refused outright."""
    persona = standing_persona()
    other = standing_persona(persona.agent.owner)
    app, _ = granted(persona)
    browser = Client()
    browser.force_login(persona.agent.owner)
    _, challenge = pkce()
    page = browser.get(
        authorize_query(app, challenge, [resource_url(other.uuid)], approval_prompt="auto")
    )
    assert page.status_code == 200 and "authorizationForm" in page.content.decode()
    Application.objects.filter(pk=app.pk).update(skip_authorization=True)
    page = browser.get(authorize_query(app, challenge, [resource_url(other.uuid)]))
    assert page.status_code == 400
    assert "skip the owner's consent" in html.unescape(page.content.decode())


def test_a_code_cannot_be_exchanged_for_another_persona() -> None:
    """VX-REMOTE-1: the token request may narrow the granted resource, never name another."""
    persona = standing_persona()
    other = standing_persona(persona.agent.owner)
    browser = Client()
    browser.force_login(persona.agent.owner)
    app = public_client(persona.agent.owner)
    code, verifier = consent(browser, app, [resource_url(persona.uuid)])
    answer = exchange(app, code, verifier, resource=resource_url(other.uuid))
    assert (answer.status_code, answer.json()["error"]) == (400, "invalid_target")


def test_the_endpoint_and_the_token_endpoint_are_rate_limited(settings: Any) -> None:
    """VX-REMOTE-1: each address has a budget of calls and of token requests; past it, 429 with
    Retry-After, before any token is looked up."""
    settings.VIRGO_MCP_RATE_LIMIT = "2/m"
    settings.VIRGO_TOKEN_RATE_LIMIT = "1/m"
    persona = standing_persona()
    assert [rpc(persona, "tools/list").status_code for _ in range(3)] == [401, 401, 429]
    limited = rpc(persona, "tools/list")
    assert int(limited["Retry-After"]) >= 1
    assert limited.json() == {
        "error": "rate_limited",
        "detail": "Too many MCP requests from this address.",
    }
    asked = [Client().post("/oauth/token/", {"grant_type": "refresh_token"}) for _ in range(2)]
    assert [answer.status_code for answer in asked] == [400, 429]
    assert asked[1]["Cache-Control"] == "no-store"


def test_the_audit_trail_names_the_connection_a_call_came_through() -> None:
    """VX-REMOTE-2: a remote call's events are the handler's, as a local call's are, and also
    name the client whose token it held; a local call's name none."""
    persona = standing_persona()
    app, tokens = granted(persona)
    outside = {"name": "workspace_read", "arguments": {"path": "../../etc/passwd"}}
    answer = rpc(persona, "tools/call", outside, tokens["access_token"])
    assert answer.json()["result"]["structuredContent"]["ok"] is False
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.CALL_REFUSED)
    assert event.channel == "runtime"
    assert event.data["connection"] == f"Agent host (OAuth client {app.client_id})"
    assert event.data["tool"] == "workspace_read"
    call(persona, "workspace_read", {"path": "../../etc/passwd"})
    local = AuditEvent.objects.filter(kind=AuditEvent.Kind.CALL_REFUSED).exclude(pk=event.pk).get()
    assert "connection" not in local.data


@pytest.mark.parametrize(
    ("query", "refused"),
    [
        ("code=c0de&state=s&iss=https%3A%2F%2Fvirgo.example.org", None),
        ("code=c0de&state=s&iss=https%3A%2F%2Fevil.example", "the code came from"),
        ("code=c0de&state=s", "the code came from"),
        ("error=access_denied&error_description=Denied&state=s", "did not grant access: Denied"),
    ],
)
@pytest.mark.django_db(False)
def test_the_host_takes_a_code_only_from_its_own_authorization_server(
    query: str, refused: str | None
) -> None:
    """VX-REMOTE-1: serving.connect's loopback redirect exchanges a code only when the answer
    names the installation the endpoint belongs to as its issuer (RFC 9207), and says so when
    the owner denied."""
    redirect = Redirect(issuer_of("https://virgo.example.org/mcp/1c9d0b37"))
    try:
        assert httpx.get(f"{redirect.uri}?{query}").status_code == 200
        if refused is None:
            assert asyncio.run(redirect.code()) == ("c0de", "s")
        else:
            with pytest.raises(SystemExit, match=refused):
                asyncio.run(redirect.code())
    finally:
        redirect.close()


@pytest.mark.django_db(False)
def test_only_a_personas_endpoint_is_connected_to() -> None:
    """VX-REMOTE-1: the host names the endpoint it was given, or refuses before any request."""
    for endpoint in ("https://virgo.example.org/", "ftp://virgo.example.org/mcp/x", "/mcp/x"):
        with pytest.raises(SystemExit, match="is not a persona's endpoint"):
            issuer_of(endpoint)


def test_a_stolen_code_is_worth_nothing_without_its_verifier_and_only_once() -> None:
    """VX-REMOTE-1: PKCE binds the code to the client that asked (a wrong verifier is
    invalid_grant) and a code is exchanged once."""
    persona = standing_persona()
    browser = Client()
    browser.force_login(persona.agent.owner)
    app = public_client(persona.agent.owner)
    code, verifier = consent(browser, app, [resource_url(persona.uuid)])
    stolen = exchange(app, code, pkce()[0])
    assert (stolen.status_code, stolen.json()["error"]) == (400, "invalid_grant")
    assert exchange(app, code, verifier).status_code == 200
    assert exchange(app, code, verifier).json()["error"] == "invalid_grant"


def test_the_consent_page_sends_codes_only_to_registered_redirects_and_s256_only() -> None:
    """VX-REMOTE-1: an unregistered redirect URI is an error shown on Virgo's page, never a
    redirect carrying a code; the plain PKCE method is refused."""
    persona = standing_persona()
    browser = Client()
    browser.force_login(persona.agent.owner)
    app = public_client(persona.agent.owner)
    _, challenge = pkce()
    query = authorize_query(app, challenge, [resource_url(persona.uuid)])
    elsewhere = browser.get(
        query.replace("127.0.0.1%3A8765%2Fcallback", "attacker.example%2Fcallback")
    )
    assert elsewhere.status_code == 400 and "Location" not in elsewhere
    assert "authorizationForm" not in elsewhere.content.decode()
    page = browser.get(query.replace("S256", "plain").replace(challenge, "p" * 43))
    form = page.context["form"]
    plain = browser.post(
        "/oauth/authorize/",
        {**{field.name: field.value() or "" for field in form.hidden_fields()}, "allow": "Allow"},
    )
    assert "code=" not in plain.get("Location", "")
    assert not Grant.objects.exists()


def test_a_token_is_read_from_the_authorization_header_alone() -> None:
    """VX-REMOTE-1: a token in the query string or a form body (which logs and caches keep) is
    not one: the answer is the 401 for a request without a token."""
    persona = standing_persona()
    _, tokens = granted(persona)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    in_query = Client().post(
        f"/mcp/{persona.uuid}?access_token={tokens['access_token']}",
        json.dumps(body),
        content_type="application/json",
    )
    assert in_query.status_code == 401 and "error=" not in in_query["WWW-Authenticate"]


@pytest.mark.parametrize("method", ["get", "delete", "put"])
def test_only_json_rpc_by_post_is_taken(method: str) -> None:
    """VX-REMOTE-1: the stateless endpoint has no stream for the server to speak first on and
    no session to end: with a good token, any method but POST is a 405 allowing POST (the
    answer the MCP streamable HTTP transport specification gives a server that offers no
    stream), and never reaches the SDK, whose GET stream would hold a web
    thread; without a token it is the 401 that names the resource metadata."""
    persona = standing_persona()
    _, tokens = granted(persona)
    headers = {"HTTP_ACCEPT": "application/json, text/event-stream"}
    send = getattr(Client(), method)
    refused = send(
        f"/mcp/{persona.uuid}", HTTP_AUTHORIZATION=f"Bearer {tokens['access_token']}", **headers
    )
    assert refused.status_code == 405 and refused["Allow"] == "POST"
    assert refused.json() == {
        "error": "method_not_allowed",
        "detail": "the endpoint takes JSON-RPC by POST only",
    }
    anonymous = send(f"/mcp/{persona.uuid}", **headers)
    assert anonymous.status_code == 401 and "resource_metadata=" in anonymous["WWW-Authenticate"]


def test_a_body_that_is_not_utf8_is_a_parse_error_not_a_500(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """VX-REMOTE-1: JSON is UTF-8, and the SDK answers a body that does not decode with a 500
    and a traceback. The endpoint answers it as JSON-RPC's parse error, naming the byte and its
    offset, and nothing is run or logged as an error."""
    persona = standing_persona()
    _, tokens = granted(persona)
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"x": "\xff"}}'
    offset = body.index(b"\xff")
    before = AuditEvent.objects.count()
    refused = Client().post(
        f"/mcp/{persona.uuid}",
        body,
        content_type="application/json",
        HTTP_ACCEPT="application/json, text/event-stream",
        HTTP_MCP_PROTOCOL_VERSION=PROTOCOL,
        HTTP_AUTHORIZATION=f"Bearer {tokens['access_token']}",
    )
    assert refused.status_code == 400
    assert refused.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32700,
            "message": f"Parse error: the body is not UTF-8 (byte 0xff at offset {offset})",
        },
    }
    assert AuditEvent.objects.count() == before
    assert not [record for record in caplog.records if record.levelname in ("ERROR", "CRITICAL")]


@pytest.fixture
def exported() -> Iterator[InMemorySpanExporter]:
    with in_memory_spans() as exporter:
        yield exporter


TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


@pytest.mark.parametrize(
    ("meta", "joins"),
    [
        ({"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01", "tracestate": "agent=1"}, True),
        ({"traceparent": "not a traceparent"}, False),
        ({}, False),
    ],
)
def test_the_calls_span_joins_the_agents_trace_from_meta(
    exported: InMemorySpanExporter, meta: dict[str, str], joins: bool
) -> None:
    """VX-REMOTE-2: W3C trace context in the request's `_meta` makes the handle() span a child
    of the agent's span; a malformed one, or none, leaves the call its own trace."""
    persona = standing_persona()
    _, tokens = granted(persona)
    params = {"name": "workspace_list", "arguments": {"path": "."}, "_meta": meta}
    assert rpc(persona, "tools/call", params, tokens["access_token"]).status_code == 200
    [span] = handle_spans(exported)
    joined = (
        format(span.context.trace_id, "032x") == TRACE_ID
        and span.parent is not None
        and format(span.parent.span_id, "016x") == PARENT_ID
    )
    assert joined is joins


def test_an_owner_grants_only_a_client_they_registered() -> None:
    """VX-REMOTE-1: a client is named by whoever registers it; one registered by another owner
    (here calling itself "Your laptop") is refused on the consent page, before any code."""
    persona = standing_persona()
    lure = public_client(make_owner(), name="Your laptop")
    browser = Client()
    browser.force_login(persona.agent.owner)
    _, challenge = pkce()
    page = browser.get(authorize_query(lure, challenge, [resource_url(persona.uuid)]))
    assert page.status_code == 400
    assert "not registered by the persona's owner" in html.unescape(page.content.decode())
    assert not Grant.objects.exists()


@pytest.mark.parametrize("persona_class", list(PersonaClass))
def test_the_remote_endpoint_is_a_fourth_consumer_naming_the_same_tools(
    persona_class: str,
) -> None:
    """V1-CONS-1, V1-CONS-4, VX-REMOTE-2: for a persona of every class, the remote endpoint
    lists exactly the tools the stamp file names, as the launcher's allowlist and the local MCP
    server do: one projection of one file, no list of its own."""
    persona = standing_persona(persona_class=persona_class)
    _, tokens = granted(persona)
    listed = rpc(persona, "tools/list", token=tokens["access_token"]).json()["result"]["tools"]
    data = stamp_path(persona.uuid, persona.generation).read_bytes()
    assert tuple(tool["name"] for tool in listed) == launcher_allowlist(data) == mcp_tool_list(data)
