"""VX-SCALE-4: a process that cannot open the signing keys (a machine given the wrong
key-encryption key) never answers 500 and takes no work it cannot finish: the documents it would
have to sign answer 503 with Retry-After, what is already signed is still served, and neither a
web process nor a worker starts."""

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from cards import checks, keys
from cards.base_url import move_base_url
from cards.status_list import _forget
from personas.services import persona_revoke
from tests.factories import make_agent, make_owner, make_persona, run_on_commit
from tests.owner_clients import fresh_rate_limits  # noqa: F401 (autouse fixture)
from virgo import kek
from virgo.startup import EXIT_MISCONFIGURED, web_starting

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def new_process() -> Iterator[None]:
    keys._opened.clear()
    _forget()
    yield
    keys._opened.clear()
    _forget()


@pytest.fixture
def right(settings: Any) -> str:
    key = kek.generate()
    settings.VIRGO_KEY_ENCRYPTION_KEYS = [key]
    keys.ensure_active_key()
    return key


def wrong_key(settings: Any) -> None:
    """This machine's process, started with another key-encryption key."""
    settings.VIRGO_KEY_ENCRYPTION_KEYS = [kek.generate()]
    keys._opened.clear()
    _forget()


def assert_cannot_sign(response: Any) -> None:
    assert response.status_code == 503, response.content
    assert json.loads(response.content) == {
        "code": "cannot_sign",
        "detail": "This server cannot sign documents right now; try again later.",
    }
    assert int(response["Retry-After"]) > 0
    assert response["Cache-Control"] == "no-store"


def test_documents_to_sign_answer_503_and_signed_ones_are_still_served(
    settings: Any, right: str, caplog: pytest.LogCaptureFixture
) -> None:
    """VX-SCALE-4: the card published before is served; a card that must be signed on demand
    (the installation moved to another base URL), a tombstone and a status list that moved
    answer 503 cannot_sign, never 500; the reason is in the operator's log, not the answer."""
    owner = make_owner()
    listed = make_persona(make_agent(owner), discoverable=True)
    revoked = make_persona(make_agent(owner), discoverable=True)
    assert Client().get(listed.card_path).status_code == 200
    wrong_key(settings)
    assert Client().get(listed.card_path).status_code == 200
    # A card the installation moved to another public base URL must be signed again on demand.
    move_base_url(url="https://moved.example.org")
    settings.VIRGO_PUBLIC_BASE_URL = "https://moved.example.org"
    assert_cannot_sign(Client().get(listed.card_path))
    with run_on_commit():
        persona_revoke(
            persona=revoked, actor=owner, reason_code="retired", reason="gone", via="test"
        )
    assert_cannot_sign(Client().get(revoked.card_path))
    assert_cannot_sign(Client().get("/.well-known/status/revocation"))
    logged = [r.getMessage() for r in caplog.records if r.name == "cards.views"]
    assert logged and all(m.startswith("cannot sign a public document: ") for m in logged)
    # The operator reads why: the key that does not open and with what.
    assert all("is sealed under key-encryption key" in m for m in logged)


@pytest.mark.parametrize(
    ("start", "program"),
    [
        (lambda: web_starting.send(sender=None), "virgo-web"),
        (lambda: checks.check_worker_start(), "virgo worker"),
    ],
)
def test_a_process_that_cannot_sign_does_not_start(
    settings: Any, right: str, capsys: pytest.CaptureFixture[str], start: Any, program: str
) -> None:
    """VX-SCALE-4: virgo-web before it binds and a worker before its first task: one line with
    the fix, status 2 (a supervisor does not restart it in a loop); with the right key both
    start."""
    start()
    wrong_key(settings)
    with pytest.raises(SystemExit) as refused:
        start()
    assert refused.value.code == EXIT_MISCONFIGURED
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"{program}: this process cannot sign cards: ")
    assert line.endswith("give it the installation's VIRGO_KEY_ENCRYPTION_KEY (every key the "
                         "signing keys are sealed under)")  # fmt: skip
    assert right not in line
