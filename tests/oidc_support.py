"""A real OpenID provider for the sign-in tests, on loopback: oidc-provider-mock (PyPI).

It runs as its own process (`python -m oidc_provider_mock`, started by the fixtures below and
stopped after the run) and behaves as an issuer does where Virgo depends on it: it publishes a
discovery document and a JWKS, registers clients (a client id and a secret it checks, and the
redirect URIs it will send answers to), requires a nonce, and signs ID tokens with its own RSA
key. Its authorization page lets a test, or a person in a browser, authorize as any subject.

Without the package (`make install` brings it) a test skips, saying so, except under `make test`
(VIRGO_REQUIRE_SERVICES=1), where it fails.
"""

import importlib.util
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import pytest

from tests.live import DEADLINE_SECONDS, REPO, free_port, unavailable, wait_until

DISCOVERY_PATH = "/.well-known/openid-configuration"


@dataclass(frozen=True)
class RegisteredClient:
    client_id: str
    client_secret: str


class Provider:
    """One oidc-provider-mock process on 127.0.0.1 and a free port."""

    def __init__(self, directory: Path, *, token_max_age: int | None = None) -> None:
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.discovery_url = self.issuer + DISCOVERY_PATH
        self.token_max_age = token_max_age
        self.log = directory / f"provider-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        if importlib.util.find_spec("oidc_provider_mock") is None:
            unavailable("needs oidc-provider-mock (make install brings it)")
        args = [
            sys.executable,
            "-m",
            "oidc_provider_mock",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--require-registration",
            "--require-nonce",
        ]
        if self.token_max_age is not None:
            args.append(f"--token-max-age={self.token_max_age}")
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(args, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        wait_until(self._answers, what=f"the OpenID provider to answer; see {self.log}")

    def _answers(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"the OpenID provider exited:\n{self.log.read_text()}")
        try:
            return httpx.get(self.discovery_url, timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=DEADLINE_SECONDS)

    def discovery(self) -> dict[str, Any]:
        return httpx.get(self.discovery_url, timeout=5).json()

    def jwks(self) -> dict[str, Any]:
        return httpx.get(self.discovery()["jwks_uri"], timeout=5).json()

    def register(self, *redirect_uris: str) -> RegisteredClient:
        """A client of this provider, as an operator registers Virgo with an issuer."""
        answer = httpx.post(
            self.issuer + "/oauth2/clients",
            json={
                "redirect_uris": list(redirect_uris),
                # What a discovery document that names no method means (OpenID Connect
                # Discovery 3), so what Virgo uses with this provider.
                "token_endpoint_auth_method": "client_secret_basic",
            },
            timeout=5,
        )
        assert answer.status_code == 201, answer.text
        body = answer.json()
        return RegisteredClient(body["client_id"], body["client_secret"])

    def set_claims(self, subject: str, **claims: Any) -> None:
        """What the provider says about `subject` in its ID tokens (name, email...)."""
        answer = httpx.put(f"{self.issuer}/users/{quote(subject, safe='')}", json=claims, timeout=5)
        assert answer.status_code == 204, answer.text

    def authorize(self, authorization_url: str, subject: str) -> str:
        """The person at the provider authorizes as `subject`: the URL the provider sends them
        back to (the client's redirect URI with code and state)."""
        answer = httpx.post(authorization_url, data={"sub": subject}, timeout=5)
        assert answer.status_code == 302, answer.text
        return answer.headers["location"]

    def deny(self, authorization_url: str) -> str:
        answer = httpx.post(authorization_url, data={"action": "deny"}, timeout=5)
        assert answer.status_code == 302, answer.text
        return answer.headers["location"]

    def id_token(
        self, client: RegisteredClient, redirect_uri: str, subject: str, *, nonce: str
    ) -> str:
        """An ID token this provider signs for `client`, got as a client gets one (authorization
        request, code, token request): for handing to another client's verification."""
        query = urlencode(
            {
                "response_type": "code",
                "client_id": client.client_id,
                "redirect_uri": redirect_uri,
                "scope": "openid profile",
                "state": "state-of-another-client",
                "nonce": nonce,
            }
        )
        location = self.authorize(self.discovery()["authorization_endpoint"] + "?" + query, subject)
        code = httpx.QueryParams(httpx.URL(location).query)["code"]
        answer = httpx.post(
            self.discovery()["token_endpoint"],
            data={"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri},
            auth=(client.client_id, client.client_secret),
            timeout=5,
        )
        assert answer.status_code == 200, answer.text
        return answer.json()["id_token"]


def issuer_setting(
    provider: Provider,
    client: RegisteredClient,
    *,
    name: str = "mock",
    label: str = "Mock ID",
    admit: str = "everyone",
    allowed_domains: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The entry of settings.VIRGO_OIDC_ISSUERS that virgo.settings makes of VIRGO_OIDC_<NAME>_*
    for this provider and client; it admits everyone unless told otherwise (the rule is
    tests/test_oidc_admission.py's)."""
    return {
        "name": name,
        "label": label,
        "discovery_url": provider.discovery_url,
        "client_id": client.client_id,
        "client_secret": client.client_secret,
        # As virgo.settings asks for it: the domain rule reads the e-mail claims.
        "scopes": "openid profile email" if admit == "domains" else "openid profile",
        "admit": admit,
        "allowed_domains": list(allowed_domains),
    }


def _provider(factory: pytest.TempPathFactory, **options: Any) -> Iterator[Provider]:
    provider = Provider(factory.mktemp("oidc"), **options)
    try:
        provider.start()
        yield provider
    finally:
        provider.stop()


@pytest.fixture(scope="session")
def oidc_provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    """The issuer owners sign in with, shared by the run (each test registers its own client)."""
    yield from _provider(tmp_path_factory)


@pytest.fixture(scope="session")
def expired_tokens_provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Provider]:
    """An issuer whose ID tokens expired five minutes before they were issued."""
    yield from _provider(tmp_path_factory, token_max_age=-300)
