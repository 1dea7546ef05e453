"""The OpenAPI 3 schema at /api/schema/ and the browsable docs page at /api/docs/.

Responses are checked against the schema by schemathesis itself, through the site's real WSGI
application (werkzeug's test client runs every middleware, in this process and on the test
database); the whole surface is attacked against a live server in test_schemathesis_live.py.
"""

import json
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any

import pytest
import schemathesis
import yaml
from django.contrib.admindocs.views import simplify_regex
from django.core.cache import cache
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from drf_spectacular.validation import validate_schema
from rest_framework.authtoken.models import Token
from werkzeug.test import Client as WSGIClient

from personas.models import Persona
from tests.factories import address, make_agent, make_owner, make_persona

pytestmark = pytest.mark.django_db

LIMIT = 64 * 1024
# Served by the site but not part of the API it documents (/metrics is the operators', / the
# landing page for people).
UNDOCUMENTED = {"/", "/api/schema/", "/api/docs/", "/metrics"}
# Served to other specifications' schemas, vendored or cited, not Virgo's (decision 216): the AI
# Catalog (cards/schemas/ai-catalog.schema.json), robots.txt, and the ARD registry API (ARD's
# spec/schemas/ard.openapi.yaml).
UNDOCUMENTED |= {
    "/.well-known/ard.json",
    "/.well-known/ai-catalog.json",
    "/robots.txt",
    "/api/ard/search",
    "/api/ard/explore",
    "/api/ard/agents",
    "/api/ard/agents/{identifier}",
}
# Likewise a persona's remote MCP endpoint (the MCP specification's streamable HTTP transport)
# and the OAuth 2.1 authorization server for it (RFC 6749, 7009, 8414, 9728), serving/.
UNDOCUMENTED |= {
    "/mcp/{persona_uuid}",
    "/.well-known/oauth-protected-resource/mcp/{persona_uuid}",
    "/.well-known/oauth-authorization-server",
    "/oauth/authorize/",
    "/oauth/token/",
    "/oauth/revoke/",
}


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def owner() -> Any:
    return make_owner("ada")


@pytest.fixture
def token(owner: Any) -> str:
    return Token.objects.create(user=owner).key


class SiteClient(WSGIClient):
    """werkzeug's client, sending what every real server sets and it leaves out."""

    def open(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("environ_base", {"REMOTE_ADDR": "127.0.0.1"})
        return super().open(*args, **kwargs)


@pytest.fixture
def wsgi() -> Iterator[WSGIClient]:
    """The site's WSGI application behind werkzeug's client, inside the test's transaction.

    Django closes the database connection as each request ends; its own test client stops
    that, and so does this (the test's transaction would go with the connection).
    """
    signals = (request_started, request_finished)
    for signal in signals:
        signal.disconnect(close_old_connections)
    yield SiteClient(get_wsgi_application())
    for signal in signals:
        signal.connect(close_old_connections)


def fetch_schema(token: str, fmt: str = "json") -> dict[str, Any]:
    response = Client().get(
        f"/api/schema/?format={fmt}", headers={"Authorization": f"Token {token}"}
    )
    assert response.status_code == 200
    return json.loads(response.content) if fmt == "json" else yaml.safe_load(response.content)


@pytest.fixture
def document(token: str) -> dict[str, Any]:
    return fetch_schema(token)


def operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document["paths"].items():
        for method, operation in item.items():
            yield path, method, operation


def site_routes() -> dict[str, Any]:
    """Every route of the URLconf outside the admin, in OpenAPI's `{name}` path syntax."""

    def walk(patterns: list[Any], prefix: str) -> Iterator[tuple[str, Any]]:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern):
                yield prefix + str(pattern.pattern), pattern.callback

    routes = {}
    for route, callback in walk(get_resolver().url_patterns, ""):
        if route.startswith("admin/"):
            continue
        path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", simplify_regex(route)).replace("{pk}", "{id}")
        routes[path] = callback
    return routes


def test_the_schema_is_valid_openapi_3(document: dict[str, Any]) -> None:
    """The document passes the OpenAPI 3.0 meta-schema, and schemathesis loads every
    operation of it."""
    assert document["openapi"].startswith("3.")
    validate_schema(document)
    loaded = schemathesis.openapi.from_dict(document)
    assert {(result.ok().path, result.ok().method) for result in loaded.get_all_operations()} == {
        (path, method) for path, method, _ in operations(document)
    }


def test_the_schema_generates_without_a_warning(tmp_path: Any) -> None:
    """Nothing drf-spectacular had to guess at (`check --deploy` reports the same warnings)."""
    call_command("spectacular", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))
    assert yaml.safe_load((tmp_path / "schema.yaml").read_text())["openapi"].startswith("3.")


def test_yaml_and_json_are_one_document(token: str) -> None:
    assert fetch_schema(token, "yaml") == fetch_schema(token, "json")


def test_the_schema_is_for_signed_in_callers(owner: Any, token: str) -> None:
    """S9-AUTH-1: like every endpoint but the public card, the schema requires authentication;
    every signed-in owner gets the same document, with nothing of anyone's data in it."""
    anonymous = Client().get("/api/schema/?format=json")
    assert anonymous.status_code == 401
    assert anonymous["WWW-Authenticate"] == "Token"

    other = Token.objects.create(user=make_owner("grace")).key
    make_persona(make_agent(owner), name="Private Persona")
    assert fetch_schema(other) == fetch_schema(token)
    assert "Private Persona" not in json.dumps(fetch_schema(token))

    session = Client()
    session.force_login(owner)
    assert session.get("/api/schema/?format=json").status_code == 200


def test_every_route_of_the_site_is_documented_and_nothing_else(
    document: dict[str, Any],
) -> None:
    """Each documented path is served by the site, and each served path outside the admin is
    documented, the plain Django views (card, health probes, hub callback) included."""
    routes = site_routes()
    assert set(document["paths"]) == set(routes) - UNDOCUMENTED
    for path, method, _ in operations(document):
        actions = getattr(routes[path], "actions", None)
        if actions is not None:
            assert method in actions, f"{method.upper()} {path} is documented but not routed"


def test_every_operation_documents_its_refusals(document: dict[str, Any]) -> None:
    """S9-BODY-1, S9-RL-1, S9-RL-2, S9-RL-3: every write documents 413; every rate-limited
    operation documents 429 with a required Retry-After header."""
    for path, method, operation in operations(document):
        responses = operation["responses"]
        if "requestBody" in operation:
            assert "413" in responses, f"{method.upper()} {path}"
        if "429" in responses:
            header = responses["429"]["headers"]["Retry-After"]
            assert header["required"] is True, f"{method.upper()} {path}"
    throttled = {
        (path, method) for path, method, operation in operations(document)
        if "429" in operation["responses"]
    }  # fmt: skip
    assert {
        ("/a/{persona_id}/.well-known/agent-card.json", "get"),
        ("/api/directory/", "get"),
        ("/api/auth/token/", "post"),
        ("/api/personas/", "post"),
        ("/api/personas/{uuid}/", "patch"),
        ("/api/agents/{id}/", "delete"),
    } <= throttled
    assert ("/api/personas/", "get") not in throttled


def test_strict_inputs_are_closed_objects(document: dict[str, Any]) -> None:
    """The owners' input shapes refuse unknown keys, and the schema says so."""
    schemas = document["components"]["schemas"]
    for name in ("AgentInput", "PersonaInput", "PersonaCreateInput", "PatchedPersonaInput"):
        assert schemas[name]["additionalProperties"] is False, name
    assert "skills" not in schemas["PersonaInput"]["properties"]


def write_operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, method, operation in operations(document):
        if "requestBody" in operation:
            yield path, method, operation


def test_a_body_over_64_kib_gets_the_documented_413_on_every_write(
    owner: Any, token: str, document: dict[str, Any], wsgi: WSGIClient
) -> None:
    """S9-BODY-1: for every operation of the schema that takes a body, 64 KiB + 1 byte of
    otherwise well-formed JSON is refused with 413, the response conforms to the schema, and
    nothing changed."""
    agent = make_agent(owner)
    persona = make_persona(agent)
    values = {"id": str(agent.pk), "uuid": str(persona.uuid)}
    before = list(Persona.objects.values())
    loaded = schemathesis.openapi.from_dict(document)
    writes = list(write_operations(document))
    assert len(writes) >= 8
    for path, method, _ in writes:
        body = json.dumps({"name": "x" * LIMIT}).encode()
        assert len(body) > LIMIT
        response = wsgi.open(
            path.format(**values),
            method=method.upper(),
            data=body,
            headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
        )
        assert response.status_code == 413, f"{method.upper()} {path}"
        loaded[path][method.upper()].validate_response(response)
    assert list(Persona.objects.values()) == before


def test_a_spent_mutation_budget_gets_the_documented_429(
    owner: Any, token: str, document: dict[str, Any], wsgi: WSGIClient, settings: Any
) -> None:
    """S9-RL-3: the owner's budget refuses with 429, the schema's body and Retry-After."""
    settings.VIRGO_MUTATION_RATE_LIMIT = "1/m"
    persona = make_persona(make_agent(owner))
    loaded = schemathesis.openapi.from_dict(document)
    headers = {"Authorization": f"Token {token}"}
    path = f"/api/personas/{persona.uuid}/"
    answers = [wsgi.patch(path, json={"description": f"take {n}"}, headers=headers) for n in (1, 2)]
    assert [answer.status_code for answer in answers] == [200, 429]
    for answer in answers:
        loaded["/api/personas/{uuid}/"]["PATCH"].validate_response(answer)
    assert int(answers[1].headers["Retry-After"]) >= 1


@pytest.mark.parametrize(
    ("setting", "method", "path"),
    [
        ("VIRGO_DIRECTORY_RATE_LIMIT", "GET", "/api/directory/"),
        ("VIRGO_TOKEN_RATE_LIMIT", "POST", "/api/auth/token/"),
        ("VIRGO_CARD_RATE_LIMIT", "GET", "/a/{persona_id}/.well-known/agent-card.json"),
    ],
)
def test_every_other_budget_refuses_with_the_documented_429(
    owner: Any,
    token: str,
    document: dict[str, Any],
    wsgi: WSGIClient,
    settings: Any,
    setting: str,
    method: str,
    path: str,
) -> None:
    """S9-RL-1, S9-RL-2: the directory's per-principal budget, the token endpoint's per-address
    one and the card's per-address one each refuse with the schema's 429 and Retry-After."""
    setattr(settings, setting, "1/m")
    persona = make_persona(make_agent(owner), discoverable=True)
    loaded = schemathesis.openapi.from_dict(document)
    url = path.format(persona_id=persona.uuid)
    request = {"headers": {"Authorization": f"Token {token}"}}
    if method == "POST":
        request = {"json": {"username": "ada", "password": "wrong"}}
    answers = [wsgi.open(url, method=method, **request) for _ in range(2)]
    assert answers[1].status_code == 429
    for answer in answers:
        loaded[path][method].validate_response(answer)
    assert int(answers[1].headers["Retry-After"]) >= 1


def test_field_errors_and_missing_objects_conform(
    owner: Any, token: str, document: dict[str, Any], wsgi: WSGIClient
) -> None:
    """S9-SCN-2: a refused create names each field in the documented 422 body; an unknown
    persona is the documented 404."""
    agent = make_agent(owner, granted_verbs=["claim"], granted_queues=["reviews"])
    address("work/core/reviewer")
    loaded = schemathesis.openapi.from_dict(document)
    headers = {"Authorization": f"Token {token}"}
    refused = wsgi.post(
        "/api/personas/",
        json={
            "agent": agent.pk,
            "name": "Too wide",
            "system_prompt": "Review.",
            "verb_subset": ["claim", "create_for"],
            "queues": ["deploys"],
            "persona_class": "coder-deputy",
            "address": "work/core/reviewer",
        },
        headers=headers,
    )
    assert refused.status_code == 422
    assert set(refused.json) >= {"verb_subset", "queues"}
    loaded["/api/personas/"]["POST"].validate_response(refused)
    missing = wsgi.get("/api/personas/6f1c1b8e-3f5e-4a0e-9a57-2b7c6d8e9f01/", headers=headers)
    assert missing.status_code == 404
    loaded["/api/personas/{uuid}/"]["GET"].validate_response(missing)
    assert not Persona.objects.exists()


# The docs page ------------------------------------------------------------------------------


class PageParts(HTMLParser):
    """What an HTML page would make a browser run or load."""

    def __init__(self) -> None:
        super().__init__()
        self.loads: list[str] = []
        self.inline: list[str] = []
        self._open: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        named = dict(attrs)
        self.inline += [name for name, _ in attrs if name.startswith("on") or name == "style"]
        if tag == "script" and not named.get("src"):
            self._open = "script"
        if tag == "style":
            self._open = "style"
        for name in ("src", "href"):
            if named.get(name) and tag in {"script", "link", "img"}:
                self.loads.append(str(named[name]))

    def handle_data(self, data: str) -> None:
        if self._open and data.strip():
            self.inline.append(f"<{self._open}> {data.strip()[:40]}")

    def handle_endtag(self, tag: str) -> None:
        self._open = None


def test_the_docs_page_sends_anonymous_callers_to_sign_in() -> None:
    response = Client().get("/api/docs/")
    assert response.status_code == 302
    assert response["Location"] == "/admin/login/?next=/api/docs/"


def test_the_docs_page_loads_only_from_this_site_and_runs_nothing_inline(owner: Any) -> None:
    """S9-HDR-1: the HTML page keeps CSP default-src 'self' (plus data: images, which Swagger
    UI's stylesheet draws its icons with); it runs no inline script or style, and every file it
    loads is served by the site itself."""
    client = Client()
    client.force_login(owner)
    response = client.get("/api/docs/")
    assert response.status_code == 200
    assert response["Content-Security-Policy"] == "default-src 'self'; img-src 'self' data:"
    assert response["X-Frame-Options"] == "DENY"
    page = PageParts()
    page.feed(response.content.decode())
    assert page.inline == []
    assert len(page.loads) == 5
    for url in page.loads:
        assert url.startswith("/static/"), url
        served = client.get(url)
        assert served.status_code == 200, url
        served.close()
    assert b'data-schema-url="/api/schema/"' in response.content


def refs(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        if isinstance(value.get("$ref"), str):
            yield value["$ref"]
        for item in value.values():
            yield from refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from refs(item)


def test_every_reference_resolves_every_time(token: str) -> None:
    """Generating the schema leaves nothing behind: the third document is the first, and each
    of its $refs names a component it carries. (The enum hook once rewrote a shared
    component in place, and later documents referred to a component they no longer had.)"""
    first, _, third = (fetch_schema(token) for _ in range(3))
    assert third == first
    schemas = third["components"]["schemas"]
    for ref in refs(third):
        assert ref.startswith("#/components/schemas/"), ref
        assert ref.removeprefix("#/components/schemas/") in schemas, ref
