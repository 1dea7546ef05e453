"""The agent host's loopback redirect and endpoint rules (serving.connect), exactly: what the
browser is answered, what the client makes of each answer, and which URLs are endpoints
(VX-REMOTE-1). The whole flow against a real server: tests/test_remote_mcp_live.py."""

import asyncio
import threading

import httpx
import pytest

from serving import connect
from serving.connect import Redirect, issuer_of

ISSUER = "https://virgo.example.org"
CLOSE = b"Virgo: you may close this page and return to the terminal.\n"


@pytest.fixture
def redirect(monkeypatch: pytest.MonkeyPatch) -> Redirect:
    # An answer that never arrives fails the test in seconds, not after the owner's ten minutes.
    monkeypatch.setattr(connect, "CONSENT_SECONDS", 10)
    made = Redirect(ISSUER)
    yield made
    made.close()


def answered(redirect: Redirect, query: str) -> tuple[str, str | None]:
    assert httpx.get(f"{redirect.uri}?{query}").status_code == 200
    return asyncio.run(redirect.code())


def test_the_browser_is_told_to_close_the_page(redirect: Redirect) -> None:
    """The redirect answers the browser once, in plain text of an exact length; any other path
    is 404; its server never keeps the process alive."""
    page = httpx.get(f"{redirect.uri}?code=c&iss={ISSUER}")
    assert (page.status_code, page.content) == (200, CLOSE)
    assert page.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert page.headers["Content-Length"] == str(len(CLOSE))
    assert httpx.get(redirect.uri.replace("/callback", "/favicon.ico")).status_code == 404
    serving = [t for t in threading.enumerate() if t.name.startswith("Thread") and t.is_alive()]
    assert serving and all(thread.daemon for thread in serving)


def test_a_code_without_state_is_taken_with_none(redirect: Redirect) -> None:
    """The state is optional: the code comes back with None for it."""
    assert answered(redirect, f"code=c0de&iss={ISSUER}") == ("c0de", None)


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("error=access_denied", "the owner did not grant access: access_denied"),
        (
            "error=access_denied&error_description=not+this+one",
            "the owner did not grant access: not this one",
        ),
        (
            "code=c&iss=https://evil.example",
            f"the code came from ['https://evil.example'], not from {ISSUER}",
        ),
        ("code=c", f"the code came from None, not from {ISSUER}"),
    ],
)
def test_a_refusal_or_a_foreign_code_is_said_exactly(
    redirect: Redirect, query: str, said: str
) -> None:
    """VX-REMOTE-1: the owner's refusal in their server's words (its description if it gave
    one), and a code from another issuer, or from none (RFC 9207), named as such."""
    assert httpx.get(f"{redirect.uri}?{query}").status_code == 200
    with pytest.raises(SystemExit) as refused:
        asyncio.run(redirect.code())
    assert str(refused.value) == said


def test_no_answer_in_time_is_one_line(redirect: Redirect, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nobody answers the consent page: the client gives up after CONSENT_SECONDS, saying so."""
    monkeypatch.setattr(connect, "CONSENT_SECONDS", 0.05)
    with pytest.raises(SystemExit) as gave_up:
        asyncio.run(redirect.code())
    assert str(gave_up.value) == "no answer from the consent page within 0.05 s"


@pytest.mark.parametrize(
    ("endpoint", "issuer"),
    [
        ("http://127.0.0.1:8000/mcp/1c9d0b37", "http://127.0.0.1:8000"),
        ("https://virgo.example.org/mcp/1c9d0b37", "https://virgo.example.org"),
        # A base URL whose own path holds /mcp/: the persona is the last segment.
        ("https://example.org/mcp/virgo/mcp/1c9d0b37", "https://example.org/mcp/virgo"),
    ],
)
def test_the_issuer_is_the_endpoints_installation(endpoint: str, issuer: str) -> None:
    """VX-REMOTE-1: plain http (a loopback installation) and https alike."""
    assert issuer_of(endpoint) == issuer
