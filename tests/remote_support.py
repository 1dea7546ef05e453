"""What the remote endpoint's tests share (serving/): an owner's client, the authorization code
flow with PKCE as a client and a browser run it, JSON-RPC to a persona's endpoint in-process, the
owner's browser and an agent host's shell against a live server, and that server (`web`: a real
virgo-web on production settings)."""

import base64
import hashlib
import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from django.conf import settings
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.test import Client
from oauth2_provider.models import Application

from serving.resources import resource_url
from tests.live import RedisServer, WebServer
from tests.owner_clients import PASSWORD, form_data
from tests.web_support import deployment_env

REDIRECT = "http://127.0.0.1:8765/callback"
PROTOCOL = "2025-11-25"


def public_client(owner: Any, **fields: Any) -> Application:
    fields.setdefault("name", "Agent host")
    fields.setdefault("redirect_uris", REDIRECT)
    return Application.objects.create(
        user=owner,
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        **fields,
    )


def signs_in_as_production_does(owner: Any) -> None:
    """The owner's password hashed as a production installation hashes it: a live server on
    production settings does not know the test settings' MD5."""
    owner.password = PBKDF2PasswordHasher().encode(PASSWORD, secrets.token_hex(8), iterations=1000)
    owner.save(update_fields=["password"])


def refresh(app: Application, refresh_token: str) -> Any:
    """The client's refresh request to the token endpoint, in-process."""
    return Client().post(
        "/oauth/token/",
        {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": app.client_id},
    )


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def authorize_query(app: Application, challenge: str, resources: list[str], **extra: str) -> str:
    params = [
        ("response_type", "code"),
        ("client_id", app.client_id),
        ("redirect_uri", REDIRECT),
        ("scope", "mcp"),
        ("state", "st4te"),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256"),
        *(("resource", resource) for resource in resources),
        *extra.items(),
    ]
    return "/oauth/authorize/?" + urlencode(params)


def consent(
    browser: Client, app: Application, resources: list[str], **extra: str
) -> tuple[str, str]:
    """The owner's browser approves the client: the code it is sent back with, and the verifier."""
    verifier, challenge = pkce()
    page = browser.get(authorize_query(app, challenge, resources, **extra))
    assert page.status_code == 200, page.content[:500]
    form = page.context["form"]
    posted = browser.post(
        "/oauth/authorize/",
        {**{f.name: f.value() or "" for f in form.hidden_fields()}, "allow": "Allow"},
    )
    assert posted.status_code == 302, posted.content[:500]
    answer = parse_qs(urlsplit(posted["Location"]).query)
    assert answer["state"] == ["st4te"]
    assert answer["iss"] == [settings.VIRGO_PUBLIC_BASE_URL]
    return answer["code"][0], verifier


def exchange(app: Application, code: str, verifier: str, **extra: str) -> Any:
    return Client().post(
        "/oauth/token/",
        {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT,
            "client_id": app.client_id,
            "code_verifier": verifier,
            **extra,
        },
    )


def granted(persona: Any) -> tuple[Application, dict[str, Any]]:
    """A client its owner approved for `persona`: the tokens it was given."""
    owner = persona.agent.owner
    browser = Client()
    browser.force_login(owner)
    app = public_client(owner)
    code, verifier = consent(browser, app, [resource_url(persona.uuid)])
    tokens = exchange(app, code, verifier, resource=resource_url(persona.uuid))
    assert tokens.status_code == 200, tokens.content
    return app, tokens.json()


def rpc(
    persona: Any, method: str, params: dict[str, Any] | None = None, token: str | None = None
) -> Any:
    headers = {
        "HTTP_ACCEPT": "application/json, text/event-stream",
        "HTTP_MCP_PROTOCOL_VERSION": PROTOCOL,
    }
    if token is not None:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
    return Client().post(
        f"/mcp/{persona.uuid}", json.dumps(body), content_type="application/json", **headers
    )


class OwnersBrowser:
    """The owner's browser: signed in to the admin with the password, it approves the client on
    the consent page the authorization URL opens, and hands back what the redirect carried."""

    def __init__(self, base_url: str, username: str, password: str = PASSWORD) -> None:
        self.http = httpx.Client(base_url=base_url, timeout=30)
        login = self.http.get("/admin/login/")
        signed_in = self.http.post(
            "/admin/login/",
            data={**form_data(login, "login-form"), "username": username, "password": password},
        )
        assert signed_in.status_code == 302, signed_in.text[:500]
        self.answer: dict[str, list[str]] = {}
        self.consent_pages: list[str] = []

    async def approve(self, authorization_url: str) -> None:
        page = self.http.get(authorization_url)
        assert page.status_code == 200, page.text[:500]
        self.consent_pages.append(page.text)
        posted = self.http.post(
            urlsplit(authorization_url).path,
            data={**form_data(page, "authorizationForm"), "allow": "Allow"},
        )
        assert posted.status_code == 302, posted.text[:500]
        self.location = posted.headers["Location"]
        self.answer = parse_qs(urlsplit(self.location).query)

    async def callback(self) -> tuple[str, str | None]:
        return self.answer["code"][0], self.answer.get("state", [None])[0]


def host_environment(home: Path) -> dict[str, str]:
    """An agent host's shell: a PATH and a HOME, nothing of the installation."""
    return {"PATH": os.environ["PATH"], "HOME": str(home)}


@pytest.fixture
def web(private_redis: RedisServer, tmp_path: Path, settings: Any) -> Iterator[WebServer]:
    env = deployment_env(private_redis, VIRGO_MCP_TOKEN_SECONDS="3", WEB_CONCURRENCY="2")
    # Plain HTTP on loopback: the owner's browser must get its session and CSRF cookies back.
    env.update(SESSION_COOKIE_SECURE="0", CSRF_COOKIE_SECURE="0")
    server = WebServer(tmp_path, env)
    # The installation's one public base URL (VX-SCALE-4) is this server's: resources name it.
    server.env["VIRGO_PUBLIC_BASE_URL"] = settings.VIRGO_PUBLIC_BASE_URL = server.base_url
    # This process's authorization server too, for the grants the tests make in it.
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "OIDC_ISS_ENDPOINT": server.base_url}
    server.start()
    yield server
    server.stop()
