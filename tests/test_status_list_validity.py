"""VX-TRUST-8: the signed status list is valid for a period, so a list a cache or a mirror kept
stops verifying for a peer that checks its dates, as docs/revocation.md's verifier does, instead
of hiding a revocation forever."""

import base64
import json
import re
import time
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.test import Client

from cards import status_list
from tests.factories import make_agent, make_owner, make_persona
from tests.status_list_support import LIST, index_of, revoke, verified

pytestmark = pytest.mark.django_db
REVOCATION = Path(__file__).resolve().parent.parent / "docs" / "revocation.md"
HOUR = 3600


@pytest.fixture(autouse=True)
def one_hour(settings: Any) -> None:
    settings.VIRGO_STATUS_LIST_VALIDITY = HOUR
    settings.VIRGO_STATUS_LIST_MAX_AGE = 60


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The time the list is rendered and served at, moved by the test."""
    now = [time.time()]
    monkeypatch.setattr(status_list.time, "time", lambda: now[0])
    monkeypatch.setattr("cards.views.time.time", lambda: now[0])
    return now


def stamp(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def served() -> tuple[Any, dict[str, Any]]:
    response = Client().get(LIST)
    assert response.status_code == 200
    return response, response.json()


def test_the_list_carries_its_validity_and_every_process_renders_the_same(
    clock: list[float],
) -> None:
    """VX-TRUST-8: validFrom at the last half-validity boundary, validUntil a validity later,
    both covered by the signature; the same clock gives the same dates and ETag (no process
    needs another's)."""
    start = int(clock[0]) // (HOUR // 2) * (HOUR // 2)
    response, document = served()
    verified(document)
    assert document["validFrom"] == datetime.fromtimestamp(start, UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    assert document["validUntil"] == datetime.fromtimestamp(start + HOUR, UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    status_list._forget()
    again, _ = served()
    assert again["ETag"] == response["ETag"]


def test_it_is_signed_again_each_half_period_and_caches_never_outlive_it(
    clock: list[float],
) -> None:
    """VX-TRUST-8: a list served always has half its validity left at least; max-age and
    Expires never let a cache keep it past validUntil."""
    _, first = served()
    clock[0] += HOUR // 2
    response, second = served()
    assert first["validFrom"] < second["validFrom"] < first["validUntil"]
    until = datetime.fromisoformat(second["validUntil"])
    assert parsedate_to_datetime(response["Expires"]) == until
    assert "max-age=60" in response["Cache-Control"]
    left = until.timestamp() - clock[0]
    assert HOUR // 2 <= left <= HOUR


def test_max_age_shrinks_to_the_time_left(clock: list[float], settings: Any) -> None:
    """VX-TRUST-8: with a max-age longer than what is left, the time left wins."""
    settings.VIRGO_STATUS_LIST_MAX_AGE = 10 * HOUR
    response, document = served()
    left = int(datetime.fromisoformat(document["validUntil"]).timestamp() - clock[0])
    assert f"max-age={left}" in response["Cache-Control"]


def readme_verifier() -> str:
    """The Python of docs/revocation.md's "Checking revocation", as a peer would paste it."""
    text = REVOCATION.read_text()
    section = text[text.index("## Checking revocation") :]
    section = section.split("\n## ")[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) >= 2, "docs/revocation.md's verifier moved"
    return "\n".join(re.sub(r"(?m)^   ", "", block) for block in blocks)


def run_readme_verifier(
    monkeypatch: pytest.MonkeyPatch, index: int, *, kept_list: bytes | None = None
) -> int:
    """Run docs/revocation.md's code against this installation, httpx answered by the test
    client; with `kept_list`, the status list comes from a mirror that kept those bytes."""

    def get(url: str, **kwargs: Any) -> httpx.Response:
        path = url.removeprefix("https://virgo.example.org")
        if kept_list is not None and path == LIST:
            return httpx.Response(200, content=kept_list)
        response = Client().get(path)
        return httpx.Response(response.status_code, content=response.content)

    monkeypatch.setattr(httpx, "get", get)
    scope: dict[str, Any] = {"index": index}
    exec(readme_verifier(), scope)
    return int(scope["revoked"])


def test_readmes_verifier_reads_a_fresh_list_and_refuses_a_stale_one(
    clock: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-TRUST-8: docs/revocation.md's own code, run as a peer runs it: a revoked bit reads 1
    from a list in its period; the same signed list read after its validUntil (a mirror kept it)
    raises, however valid its signature."""
    persona = make_persona(make_agent(make_owner()), discoverable=True)
    revoke(persona)
    index = index_of(persona)
    assert run_readme_verifier(monkeypatch, index) == 1
    # A list signed two hours ago, as a mirror would still hand it out; the peer reads it now.
    now = clock[0]
    clock[0] = now - 2 * HOUR
    kept = Client().get(LIST).content
    clock[0] = now
    verified(json.loads(kept))
    with pytest.raises(ValueError, match="stale status list"):
        run_readme_verifier(monkeypatch, index, kept_list=kept)
    assert run_readme_verifier(monkeypatch, index) == 1


def test_processes_rendering_a_moment_apart_encode_the_same_bytes(clock: list[float]) -> None:
    """VX-TRUST-8: the list's GZIP carries no time (RFC 1952: MTIME 0, no time stamp), so a
    process that renders the same state a second after another, in the same period, serves the
    same encodedList and the same ETag."""
    clock[0] = float(int(clock[0]) // (HOUR // 2) * (HOUR // 2) + 10)
    response, document = served()
    clock[0] += 1
    status_list._forget()  # another process, holding nothing
    again, other = served()
    encoded = document["credentialSubject"]["encodedList"]
    assert other["credentialSubject"]["encodedList"] == encoded
    assert again["ETag"] == response["ETag"]
    member = base64.urlsafe_b64decode(encoded[1:] + "=" * (-len(encoded[1:]) % 4))
    assert member[:2] == b"\x1f\x8b"  # one GZIP member
    assert int.from_bytes(member[4:8], "little") == 0  # MTIME: no time stamp


@pytest.mark.parametrize(
    ("validity", "boundary"),
    [
        (3, 1_800_000_001),  # half of 3 s is 1 s: a boundary every second
        (HOUR + 1, 1_800_001_800),  # half of 3,601 s is 1,800 s: a boundary every half hour
    ],
)
def test_half_the_validity_is_counted_in_whole_seconds(
    clock: list[float], settings: Any, validity: int, boundary: int
) -> None:
    """VX-TRUST-8: whatever VIRGO_STATUS_LIST_VALIDITY is, odd or a few seconds, the period starts
    at a multiple of half of it in whole seconds (rounded down, a second at least), so a list
    signed just after a boundary is valid from that very second, for exactly the validity."""
    settings.VIRGO_STATUS_LIST_VALIDITY = validity
    clock[0] = boundary + 0.25
    _, document = served()
    verified(document)
    assert (document["validFrom"], document["validUntil"]) == (
        stamp(boundary),
        stamp(boundary + validity),
    )
