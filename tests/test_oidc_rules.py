"""OpenID Connect's rules, each checked against an issuer that breaks it (personas.oidc, VX-ID-1):
what the authorization and token requests carry, which ID tokens are refused and with what
words, and what the page says when an issuer answers with an error, garbage, or not at all.

The issuer is in this process, on loopback (as tests/test_oidc_config.py's): a discovery
document, a JWKS publishing one RSA key, and a token endpoint whose answer each test sets; it
records the token requests it gets. The well-behaved issuer is tests/test_oidc.py's real
provider.
"""

import base64
import functools
import hashlib
import html
import json
import logging
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlsplit

import jwt
import pytest
import requests
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth import get_user_model
from django.http import Http404
from django.test import Client

from personas import oidc
from personas.models import OwnerIdentity
from tests.factories import make_owner, run_on_commit
from tests.owner_clients import fresh_rate_limits  # noqa: F401 (autouse fixture)

# `mutation`: its issuer is a thread of the test process; it needs nothing else.
pytestmark = [pytest.mark.live, pytest.mark.mutation, pytest.mark.django_db]

KID = "scripted-key"
CALLBACK = "http://testserver/admin/oidc/local/callback/"
User = get_user_model()


@functools.cache
def signing_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


class ScriptedIssuer:
    """An issuer on 127.0.0.1 whose answers a test sets. Its JWK names no `alg`, so the one key
    serves every RS algorithm; what the document offers is the test's to say."""

    def __init__(self) -> None:
        self.document: dict[str, Any] = {}  # changes to the discovery document
        self.claims: dict[str, Any] = {}  # changes to the ID token the token endpoint hands out
        self.token_answer: tuple[int, Any] | None = None  # (status, JSON or bytes)
        self.delays: dict[str, float] = {}  # path -> seconds before answering
        self.jwk_alg: str | None = None  # the `alg` its JWK names, if any
        self.token_requests: list[tuple[dict[str, str], dict[str, str]]] = []
        self.discovery_fetches = 0
        self.nonce = ""
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            def answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                path = urlsplit(self.path).path
                time.sleep(scripted.delays.get(path, 0))
                status, content = scripted.respond(path, dict(self.headers), body)
                raw = content if isinstance(content, bytes) else json.dumps(content).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_GET = do_POST = answer

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def discovery(self) -> dict[str, Any]:
        return {
            "issuer": self.base,
            "authorization_endpoint": f"{self.base}/authorize",
            "token_endpoint": f"{self.base}/token",
            "jwks_uri": f"{self.base}/jwks",
            **self.document,
        }

    def id_token(
        self,
        *,
        algorithm: str = "RS256",
        key: rsa.RSAPrivateKey | None = None,
        **changes: Any,
    ) -> str:
        """An ID token for client `virgo` signed with the published key; a claim changed to
        None is left out."""
        now = int(time.time())
        claims = {
            "iss": self.base,
            "sub": "scripted-sub",
            "aud": ["virgo"],
            "iat": now,
            "exp": now + 600,
            "nonce": self.nonce,
            **changes,
        }
        claims = {name: value for name, value in claims.items() if value is not None}
        return jwt.encode(claims, key or signing_key(), algorithm=algorithm, headers={"kid": KID})

    def respond(self, path: str, headers: dict[str, str], body: str) -> tuple[int, Any]:
        if path == oidc.DISCOVERY_PATH:
            self.discovery_fetches += 1
            return 200, self.discovery()
        if path == "/jwks":
            jwk = jwt.algorithms.RSAAlgorithm.to_jwk(signing_key().public_key(), as_dict=True)
            jwk.update(kid=KID, use="sig")
            if self.jwk_alg:
                jwk["alg"] = self.jwk_alg
            return 200, {"keys": [jwk]}
        if path == "/token":
            self.token_requests.append((headers, dict(parse_qsl(body))))
            if self.token_answer is not None:
                return self.token_answer
            return 200, {
                "id_token": self.id_token(**self.claims),
                "access_token": "an-access-token",
                "token_type": "Bearer",
            }
        return 404, {"error": "not_found"}


@pytest.fixture
def scripted(settings: Any) -> Iterator[ScriptedIssuer]:
    """The scripted issuer, configured as `local` ("Local ID", client `virgo`), admitting
    everyone. Its discovery document is not kept past the test: a later issuer may get its
    port."""
    issuer = ScriptedIssuer()
    settings.VIRGO_OIDC_ISSUERS = {
        "local": {
            "name": "local",
            "label": "Local ID",
            "discovery_url": issuer.base + oidc.DISCOVERY_PATH,
            "client_id": "virgo",
            "client_secret": "s3cret",
            "scopes": "openid profile",
            "admit": "everyone",
        }
    }
    try:
        yield issuer
    finally:
        issuer.stop()
        with oidc._discovered_lock:
            oidc._discovered.pop(issuer.base + oidc.DISCOVERY_PATH, None)


def client_of(scripted: ScriptedIssuer) -> oidc.IssuerClient:
    return oidc.IssuerClient(oidc.issuer_named("local"))


def started(
    browser: Client, scripted: ScriptedIssuer, url: str = "/admin/oidc/local/login/"
) -> dict[str, str]:
    """The browser starts a sign-in (or, with the link URL, a link): the authorization
    request's parameters. The scripted issuer will put its nonce in the ID token."""
    response = browser.post(url) if "link" in url else browser.get(url)
    assert response.status_code == 302, response.content[:400]
    location = urlsplit(response["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == f"{scripted.base}/authorize"
    params = {name: values[0] for name, values in parse_qs(location.query).items()}
    scripted.nonce = params["nonce"]
    return params


def answered(browser: Client, scripted: ScriptedIssuer, **query: str) -> Any:
    """A sign-in started and answered at the callback with a code (or with `query`)."""
    params = started(browser, scripted)
    with run_on_commit():
        return browser.get(
            "/admin/oidc/local/callback/", {"state": params["state"], "code": "the-code", **query}
        )


def refusal(response: Any) -> tuple[int, str]:
    """The refused page's status and the reason it gives, as the person reads it."""
    page = response.content.decode()
    found = re.search(r'<p class="errornote">(.*?)</p>', page, re.S)
    assert found and "<title>Sign-in refused | Virgo</title>" in page, page[:400]
    return response.status_code, html.unescape(found.group(1))


def signed_in(browser: Client) -> Any:
    response = browser.get("/admin/")
    return response.wsgi_request.user if response.status_code == 200 else None


def logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "personas.oidc"]


# The authorization request -------------------------------------------------------------------


def test_the_authorization_request_asks_for_the_issuers_scopes_with_a_nonce_and_pkce(
    scripted: ScriptedIssuer,
) -> None:
    """VX-ID-1: the person is sent to the issuer's authorization endpoint for a code, for client
    `virgo`, with the scopes configured for this issuer, this issuer's own callback as the
    redirect URI, a state and a nonce, and a PKCE challenge (S256) whose verifier stays in the
    session beside the flow's issuer."""
    browser = Client()
    params = started(browser, scripted)
    flow = browser.session["oidc_states"][params["state"]]
    digest = hashlib.sha256(flow["code_verifier"].encode()).digest()
    challenge = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    assert params == {
        "response_type": "code",
        "scope": "openid profile",
        "client_id": "virgo",
        "redirect_uri": CALLBACK,
        "state": params["state"],
        "nonce": flow["nonce"],
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    assert len(params["nonce"]) >= 32 and len(params["state"]) >= 32
    assert (flow["issuer"], flow["link"]) == ("local", None)


def test_a_link_asked_for_without_signing_in_goes_to_the_sign_in_page(
    scripted: ScriptedIssuer,
) -> None:
    """VX-ID-1: only a signed-in owner links; anybody else is sent to sign in first, and back to
    the OpenID Connect page after, and no flow is started."""
    browser = Client()
    response = browser.post("/admin/oidc/local/link/")
    assert (response.status_code, response["Location"]) == (302, "/admin/login/?next=/admin/oidc/")
    assert "oidc_states" not in browser.session
    assert scripted.discovery_fetches == 0


# Discovery -------------------------------------------------------------------------------------


def test_the_discovery_document_is_fetched_again_only_once_it_is_old(
    scripted: ScriptedIssuer, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-ID-1: an issuer's discovery document is kept VIRGO_OIDC_DISCOVERY_SECONDS: asked for
    within that, it is not fetched again; at that age, it is."""
    settings.VIRGO_OIDC_DISCOVERY_SECONDS = 100
    clock = SimpleNamespace(now=5000.0)
    monkeypatch.setattr(oidc, "time", SimpleNamespace(monotonic=lambda: clock.now, time=time.time))
    issuer = oidc.issuer_named("local")
    assert oidc.discovered(issuer) == scripted.discovery()
    clock.now += 99.5
    assert oidc.discovered(issuer) == scripted.discovery()
    assert scripted.discovery_fetches == 1
    scripted.document["token_endpoint"] = f"{scripted.base}/token-moved"
    clock.now = 5100.0
    assert oidc.discovered(issuer)["token_endpoint"] == f"{scripted.base}/token-moved"
    assert scripted.discovery_fetches == 2


def test_an_issuer_that_does_not_answer_its_discovery_in_time_ends_on_a_clear_page(
    scripted: ScriptedIssuer, settings: Any
) -> None:
    """VX-ID-1: discovery waits VIRGO_OIDC_TIMEOUT_SECONDS, not forever: a slow issuer is a 502
    naming it."""
    settings.VIRGO_OIDC_TIMEOUT_SECONDS = 0.2
    scripted.delays[oidc.DISCOVERY_PATH] = 1.5
    response = Client().get("/admin/oidc/local/login/")
    assert refusal(response) == (
        502,
        "Local ID could not be reached for its configuration; try again shortly.",
    )


def test_an_unreachable_issuer_is_logged_with_its_name_and_the_error(
    scripted: ScriptedIssuer, settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """VX-ID-1: the operator's log says which issuer's discovery failed, and how."""
    settings.VIRGO_OIDC_ISSUERS["local"]["discovery_url"] = (
        "http://127.0.0.1:9" + oidc.DISCOVERY_PATH
    )
    with caplog.at_level(logging.WARNING, logger="personas.oidc"):
        response = Client().get("/admin/oidc/local/login/")
    assert refusal(response)[0] == 502
    (message,) = logged(caplog)
    assert message.startswith(
        "OpenID Connect discovery of local failed: HTTPConnectionPool(host='127.0.0.1', port=9)"
    ), message


# The token request -----------------------------------------------------------------------------


def test_the_code_is_exchanged_with_http_basic_unless_the_issuer_offers_post(
    scripted: ScriptedIssuer,
) -> None:
    """VX-ID-1: the token request carries the code, this issuer's redirect URI and the PKCE
    verifier; the client authenticates with HTTP Basic (what a discovery document that names
    no method means), and signs in."""
    browser = Client()
    params = started(browser, scripted)
    verifier = browser.session["oidc_states"][params["state"]]["code_verifier"]
    with run_on_commit():
        response = browser.get(
            "/admin/oidc/local/callback/", {"state": params["state"], "code": "the-code"}
        )
    assert (response.status_code, response["Location"]) == (302, "/admin/")
    ((headers, form),) = scripted.token_requests
    assert headers["Authorization"] == "Basic " + base64.b64encode(b"virgo:s3cret").decode()
    assert form == {
        "client_id": "virgo",
        "grant_type": "authorization_code",
        "code": "the-code",
        "redirect_uri": CALLBACK,
        "code_verifier": verifier,
    }
    user = signed_in(browser)
    identity = OwnerIdentity.objects.get(user=user)
    assert (identity.identity_issuer, identity.identity_subject) == (scripted.base, "scripted-sub")


@pytest.mark.parametrize(
    "methods", [["client_secret_post"], ["client_secret_basic", "client_secret_post"]]
)
def test_the_client_secret_is_posted_to_an_issuer_that_offers_that(
    scripted: ScriptedIssuer, methods: list[str]
) -> None:
    """VX-ID-1: an issuer whose discovery document offers client_secret_post gets the secret in
    the form, and no Authorization header."""
    scripted.document["token_endpoint_auth_methods_supported"] = methods
    assert answered(Client(), scripted).status_code == 302
    ((headers, form),) = scripted.token_requests
    assert "Authorization" not in headers
    assert (form["client_id"], form["client_secret"]) == ("virgo", "s3cret")


def test_a_sign_in_with_no_nonce_in_its_flow_asks_the_issuer_nothing(
    scripted: ScriptedIssuer,
) -> None:
    """VX-ID-1: a flow whose nonce is gone cannot check an ID token, so its code is not even
    exchanged."""
    browser = Client()
    params = started(browser, scripted)
    session = browser.session
    del session["oidc_states"][params["state"]]["nonce"]
    session.save()
    response = browser.get(
        "/admin/oidc/local/callback/", {"state": params["state"], "code": "the-code"}
    )
    assert refusal(response) == (403, "This sign-in has no nonce to check the ID token against.")
    assert scripted.token_requests == []
    assert signed_in(browser) is None


@pytest.mark.parametrize(
    ("status", "body", "why"),
    [
        (400, {"error": "invalid_grant", "error_description": "used"}, "invalid_grant"),
        (400, {"error": "e" * 150}, "e" * 100),
        (401, {"error": 42}, "HTTP 401"),
        (400, {"error": ""}, "HTTP 400"),
        (400, ["invalid_grant"], "HTTP 400"),
        (500, b"<html>Internal Server Error</html>", "HTTP 500"),
    ],
)
def test_a_refused_code_names_the_issuers_error(
    scripted: ScriptedIssuer, status: int, body: Any, why: str
) -> None:
    """VX-ID-1: a token endpoint that refuses the code ends on a 400 naming its error code (at
    most 100 characters), or its HTTP status when it gives no error code."""
    scripted.token_answer = (status, body)
    browser = Client()
    assert refusal(answered(browser, scripted)) == (
        400,
        f"Local ID refused the sign-in code ({why}). Start the sign-in again.",
    )
    assert signed_in(browser) is None


def test_an_http_error_without_an_answer_is_named_so() -> None:
    """VX-ID-1: a token error with no response to read is "no answer"."""
    assert oidc._token_error(requests.HTTPError("Get Token Error")) == "no answer"


@pytest.mark.parametrize(
    ("token_answer", "document", "delay"),
    [
        (None, {"token_endpoint": "http://127.0.0.1:9/token"}, 0),
        ((200, b"not json"), {}, 0),
        (None, {}, 1.5),
    ],
)
def test_a_token_endpoint_that_cannot_be_used_ends_on_a_clear_page(
    scripted: ScriptedIssuer,
    settings: Any,
    caplog: pytest.LogCaptureFixture,
    token_answer: Any,
    document: dict[str, Any],
    delay: float,
) -> None:
    """VX-ID-1: a token endpoint that cannot be reached, answers what is not JSON, or does not
    answer within VIRGO_OIDC_TIMEOUT_SECONDS, is a 502 (the issuer's fault), and the operator's
    log names the issuer."""
    settings.VIRGO_OIDC_TIMEOUT_SECONDS = 0.5
    scripted.token_answer = token_answer
    scripted.document.update(document)
    scripted.delays["/token"] = delay
    browser = Client()
    with caplog.at_level(logging.WARNING, logger="personas.oidc"):
        response = answered(browser, scripted)
    reason = "Local ID could not be reached to finish the sign-in; try again."
    assert refusal(response) == (502, reason)
    failed, refused = logged(caplog)
    assert failed.startswith("token request to local failed: ") and len(failed) > 40, failed
    assert refused == f"OpenID Connect sign-in with local refused: {reason}"
    assert signed_in(browser) is None


@pytest.mark.parametrize(
    "tokens",
    [
        ["an", "array"],
        {"access_token": "a", "token_type": "Bearer"},
        {"id_token": 42},
        {"id_token": ""},
    ],
)
def test_an_answer_without_an_id_token_ends_on_a_clear_page(
    scripted: ScriptedIssuer, tokens: Any
) -> None:
    """VX-ID-1: a token answer that holds no ID token (not an object, none, not a string,
    empty) is a 502."""
    scripted.token_answer = (200, tokens)
    assert refusal(answered(Client(), scripted)) == (
        502,
        "Local ID answered without an ID token.",
    )


# The ID token ----------------------------------------------------------------------------------


def test_a_good_id_token_gives_its_claims(scripted: ScriptedIssuer) -> None:
    """VX-ID-1: a token signed with the published key, for this client, from this issuer, in
    date, with the sign-in's nonce and a subject, is taken: its claims as signed."""
    scripted.nonce = "the-nonce"
    claims = client_of(scripted).verify_token(scripted.id_token(), nonce="the-nonce")
    assert (claims["iss"], claims["sub"], claims["aud"]) == (
        scripted.base,
        "scripted-sub",
        ["virgo"],
    )


def test_a_token_is_only_checked_with_a_nonce(scripted: ScriptedIssuer) -> None:
    """VX-ID-1: the verification refuses to run without the nonce the sign-in sent."""
    with pytest.raises(oidc.SignInRefused) as refused:
        client_of(scripted).verify_token(scripted.id_token())
    assert refused.value.reason == "An ID token is only taken with the nonce its sign-in sent."


def refused_token(scripted: ScriptedIssuer, token: str, nonce: str = "the-nonce") -> str:
    with pytest.raises(oidc.SignInRefused) as refused:
        client_of(scripted).verify_token(token, nonce=nonce)
    assert refused.value.status == 403
    return refused.value.reason


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"nonce": "another-sign-ins"}, "The ID token does not carry the nonce this sign-in sent: "
         "it was not issued for this sign-in."),
        ({"aud": ["another-client"]}, "The ID token was issued to another client, not to this "
         "installation (virgo)."),
        ({"iss": "http://127.0.0.1:9"}, "The ID token was not issued by Local ID."),
        ({"exp": -120}, "The ID token has expired. Start the sign-in again."),
        ({"iat": 3600}, "The ID token was issued in the future."),
        ({"iat": "soon"}, "The ID token cannot be read as a signed ID token."),
        ({"sub": ""}, "The ID token names no subject."),
        ({"aud": ["virgo", "another-client"]}, "The ID token names other audiences but not "
         "this client as azp."),
        ({"aud": ["virgo", "another-client"], "azp": "another-client"}, "The ID token names "
         "other audiences but not this client as azp."),
        *[({claim: None}, f"The ID token lacks its {claim!r} claim.") for claim in
          oidc.REQUIRED_CLAIMS],
    ],
)  # fmt: skip
def test_an_id_token_failing_a_check_is_refused_saying_which(
    scripted: ScriptedIssuer, changes: dict[str, Any], reason: str
) -> None:
    """VX-ID-1: each check of the ID token refuses it in its own words: the nonce, the audience
    (and azp when there are others), the issuer, the expiry (past the leeway), the issue time,
    the subject, and each required claim."""
    scripted.nonce = "the-nonce"
    now = int(time.time())
    for claim in ("exp", "iat"):
        if isinstance(changes.get(claim), int):
            changes = {**changes, claim: now + changes[claim]}
    assert refused_token(scripted, scripted.id_token(**changes)) == reason


def test_the_clock_may_be_off_by_the_leeway(scripted: ScriptedIssuer, settings: Any) -> None:
    """VX-ID-1: VIRGO_OIDC_LEEWAY_SECONDS of clock skew is forgiven, in both directions."""
    settings.VIRGO_OIDC_LEEWAY_SECONDS = 60
    scripted.nonce = "the-nonce"
    now = int(time.time())
    verifier = client_of(scripted)
    late = scripted.id_token(exp=now - 30)
    early = scripted.id_token(iat=now + 30)
    assert verifier.verify_token(late, nonce="the-nonce")["exp"] == now - 30
    assert verifier.verify_token(early, nonce="the-nonce")["iat"] == now + 30


def test_another_audience_is_taken_when_this_client_is_the_azp(scripted: ScriptedIssuer) -> None:
    """VX-ID-1: an ID token for several audiences is taken when its azp is this client."""
    scripted.nonce = "the-nonce"
    token = scripted.id_token(aud=["virgo", "another-client"], azp="virgo")
    assert client_of(scripted).verify_token(token, nonce="the-nonce")["azp"] == "virgo"


def test_a_token_signed_otherwise_than_the_issuer_publishes_is_refused_saying_how(
    scripted: ScriptedIssuer,
) -> None:
    """VX-ID-1: a token signed with an algorithm the issuer does not publish, or by another key
    under the published key's id, is refused in words that say so."""
    scripted.document["id_token_signing_alg_values_supported"] = ["RS256", "ES256"]
    scripted.nonce = "the-nonce"
    assert refused_token(scripted, scripted.id_token(algorithm="RS384")) == (
        "The ID token is signed with 'RS384'; Local ID publishes RS256, ES256."
    )
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    assert refused_token(scripted, scripted.id_token(key=other)) == (
        "The ID token's signature does not verify against Local ID's published key."
    )


def test_an_algorithm_the_issuer_publishes_is_taken(scripted: ScriptedIssuer) -> None:
    """VX-ID-1: an issuer that signs with RS384 (and says so in its JWK) has its RS384 tokens
    taken."""
    scripted.document["id_token_signing_alg_values_supported"] = ["RS384"]
    scripted.jwk_alg = "RS384"
    scripted.nonce = "the-nonce"
    token = scripted.id_token(algorithm="RS384")
    assert client_of(scripted).verify_token(token, nonce="the-nonce")["sub"] == "scripted-sub"


@pytest.mark.parametrize("algorithm", ["RS384", "RS512"])
def test_a_key_that_names_no_algorithm_verifies_what_the_issuer_publishes(
    scripted: ScriptedIssuer, algorithm: str
) -> None:
    """VX-ID-1: a JWK need not name its algorithm (RFC 7517); an issuer that signs with RS384
    or RS512 and publishes it has its tokens taken, and one it does not publish is refused."""
    scripted.document["id_token_signing_alg_values_supported"] = [algorithm]
    scripted.nonce = "the-nonce"
    token = scripted.id_token(algorithm=algorithm)
    assert client_of(scripted).verify_token(token, nonce="the-nonce")["sub"] == "scripted-sub"
    other = "RS512" if algorithm == "RS384" else "RS384"
    assert refused_token(scripted, scripted.id_token(algorithm=other)) == (
        f"The ID token is signed with {other!r}; Local ID publishes {algorithm}."
    )


def test_an_unsigned_token_is_refused_as_unsigned(scripted: ScriptedIssuer) -> None:
    """VX-ID-1: `alg: none` is refused as an algorithm the issuer does not sign with, whatever
    key id it names."""
    header = {"alg": "none", "kid": KID, "typ": "JWT"}
    now = int(time.time())
    claims = {"iss": scripted.base, "sub": "s", "aud": "virgo", "iat": now, "exp": now + 600}
    unsigned = ".".join(
        base64.urlsafe_b64encode(json.dumps(part).encode()).rstrip(b"=").decode()
        for part in (header, {**claims, "nonce": "the-nonce"})
    )
    assert refused_token(scripted, unsigned + ".") == (
        "The ID token is signed with 'none'; Local ID publishes RS256."
    )


def test_an_unreadable_token_is_refused_and_logged(
    scripted: ScriptedIssuer, caplog: pytest.LogCaptureFixture
) -> None:
    """VX-ID-1: what is no JWT at all is refused, and the log names the issuer and the error."""
    with caplog.at_level(logging.WARNING, logger="personas.oidc"):
        reason = refused_token(scripted, "not-a-jwt")
    assert reason == (
        "The ID token from Local ID cannot be read as one signed with a key it publishes."
    )
    (message,) = logged(caplog)
    assert message.startswith("ID token of local unreadable: DecodeError("), message


def test_signing_keys_that_cannot_be_fetched_end_on_a_clear_page(
    scripted: ScriptedIssuer, caplog: pytest.LogCaptureFixture
) -> None:
    """VX-ID-1: a JWKS that cannot be fetched is a 502 naming the issuer, logged with it."""
    scripted.document["jwks_uri"] = "http://127.0.0.1:9/jwks"
    browser = Client()
    with caplog.at_level(logging.WARNING, logger="personas.oidc"):
        response = answered(browser, scripted)
    assert refusal(response) == (502, "Local ID's signing keys could not be fetched; try again.")
    message = logged(caplog)[0]
    assert message.startswith(
        "JWKS of local could not be fetched: HTTPConnectionPool(host='127.0.0.1', port=9)"
    ), message
    assert signed_in(browser) is None


# The callback ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ({"error": "access_denied"},
         "Local ID ended the sign-in with an error: access_denied. Nobody was signed in."),
        ({"error": "access_denied", "error_description": "The person declined."},
         "Local ID ended the sign-in with an error: access_denied (The person declined.). "
         "Nobody was signed in."),
        ({"error": "x" * 150, "error_description": "d" * 400},
         f"Local ID ended the sign-in with an error: {'x' * 100} ({'d' * 300}). "
         "Nobody was signed in."),
    ],
)  # fmt: skip
def test_an_error_from_the_issuer_is_shown_in_its_words(
    scripted: ScriptedIssuer,
    caplog: pytest.LogCaptureFixture,
    query: dict[str, str],
    reason: str,
) -> None:
    """VX-ID-1: the issuer's error (at most 100 characters) and its description (at most 300)
    end the sign-in on a 400, logged with the issuer's name; no code is exchanged."""
    browser = Client()
    with caplog.at_level(logging.WARNING, logger="personas.oidc"):
        response = answered(browser, scripted, **query)
    assert refusal(response) == (400, reason)
    assert logged(caplog) == [f"OpenID Connect sign-in with local refused: {reason}"]
    assert scripted.token_requests == []
    assert signed_in(browser) is None


UNUSABLE = (
    "This answer cannot finish a sign-in: it lacks its code or its state, or its state was not "
    "started in this browser, was used already or has expired. Start the sign-in again."
)


def test_an_answer_without_a_started_flow_or_a_code_is_refused_in_full(
    scripted: ScriptedIssuer,
) -> None:
    """VX-ID-1: an answer with a code but no flow of this browser's, or a flow but no code, is a
    400 saying what may be wrong; no code is exchanged."""
    browser = Client()
    assert refusal(browser.get("/admin/oidc/local/callback/?code=c&state=s")) == (400, UNUSABLE)
    params = started(browser, scripted)
    response = browser.get("/admin/oidc/local/callback/", {"state": params["state"]})
    assert refusal(response) == (400, UNUSABLE)
    assert scripted.token_requests == []


def test_a_link_flow_for_another_account_than_the_signed_in_one_links_nothing(
    scripted: ScriptedIssuer,
) -> None:
    """VX-ID-1, VX-ID-4: a link flow that names another account than the one signed in (the
    session is replaced at every sign-in, so this is defence in depth) is refused before any
    code is exchanged; neither account gets the identity."""
    frank = make_owner("frank", oidc=False)
    grace = make_owner("grace", oidc=False)
    browser = Client()
    browser.force_login(grace)
    params = started(browser, scripted, "/admin/oidc/local/link/")
    session = browser.session
    assert session["oidc_states"][params["state"]]["link"] == grace.pk
    session["oidc_states"][params["state"]]["link"] = frank.pk
    session.save()
    response = browser.get(
        "/admin/oidc/local/callback/", {"state": params["state"], "code": "the-code"}
    )
    assert refusal(response) == (
        400,
        "This link was started by another account than the one signed in now; nothing was "
        "linked. Start again from your account.",
    )
    assert scripted.token_requests == []
    for owner in (frank, grace):
        assert OwnerIdentity.objects.get(user=owner).identity_verified_at is None


def test_a_link_proves_the_pair_for_the_account_that_asked(scripted: ScriptedIssuer) -> None:
    """VX-ID-1: a signed-in owner's link attaches the ID token's issuer and subject to their
    account, whoever the token's name says they are, and they stay signed in as themselves."""
    ada = make_owner("ada", oidc=False)
    scripted.claims = {"sub": "ada-at-local", "name": "Somebody Else"}
    browser = Client()
    browser.force_login(ada)
    params = started(browser, scripted, "/admin/oidc/local/link/")
    with run_on_commit():
        response = browser.get(
            "/admin/oidc/local/callback/", {"state": params["state"], "code": "the-code"}
        )
    assert (response.status_code, response["Location"]) == (302, "/admin/oidc/")
    page = html.unescape(browser.get("/admin/oidc/").content.decode())
    assert (
        f"Your account is linked to Local ID: your cards now name {scripted.base} as the issuer "
        "of your proven identity." in page
    )
    assert signed_in(browser) == ada
    identity = OwnerIdentity.objects.get(user=ada)
    assert (identity.identity_issuer, identity.identity_subject, identity.display_name) == (
        scripted.base,
        "ada-at-local",
        "Ada",
    )
    assert User.objects.count() == 1


@pytest.mark.parametrize(
    ("claims", "display_name"),
    [
        ({"name": " Ann Example ", "preferred_username": "ann", "nickname": "Annie"},
         "Ann Example"),
        ({"name": " ", "preferred_username": "ann.e", "nickname": "Annie"}, "ann.e"),
        ({"name": 7, "nickname": "Annie"}, "Annie"),
        ({"given_name": " Ann ", "family_name": "Example"}, "Ann Example"),
        ({"given_name": "Ann", "family_name": None}, "Ann"),
        ({"family_name": "Example", "given_name": ""}, "Example"),
    ],
)  # fmt: skip
def test_a_new_account_is_named_from_the_id_token(
    scripted: ScriptedIssuer, claims: dict[str, Any], display_name: str
) -> None:
    """VX-ID-1: a first sign-in's account takes its display name from the ID token: its name,
    else its preferred username, else its nickname, else its given and family names."""
    scripted.claims = claims
    browser = Client()
    assert answered(browser, scripted).status_code == 302
    identity = OwnerIdentity.objects.get(user=signed_in(browser))
    assert identity.display_name == display_name


def test_a_refused_page_for_a_signed_in_owner_leads_back_to_their_page(
    scripted: ScriptedIssuer,
) -> None:
    """VX-ID-1: a refused link leaves the owner signed in, with a way back to their OpenID
    Connect page and the admin."""
    browser = Client()
    browser.force_login(make_owner("ida", oidc=False))
    started(browser, scripted, "/admin/oidc/local/link/")
    response = browser.get("/admin/oidc/local/callback/?code=c&state=unknown")
    assert refusal(response) == (400, UNUSABLE)
    page = response.content.decode()
    assert '<a href="/admin/oidc/">Back to your OpenID Connect page</a>' in page


def test_an_unknown_issuer_is_not_found() -> None:
    """VX-ID-1: a URL naming no configured issuer is a 404 saying so."""
    response = Client().get("/admin/oidc/nobody/login/")
    assert response.status_code == 404
    with pytest.raises(Http404) as missing:
        oidc.issuer_named("nobody")
    assert str(missing.value) == "No such OpenID Connect issuer is configured."


@pytest.mark.parametrize(
    ("admit", "reason"),
    [
        ("none", "This Local ID identity has no account here, and Local ID admits no new account "
         "on its own: ask an administrator of this Virgo to add you."),
        ("approval", "The account this identity signs in to is not active: a new account waits "
         "for an administrator's approval, and one that was disabled stays so."),
    ],
)  # fmt: skip
def test_a_new_identity_the_issuer_does_not_admit_is_told_what_to_do(
    scripted: ScriptedIssuer, settings: Any, admit: str, reason: str
) -> None:
    """VX-ID-5: a subject with no account, at an issuer that admits no one or awaits approval,
    is not signed in, and the 403 page says why and what happens next."""
    settings.VIRGO_OIDC_ISSUERS["local"]["admit"] = admit
    browser = Client()
    assert refusal(answered(browser, scripted)) == (403, reason)
    assert signed_in(browser) is None


def test_an_answer_is_only_taken_for_the_issuer_its_flow_was_started_with(
    scripted: ScriptedIssuer, settings: Any
) -> None:
    """VX-ID-1: a state started with one issuer, answered at another issuer's callback (an
    issuer mix-up, RFC 9700), is refused there and used up; no code goes to either issuer."""
    settings.VIRGO_OIDC_ISSUERS["other"] = {
        **settings.VIRGO_OIDC_ISSUERS["local"],
        "name": "other",
        "label": "Other ID",
    }
    browser = Client()
    params = started(browser, scripted)
    answer = {"state": params["state"], "code": "the-code"}
    assert refusal(browser.get("/admin/oidc/other/callback/", answer)) == (400, UNUSABLE)
    assert refusal(browser.get("/admin/oidc/local/callback/", answer)) == (400, UNUSABLE)
    assert scripted.token_requests == []
    assert signed_in(browser) is None


def test_a_flow_is_answered_within_its_time_or_not_at_all(
    scripted: ScriptedIssuer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-ID-1: a started sign-in is answered within FLOW_SECONDS (that long after, it still
    is); a moment later, it is refused and nothing is exchanged."""
    clock = SimpleNamespace(now=time.time())
    monkeypatch.setattr(
        oidc, "time", SimpleNamespace(time=lambda: clock.now, monotonic=time.monotonic)
    )

    def answer_at(age: float) -> Any:
        browser = Client()
        params = started(browser, scripted)
        clock.now = browser.session["oidc_states"][params["state"]]["added_on"] + age
        with run_on_commit():
            return browser.get(
                "/admin/oidc/local/callback/", {"state": params["state"], "code": "the-code"}
            )

    assert answer_at(oidc.FLOW_SECONDS).status_code == 302
    assert len(scripted.token_requests) == 1
    assert refusal(answer_at(oidc.FLOW_SECONDS + 0.5)) == (400, UNUSABLE)
    assert len(scripted.token_requests) == 1


def test_signing_in_while_signed_in_is_a_sign_in_not_a_link(scripted: ScriptedIssuer) -> None:
    """VX-ID-1, VX-ID-4: an owner who is signed in and signs in with the issuer (not the Link
    button) signs in to the pair's own account; nothing is linked to the first."""
    ada = make_owner("ada", oidc=False)
    browser = Client()
    browser.force_login(ada)
    params = started(browser, scripted)
    assert browser.session["oidc_states"][params["state"]]["link"] is None
    with run_on_commit():
        response = browser.get(
            "/admin/oidc/local/callback/", {"state": params["state"], "code": "the-code"}
        )
    assert (response.status_code, response["Location"]) == (302, "/admin/")
    someone = signed_in(browser)
    assert someone != ada
    assert OwnerIdentity.objects.get(user=someone).identity_subject == "scripted-sub"
    assert OwnerIdentity.objects.get(user=ada).identity_verified_at is None
