"""Every refused card import is one error naming the field and the reason, and writes nothing
(VX-GRANT-4; the import itself is VX-IMP-1).

Each bad input goes through each channel: the command (`virgo persona import-card`, through
call_command, since run_from_argv closes the test's database connection; it prints a
CommandError as one line `CommandError: <message>` and exits with its return code) with a file
and with a URL served by a real loopback server, and the admin's "New persona from an agent card"
page with an upload and with a URL. The error names the field that is wrong: the card's own field
as `card.<path>`, or the input (`url`, `file`); the admin puts it on the form field that carried
the card. Virgo has no API endpoint for card import, so there is no API channel to test.
"""

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.http import HttpResponse

from personas import card_import
from personas.models import Agent, Generation, GrantProposal, Persona
from personas.services import personas as persona_services
from stamps.profiles import required_tools
from tests.card_import_support import (
    ADDRESS,
    CLASS,
    FROM_CARD,
    V1,
    CardServer,
    admin_client,
)
from tests.factories import REVIEWER_VERBS, address, make_agent, make_owner, run_on_commit
from tests.tools_support import allow_loopback

pytestmark = pytest.mark.django_db

SOURCE = "<source>"  # the input that carried the card: `url` or `file`


def card(**changes: Any) -> bytes:
    """The v1.0 fixture card with fields changed (None removes one)."""
    document = json.loads(V1.read_bytes())
    for field, value in changes.items():
        if value is None:
            document.pop(field, None)
        else:
            document[field] = value
    return json.dumps(document).encode()


def nested(depth: int) -> Any:
    value: Any = 1
    for level in range(depth):
        value = [value] if level % 2 else {"a": value}
    return value


@dataclass(frozen=True)
class Bad:
    body: bytes
    field: str
    reason: str  # a regular expression the reason matches


BAD_CARDS = {
    "not JSON": Bad(b"<html>hello</html>", "card", r"^not JSON"),
    "not UTF-8": Bad(b'{"name": "Caf\xe9"}', "card", r"^not UTF-8"),
    "an integer too long to read": Bad(b'{"n": ' + b"1" * 5000 + b"}", "card", r"^not JSON"),
    "an array": Bad(b"[1, 2]", "card", r"^a JSON object is expected, not an array$"),
    "a string": Bad(b'"card"', "card", r"^a JSON object is expected, not a string$"),
    "nested 100,000 deep": Bad(
        b'{"skills": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "card",
        r"^nested deeper than 32 levels",
    ),
    "nested 40 deep inside an extension": Bad(
        card(capabilities={"extensions": [{"uri": "urn:x", "params": nested(40)}]}),
        "card",
        r"^nested deeper than 32 levels",
    ),
    "larger than the bound": Bad(
        card(description="x" * card_import.CARD_LIMIT), SOURCE, r"^the card is larger than 262144"
    ),
    "no name": Bad(card(name=None), "card.name", r"^missing"),
    "a blank name": Bad(card(name=" \t"), "card.name", r"^missing"),
    "a name too long": Bad(card(name="n" * 121), "card.name", r"^longer than the 120 characters"),
    "a name that is a number": Bad(card(name=5), "card.name", r"expected string"),
    "a NUL in the name": Bad(card(name="Re\x00lease"), "card.name", r"^must not contain a NUL"),
    "a NUL in the description": Bad(
        card(description="a\x00b"), "card.description", r"^must not contain a NUL"
    ),
    "a lone surrogate in the name": Bad(
        card(name="\ud800"), "card.name", r"(?i)surrogate|not UTF-8"
    ),
    "no interface": Bad(card(supportedInterfaces=None), "card.supportedInterfaces", r"^missing"),
    "skills not a list": Bad(
        card(skills="todos"), "card.skills", r"^a list of objects is expected, not a string$"
    ),
    "a skill that is not an object": Bad(
        card(skills=[{"id": "a"}, 1]), "card.skills[1]", r"^an object is expected, not a number$"
    ),
    "a skill id that is a number": Bad(
        card(skills=[{"id": 5, "name": "Five"}]), "card.skills.id", r"expected string"
    ),
    "a skill with neither id nor name": Bad(
        card(skills=[{"id": " ", "name": ""}]), "card.skills[0]", r"^has neither an id nor a name"
    ),
    "a skill id too long": Bad(
        card(skills=[{"id": "s" * 201, "name": "S"}]),
        "card.skills[0].id",
        r"^longer than 200 characters",
    ),
    "too many skills": Bad(
        card(
            skills=[{"id": f"s{n}", "name": "S", "description": "", "tags": []} for n in range(101)]
        ),
        "card.skills",
        r"^more than 100 skills",
    ),
    "a security scheme that is not an object": Bad(
        card(securitySchemes={"key": 1}),
        "card.securitySchemes.key",
        r"^an object is expected, not a number$",
    ),
    "capabilities that are not an object": Bad(
        card(capabilities="all", supportsAuthenticatedExtendedCard=True),
        "card.capabilities",
        r"^an object is expected, not a string$",
    ),
}

# Shapes a regular expression matching whole JSON strings backtracks on quadratically.
BACKTRACKING_SHAPES = ['"\\' * 131_072, '"' + "\\a" * 131_071, '"a' + '"' * 262_142]

UNPARSEABLE_URLS = {
    "http://0177.0.0.1/": r"^'http://0177\.0\.0\.1/' is not a URL .*IPv4",
    "http://①②⑦.0.0.1/": r"is not a URL .*IDNA",
    "http://xn--/": r"is not a URL",
    "http://[::1/": r"is not a URL",
    "http://127.0.0.1:99999/": r"^port 99999 is not a TCP port",
    "http://example.org/" + "a" * 2048: r"^longer than 2048 characters",
}


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, settings: Any) -> None:
    settings.VIRGO_HOME = tmp_path / "home"


@pytest.fixture
def agent() -> Agent:
    """An agent granting a coder deputy's tools and the reviewer verbs, as test_card_import's."""
    address(ADDRESS)
    return make_agent(make_owner(), granted_verbs=[*required_tools(CLASS), *REVIEWER_VERBS])


@pytest.fixture
def loopback(settings: Any) -> None:
    allow_loopback(settings)


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[CardServer] = []

    def start(body: bytes, **kwargs: Any) -> CardServer:
        server = CardServer(body, **kwargs).__enter__()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.__exit__()


def counts() -> tuple[int, int, int]:
    return Persona.objects.count(), Generation.objects.count(), GrantProposal.objects.count()


def field_of(bad: Bad, source: str) -> str:
    return source if bad.field == SOURCE else bad.field


def assert_one_error(message: str, field: str, reason: str) -> None:
    assert "\n" not in message
    assert message.startswith(f"{field}: "), message
    assert re.search(reason, message.removeprefix(f"{field}: ")), message


def refused_by_the_command(source: str, agent: Agent) -> str:
    """The command's refusal: a CommandError (one line on stderr, a non-zero exit), never
    another exception (a traceback); the on-commit tasks of whatever it wrote would run."""
    with run_on_commit(), pytest.raises(CommandError) as refused:
        call_command("persona", "import-card", source, "--agent", str(agent.pk),
                     "--address", ADDRESS, "--class", CLASS)  # fmt: skip
    assert refused.value.returncode != 0
    return str(refused.value)


def post_to_the_admin(agent: Agent, **source: Any) -> HttpResponse:
    form = {"agent": agent.pk, "address": ADDRESS, "persona_class": CLASS, **source}
    with run_on_commit():
        response: HttpResponse = admin_client(agent.owner).post(FROM_CARD, form)
    return response


def refused_by_the_admin(agent: Agent, **source: Any) -> tuple[str, list[str]]:
    """The admin's refusal: the page again (never a 500), with one field carrying one error."""
    response = post_to_the_admin(agent, **source)
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert len(errors) == 1, errors
    ((field, messages),) = errors.items()
    return field, messages


@pytest.mark.parametrize("case", BAD_CARDS)
def test_the_command_refuses_a_bad_card_file(case: str, agent: Agent, tmp_path: Path) -> None:
    """VX-GRANT-4: a bad card file is one line naming the field and the reason, a non-zero exit,
    no traceback, and nothing written."""
    bad, before = BAD_CARDS[case], counts()
    path = tmp_path / "card.json"
    path.write_bytes(bad.body)
    assert_one_error(refused_by_the_command(str(path), agent), field_of(bad, "file"), bad.reason)
    assert counts() == before


@pytest.mark.parametrize("case", BAD_CARDS)
def test_the_command_refuses_a_bad_served_card(
    case: str, agent: Agent, loopback: None, serve: Any
) -> None:
    """VX-GRANT-4: the same card served over HTTP is refused the same way, before the SDK's
    resolver reads it (a deep one would otherwise be a RecursionError in its JSON decoder)."""
    bad, before = BAD_CARDS[case], counts()
    server = serve(bad.body)
    assert_one_error(refused_by_the_command(server.url, agent), field_of(bad, "url"), bad.reason)
    assert counts() == before


@pytest.mark.parametrize("case", BAD_CARDS)
def test_the_admin_refuses_a_bad_card_upload(case: str, agent: Agent, tmp_path: Path) -> None:
    """VX-GRANT-4: an uploaded bad card is an error on the file field, naming the card's field
    and the reason; the page answers 200 (413 past the site's body bound), never 500, and
    nothing is written."""
    bad, before = BAD_CARDS[case], counts()
    path = tmp_path / "card.json"
    path.write_bytes(bad.body)
    if len(bad.body) > settings.VIRGO_MAX_BODY_BYTES:
        # The site's bound on request bodies (64 KiB) answers 413 before the form reads it.
        with path.open("rb") as upload:
            assert post_to_the_admin(agent, file=upload).status_code == 413
    else:
        with path.open("rb") as upload:
            field, messages = refused_by_the_admin(agent, file=upload)
        assert field == "file" and len(messages) == 1
        assert_one_error(messages[0], field_of(bad, "file"), bad.reason)
    assert counts() == before


@pytest.mark.parametrize("case", BAD_CARDS)
def test_the_admin_refuses_a_bad_served_card(
    case: str, agent: Agent, loopback: None, serve: Any
) -> None:
    """VX-GRANT-4: a bad card fetched from a URL is an error on the URL field."""
    bad, before = BAD_CARDS[case], counts()
    server = serve(bad.body)
    field, messages = refused_by_the_admin(agent, url=server.url)
    assert field == "url" and len(messages) == 1
    assert_one_error(messages[0], field_of(bad, "url"), bad.reason)
    assert counts() == before


@pytest.mark.parametrize("url", UNPARSEABLE_URLS)
def test_a_url_the_client_cannot_parse_is_refused_by_every_channel(
    url: str, agent: Agent, loopback: None
) -> None:
    """VX-GRANT-4 (attack): `http://0177.0.0.1/`, `http://①②⑦.0.0.1/` and their kind made the
    admin answer 500 (httpx's InvalidURL, idna's IDNAError, anyio's ExceptionGroup for a port
    out of range); each is now refused as the url field, before anything is sent."""
    before = counts()
    assert_one_error(refused_by_the_command(url, agent), "url", UNPARSEABLE_URLS[url])
    field, messages = refused_by_the_admin(agent, url=url)
    assert field == "url" and len(messages) == 1
    assert_one_error(messages[0], "url", UNPARSEABLE_URLS[url])
    with pytest.raises(card_import.CardImportError) as refused:
        card_import.load_card(url)
    assert refused.value.field == "url"
    assert counts() == before


@pytest.mark.parametrize(
    ("content_type", "reason"),
    [
        ("text/html; charset=utf-8", r"^answered Content-Type text/html, not application/json"),
        ("text/plain", r"^answered Content-Type text/plain, not application/json"),
        (None, r"^answered no Content-Type"),
    ],
)
def test_a_card_served_as_something_else_is_refused(
    content_type: str | None, reason: str, agent: Agent, loopback: None, serve: Any
) -> None:
    """VX-GRANT-4: an agent card is served as application/json (A2A); a page that answers HTML
    (a login page, an error page) is refused naming the url, whatever its body holds."""
    before = counts()
    server = serve(V1.read_bytes(), content_type=content_type)
    assert_one_error(refused_by_the_command(server.url, agent), "url", reason)
    field, messages = refused_by_the_admin(agent, url=server.url)
    assert field == "url"
    assert_one_error(messages[0], "url", reason)
    assert counts() == before


@pytest.mark.parametrize(
    "content_type", ["application/json", "application/json; charset=utf-8", "application/a2a+json"]
)
def test_a_card_served_as_json_is_read(
    content_type: str, agent: Agent, loopback: None, serve: Any
) -> None:
    """VX-GRANT-4: the Content-Type check refuses only what is not JSON."""
    server = serve(V1.read_bytes(), content_type=content_type)
    assert card_import.load_card(server.url).name == "Release Helper"


def test_what_the_records_refuse_is_one_error_on_its_field(agent: Agent) -> None:
    """VX-GRANT-4: an address that is not registered is refused by the records, naming it."""
    before = counts()
    with pytest.raises(CommandError) as refused:
        call_command("persona", "import-card", str(V1), "--agent", str(agent.pk),
                     "--address", "work/core/nowhere", "--class", CLASS)  # fmt: skip
    assert str(refused.value).startswith("address: ") and "\n" not in str(refused.value)
    with V1.open("rb") as upload:
        form = {"agent": agent.pk, "address": "work/core/nowhere", "persona_class": CLASS}
        response = admin_client(agent.owner).post(FROM_CARD, {**form, "file": upload})
    assert response.status_code == 200 and list(response.context["form"].errors) == ["address"]
    assert counts() == before


def test_a_failure_after_the_draft_is_saved_rolls_all_of_it_back(
    agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-GRANT-4: the draft, its first generation and its proposal are one transaction: a
    refusal after the persona row is saved (here the proposal's) leaves none of them, and no
    task to settle it is queued. (A guard: the import was already atomic.)"""
    before = counts()

    def refuse(*args: Any, **kwargs: Any) -> None:
        assert Persona.objects.count() == before[0] + 1  # the draft was saved
        raise ValidationError({"verb_subset": ["refused after the draft was saved"]})

    monkeypatch.setattr(persona_services, "_propose", refuse)
    with run_on_commit() as callbacks, pytest.raises(CommandError, match=r"^verb_subset: "):
        call_command("persona", "import-card", str(V1), "--agent", str(agent.pk),
                     "--address", ADDRESS, "--class", CLASS)  # fmt: skip
    assert callbacks == [] and counts() == before


@pytest.mark.parametrize("text", BACKTRACKING_SHAPES, ids=["quote-backslash", "escapes", "quotes"])
def test_nesting_is_measured_in_one_linear_pass(text: str) -> None:
    """VX-GRANT-4: the depth of a card at the size bound is found before decoding it, in time
    that does not grow with the square of its length (a few tens of ms here; minutes if it did)."""
    started = time.perf_counter()
    with pytest.raises(card_import.CardImportError, match=r"^card: not JSON"):
        card_import.read_document(text.encode(), source="file")
    assert time.perf_counter() - started < 5
