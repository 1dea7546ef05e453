"""The client address per-address limits count: the peer, or the client behind trusted proxies."""

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client

from virgo.clients import client_address

ROOT = Path(__file__).resolve().parent.parent
PROXY = "10.0.0.5"


def meta(remote: str, forwarded: str | None = None) -> dict[str, str]:
    found = {"REMOTE_ADDR": remote}
    if forwarded is not None:
        found["HTTP_X_FORWARDED_FOR"] = forwarded
    return found


def test_without_trusted_proxies_the_peer_is_the_client(settings: Any) -> None:
    """S9-RL-1: a client cannot pick its own budget by sending X-Forwarded-For."""
    settings.VIRGO_TRUSTED_PROXIES = []
    assert client_address(meta("198.51.100.7", "203.0.113.1")) == "198.51.100.7"


def test_behind_a_trusted_proxy_the_forwarded_client_counts(settings: Any) -> None:
    """S9-RL-1: behind the proxy every client has its own budget, not the proxy's."""
    settings.VIRGO_TRUSTED_PROXIES = [PROXY]
    assert client_address(meta(PROXY, "203.0.113.1")) == "203.0.113.1"
    assert client_address(meta(PROXY, "2001:db8::7")) == "2001:db8::7"


def test_only_the_hops_trusted_proxies_added_are_skipped(settings: Any) -> None:
    """S9-RL-1: the header is read from the right; what the client wrote on the left is never
    believed, and a chain of trusted proxies (networks too) is walked through."""
    settings.VIRGO_TRUSTED_PROXIES = ["10.0.0.0/8"]
    spoofed = "192.0.2.99, 203.0.113.1, 10.1.2.3"
    assert client_address(meta(PROXY, spoofed)) == "203.0.113.1"
    assert client_address(meta(PROXY, "10.9.9.9, 10.1.2.3")) == "10.9.9.9"


def test_a_peer_that_is_not_a_trusted_proxy_is_the_client(settings: Any) -> None:
    settings.VIRGO_TRUSTED_PROXIES = [PROXY]
    assert client_address(meta("198.51.100.7", "203.0.113.1")) == "198.51.100.7"


@pytest.mark.parametrize("forwarded", ["", "not-an-address", "203.0.113.1, unknown"])
def test_a_hop_that_is_not_an_address_stops_at_the_last_trusted_one(
    settings: Any, forwarded: str
) -> None:
    settings.VIRGO_TRUSTED_PROXIES = [PROXY]
    assert client_address(meta(PROXY, forwarded)) == PROXY
    assert client_address(meta(PROXY)) == PROXY


def test_a_trusted_proxy_entry_that_is_no_address_stops_the_start(tmp_path: Path) -> None:
    """Bad configuration is refused at start-up, naming the entry."""
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "virgo.settings",
        "VIRGO_EMBEDDED": "1",
        "VIRGO_HOME": str(tmp_path),
        "VIRGO_TRUSTED_PROXIES": "10.0.0.1,lb",
    }
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env=environment,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode != 0
    assert "ImproperlyConfigured: VIRGO_TRUSTED_PROXIES: 'lb' is not an IP address" in done.stderr


@pytest.mark.django_db
def test_the_token_limit_counts_each_client_behind_the_proxy(settings: Any) -> None:
    """S9-RL-1: django-ratelimit's `ip` key is the same client address (RATELIMIT_IP_META_KEY)."""
    cache.clear()
    settings.VIRGO_TRUSTED_PROXIES = [PROXY]
    settings.VIRGO_TOKEN_RATE_LIMIT = "2/h"
    url = "/api/auth/token/"
    body = {"username": "nobody", "password": "x"}

    def attempt(client: str) -> int:
        return (
            Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=client)
            .post(url, body, content_type="application/json")
            .status_code
        )

    assert [attempt("203.0.113.1") for _ in range(3)] == [422, 422, 429]
    assert attempt("203.0.113.2") == 422
    cache.clear()
