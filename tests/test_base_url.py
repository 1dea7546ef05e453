"""VX-SCALE-4: machines configured with different public base URLs.

Two "machines" here are two values of VIRGO_PUBLIC_BASE_URL against the same database, switched
between requests as a load balancer alternates between machines (tests/test_two_machines.py
runs the same as real machines: virgo-web, a worker and `virgo check --deploy` on production
settings). The installation records one URL (cards.base_url): the machine on another publishes
and signs nothing, so a card keeps one ETag however the requests alternate, and the machine
says why where an operator looks: `check --deploy`, /readyz, its start, its tasks' log.
"""

import importlib
import io
import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.core.management import call_command
from django.core.management.base import CommandError, SystemCheckError
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from cards import base_url, checks, keys
from cards.models import PublicBaseUrl, PublishedCard
from cards.publishing import cards_owed_signatures
from cards.status_list import _forget
from personas import audit
from personas.models import AuditEvent, Persona
from personas.services import persona_revoke
from settling import tasks
from settling.reconciliation import owed_personas, reconcile
from tests.factories import (
    make_agent,
    make_owner,
    make_persona,
    run_on_commit,
    update_persona,
)
from tests.owner_clients import fresh_rate_limits  # noqa: F401 (autouse fixture)
from virgo import health
from virgo.public_url import normalise_base_url, origin_of
from virgo.startup import EXIT_MISCONFIGURED, web_starting

A = "https://virgo.example.org"
B = "https://virgo-b.example.org"

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def on_machine_a(settings: Any) -> Iterator[None]:
    """Every persona is made on machine A, whose URL the first card records."""
    settings.VIRGO_PUBLIC_BASE_URL = A
    keys._opened.clear()
    _forget()
    yield
    _forget()


@pytest.fixture
def persona() -> Persona:
    return make_persona(make_agent(make_owner()), discoverable=True)


def on(settings: Any, url: str) -> None:
    """The next request, command or task runs on the machine configured with `url`."""
    settings.VIRGO_PUBLIC_BASE_URL = url


def etags_of_alternating_gets(settings: Any, persona: Persona, count: int = 10) -> list[str]:
    """`count` GETs of the card, on A and B in turn; each must answer 200 (never a 500)."""
    etags = []
    for number in range(count):
        on(settings, (A, B)[number % 2])
        response = Client().get(persona.card_path)
        assert response.status_code == 200, response.content
        etags.append(response["ETag"])
    return etags


def stored(persona: Persona) -> tuple[Any, ...]:
    card = PublishedCard.objects.get(persona=persona)
    return (card.etag, card.last_modified, bytes(card.body), card.base_url, card.signed_by)


# The one spelling ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "spelling"),
    [
        ("https://virgo.example.org", A),
        ("https://virgo.example.org/", A),
        ("https://virgo.example.org//", A),
        ("HTTPS://Virgo.Example.ORG", A),
        ("https://virgo.example.org:443/", A),
        ("  https://virgo.example.org\n", A),
        ("http://virgo.example.org:80", "http://virgo.example.org"),
        ("https://virgo.example.org:8443/", "https://virgo.example.org:8443"),
        ("http://virgo.example.org:443", "http://virgo.example.org:443"),
        ("https://virgo.example.org/Virgo/", "https://virgo.example.org/Virgo"),
        ("https://virgo.example.org/XX/", "https://virgo.example.org/XX"),
        ("http://[::1]:8000/", "http://[::1]:8000"),
    ],
)
def test_spellings_of_one_url_are_one_and_others_stay_apart(written: str, spelling: str) -> None:
    """VX-SCALE-4: a trailing slash, the case of the scheme and host and the scheme's default
    port change nothing; another scheme, port or path (whose case counts) is another URL."""
    assert normalise_base_url(written) == spelling


@pytest.mark.parametrize(
    ("written", "why"),
    [
        ("virgo.example.org", "it does not start with https:// or http://"),
        ("ftp://virgo.example.org", "it does not start with https:// or http://"),
        ("https://", "it names no host"),
        ("https://ops:secret@virgo.example.org", "it holds a user name or password"),
        ("https://virgo.example.org/?from=lb", "it has a query or a fragment"),
        ("https://virgo.example.org/#top", "it has a query or a fragment"),
        ("https://virgo.example.org:0", "its port is not a TCP port (1 to 65535)"),
        ("https://virgo.example.org:99999", "its port is not a TCP port (1 to 65535)"),
        ("https://virgo.example.org:https", "its port is not a TCP port (1 to 65535)"),
    ],
)
def test_what_is_not_a_base_url_is_refused_saying_why(written: str, why: str) -> None:
    """VX-SCALE-4: refused where the setting is read (and by the move), never compared; the
    reason is the whole message."""
    with pytest.raises(ValueError) as refused:
        normalise_base_url(written)
    assert str(refused.value) == why


@pytest.mark.parametrize(
    ("written", "origin"),
    [
        ("https://virgo.example.org", A),
        ("HTTPS://Virgo.Example.ORG/api/ard/", A),
        ("https://virgo.example.org:443/a/b?x=1#top", A),
        ("https://ops:secret@VIRGO.example.org/", A),
        ("http://virgo.example.org:80/", "http://virgo.example.org"),
        ("http://virgo.example.org:443/", "http://virgo.example.org:443"),
        ("https://virgo.example.org:8443/x", "https://virgo.example.org:8443"),
        ("http://[::1]:8000/", "http://[::1]:8000"),
    ],
)
def test_an_origin_is_one_however_it_is_spelled(written: str, origin: str) -> None:
    """VX-DISC-5: the origin Virgo compares (its own against a peer's, a card's against its
    status list's) ignores the case of scheme and host, the scheme's default port and all that
    follows the host, so no spelling passes a peer or a card off as another origin."""
    assert origin_of(written) == origin


@pytest.mark.parametrize(
    ("written", "why"),
    [
        ("ftp://virgo.example.org/", "it does not start with https:// or http://"),
        ("https:///path", "it names no host"),
        ("https://virgo.example.org:99999/", "its port is not a TCP port (1 to 65535)"),
    ],
)
def test_what_has_no_origin_is_refused_saying_why(written: str, why: str) -> None:
    """VX-DISC-5: a URL that names no http(s) origin is refused, never compared."""
    with pytest.raises(ValueError) as refused:
        origin_of(written)
    assert str(refused.value) == why


# No re-signing storm -------------------------------------------------------------------------


def test_alternating_machines_serve_one_etag_and_write_nothing(
    settings: Any, persona: Persona
) -> None:
    """VX-SCALE-4: 10 GETs of a card on machines A and B in turn give one ETag, the bytes A
    published; B signs nothing and writes nothing (no statement but reads), and the recorded
    URL stays A's."""
    before = stored(persona)
    with CaptureQueriesContext(connection) as queries:
        etags = etags_of_alternating_gets(settings, persona)
    assert etags == [before[0]] * 10
    writes = [q["sql"] for q in queries if not q["sql"].lstrip().upper().startswith("SELECT")]
    assert writes == []
    assert stored(persona) == before
    assert before[3] == A and base_url.recorded_base_url() == A


def test_without_the_guard_the_storm_comes_back(
    settings: Any, persona: Persona, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-SCALE-4: what the test above counts is the storm: with the comparison switched off,
    each machine renders and signs again the card the other just wrote, 10 ETags in 10 GETs."""
    monkeypatch.setattr(base_url, "_compare", lambda recorded: None)
    etags = etags_of_alternating_gets(settings, persona)
    assert len(set(etags)) == 10


def test_the_machine_on_another_url_answers_503_for_what_it_would_sign(
    settings: Any, persona: Persona, caplog: pytest.LogCaptureFixture
) -> None:
    """VX-SCALE-4: a card behind its persona (changed through B, whose task declines to publish
    it), a tombstone and the status list answer 503 base_url_mismatch with Retry-After on B,
    never a 500 nor a document signed under B; both URLs are in the operator's log only; A
    publishes the card on its first request."""
    revoked = make_persona(make_agent(make_owner()), discoverable=True)
    with run_on_commit():
        persona_revoke(
            persona=revoked,
            actor=revoked.agent.owner,
            reason_code="retired",
            reason="gone",
            via="test",
        )
    on(settings, B)
    with caplog.at_level(logging.ERROR):
        changed = update_persona(persona, description="Changed through machine B.")
    assert PublishedCard.objects.get(persona=persona).generation < changed.generation
    assert "settle_persona declined: " in caplog.text
    for path in (persona.card_path, revoked.card_path, "/.well-known/status/revocation"):
        response = Client().get(path)
        assert response.status_code == 503, (path, response.content)
        assert json.loads(response.content) == {
            "code": "base_url_mismatch",
            "detail": "This server is not configured with this installation's public address; "
            "try again later.",
        }
        assert int(response["Retry-After"]) > 0 and response["Cache-Control"] == "no-store"
        assert B not in response.content.decode() and A not in response.content.decode()
    logged = [r.getMessage() for r in caplog.records if r.name == "cards.views"]
    assert logged and all(A in line and B in line for line in logged)
    # What is wrong, then the fix: the URL to set here, or the command that moves them all.
    said = (
        f"will not sign a public document: {base_url.BaseUrlMismatch(recorded=A, configured=B)}; "
    )
    assert all(line.startswith(said) for line in logged)
    assert all(line.endswith(f"`virgo cards move-base-url {B}`") for line in logged)

    on(settings, A)
    response = Client().get(persona.card_path)
    assert response.status_code == 200
    assert json.loads(response.content)["description"] == "Changed through machine B."
    assert PublishedCard.objects.get(persona=persona).generation == changed.generation


def test_publication_work_on_the_other_machine_is_declined(
    settings: Any, persona: Persona, caplog: pytest.LogCaptureFixture
) -> None:
    """VX-SCALE-4: on B the publication tasks (a persona's, a range's, beat's reconciler, a
    re-signing range, the move's fan-out) decline in one log line each and change no card; the
    reconciler and `virgo reconcile` (its dry run too, which would list every card) refuse,
    naming both URLs and the fix."""
    keys.rotate()
    assert cards_owed_signatures().exists()
    before = stored(persona)
    on(settings, B)
    with caplog.at_level(logging.ERROR, logger="settling.tasks"):
        tasks.settle_persona(persona.pk)
        assert tasks.settle_persona_range(persona.pk, persona.pk) == 0
        assert tasks.reconcile_owed() == 0
        assert tasks.resign_card_range(persona.pk, persona.pk) == 0
        assert tasks.fan_out_republish() == 0
    declined = [r.getMessage() for r in caplog.records if r.name == "settling.tasks"]
    assert [line.split(" declined: ")[0] for line in declined] == [
        "settle_persona",
        "settle_persona_range",
        "reconcile_owed",
        "resign_card_range",
        "fan_out_republish",
    ]
    assert all(A in line and B in line and "move-base-url" in line for line in declined)
    assert stored(persona) == before
    with pytest.raises(base_url.BaseUrlMismatch):
        reconcile()
    for dry_run in ((), ("--dry-run",)):
        with pytest.raises(CommandError) as refused:
            call_command("reconcile", *dry_run, stdout=io.StringIO(), stderr=io.StringIO())
        said = str(refused.value)
        assert A in said and B in said and "nothing is published here" in said


# Checks -------------------------------------------------------------------------------------


def deploy_check() -> str:
    """`check --deploy`'s Virgo checks: what they found, or "" when they pass."""
    try:
        call_command("check", "--deploy", "--tag", "virgo", stdout=io.StringIO())
    except SystemCheckError as failed:
        return str(failed)
    return ""


def test_check_deploy_fails_on_the_other_machine_naming_both_urls_and_the_fix(
    settings: Any, persona: Persona
) -> None:
    """VX-SCALE-4: virgo.E031 on B, with the installation's URL and B's, and the two fixes;
    nothing on A, nor on a machine that spells A's URL otherwise."""
    assert deploy_check() == ""
    on(settings, B)
    said = deploy_check()
    assert "virgo.E031" in said
    assert f"this process's VIRGO_PUBLIC_BASE_URL is {B}" in said
    assert f"the installation's public base URL is {A}" in said
    assert f"set VIRGO_PUBLIC_BASE_URL={A}" in said and f"move-base-url {B}" in said
    on(settings, normalise_base_url("HTTPS://Virgo.Example.org:443/"))
    assert deploy_check() == ""


def test_a_new_installation_passes_until_its_first_card_records_a_url(settings: Any) -> None:
    """VX-SCALE-4: nothing recorded, every machine passes (and records nothing); the first card
    published records its machine's URL, and from then on the other machine fails."""
    on(settings, B)
    assert deploy_check() == ""
    assert base_url.recorded_base_url() is None
    on(settings, A)
    make_persona(make_agent(make_owner()))
    assert base_url.recorded_base_url() == A
    on(settings, B)
    assert "virgo.E031" in deploy_check()


def test_of_two_machines_recording_at_once_the_first_url_is_kept(settings: Any) -> None:
    """VX-SCALE-4: when A records its URL between B's read of nothing recorded and B's write,
    B's write fails on the one row's key and B takes A's URL, so the installation still has one
    URL, the first, and B then refuses to sign."""
    on(settings, A)
    base_url.claim_base_url()
    assert base_url._record_first(B) == A
    assert list(PublicBaseUrl.objects.values_list("pk", "url")) == [(1, A)]
    on(settings, B)
    with pytest.raises(base_url.BaseUrlMismatch):
        base_url.claim_base_url()


@pytest.mark.django_db(transaction=True)
def test_readyz_is_503_on_the_other_machine_naming_the_mismatch(settings: Any) -> None:
    """VX-SCALE-4: B's /readyz answers 503 with `base_url` failed (the URLs go to the log, not
    to whoever probes); A's answers 200."""
    health.BACKLOG.forget()
    make_persona(make_agent(make_owner()))
    assert Client().get("/readyz").status_code == 200
    on(settings, B)
    response = Client().get("/readyz")
    assert response.status_code == 503
    body = json.loads(response.content)
    assert body["failed"] == ["base_url"]
    assert body["checks"]["base_url"] == "failed: BaseUrlMismatch"
    assert B not in response.content.decode()
    on(settings, A)
    assert Client().get("/readyz").status_code == 200


def test_a_worker_on_the_other_url_does_not_start_and_a_web_starts_unready(
    settings: Any,
    persona: Persona,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """VX-SCALE-4: a worker on B stops before its first task, one line with both URLs and the
    fix, status 2; virgo-web on B starts (its /readyz keeps it out) and logs virgo.E031; on A
    both start saying nothing."""
    checks.check_worker_start()
    web_starting.send(sender=None)
    on(settings, B)
    with pytest.raises(SystemExit) as refused:
        checks.check_worker_start()
    assert refused.value.code == EXIT_MISCONFIGURED
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"virgo worker: this process's VIRGO_PUBLIC_BASE_URL is {B}, ")
    assert f"set VIRGO_PUBLIC_BASE_URL={A} on this machine" in line
    with caplog.at_level(logging.ERROR, logger="cards.checks"):
        web_starting.send(sender=None)
    [logged] = [r.getMessage() for r in caplog.records if r.name == "cards.checks"]
    refusal = base_url.BaseUrlMismatch(recorded=A, configured=B)
    assert logged == (
        f"virgo.E031: {refusal}: /readyz answers 503 and nothing is signed here. {refusal.fix}"
    )


# The deliberate move ---------------------------------------------------------------------------


def command(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    with run_on_commit():
        call_command("cards", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_the_move_records_the_new_url_and_publishes_every_card_under_it(
    settings: Any, persona: Persona
) -> None:
    """VX-SCALE-4: `virgo cards move-base-url` (run on a machine given the new URL) records it
    in its one spelling, audited once; the workers on it publish every card again under it (a
    new ETag, the new URL in the card), A becomes the machine that fails its checks, and the
    same move again changes nothing."""
    other = make_persona(make_agent(make_owner()), discoverable=True)
    before = {p.pk: stored(p) for p in (persona, other)}
    on(settings, B)
    out, err = command("move-base-url", "HTTPS://Virgo-B.Example.org:443/")
    assert out == (
        f"moved the public base URL from {A} to {B}: every machine needs "
        f"VIRGO_PUBLIC_BASE_URL={B}; its workers publish every card again (`virgo reconcile` on "
        "one of them does it at once)\n"
    )
    assert err == ""
    assert base_url.recorded_base_url() == B
    [event] = AuditEvent.objects.filter(kind=AuditEvent.Kind.BASE_URL_MOVED)
    assert event.data == {"from": A, "to": B} and event.channel == AuditEvent.Channel.CLI
    assert audit.describe(event.kind, event.data) == f"public base URL moved from {A} to {B}"
    for moved in (persona, other):
        etag, _, body, url, _ = stored(moved)
        assert (url, etag != before[moved.pk][0]) == (B, True)
        card = json.loads(body)
        assert card["supportedInterfaces"][0]["url"] == f"{B}/a/{moved.uuid}/"
        assert A not in body.decode()
    assert not owed_personas().exists()
    assert deploy_check() == ""
    on(settings, A)
    assert "virgo.E031" in deploy_check()

    on(settings, B)
    out, _ = command("move-base-url", f"{B}/")
    assert out == f"the public base URL is {B} already: nothing to move\n"
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.BASE_URL_MOVED).count() == 1


def test_the_first_move_of_a_new_installation_is_from_nothing(settings: Any) -> None:
    """VX-SCALE-4: with no URL recorded yet, the move records its URL and its audit record
    says it came from none."""
    on(settings, B)
    command("move-base-url", B)
    assert base_url.recorded_base_url() == B
    [event] = AuditEvent.objects.filter(kind=AuditEvent.Kind.BASE_URL_MOVED)
    assert event.data == {"from": "", "to": B}


def test_the_move_from_a_machine_still_on_the_old_url_says_so(
    settings: Any, persona: Persona
) -> None:
    """VX-SCALE-4: run where the old URL is still configured, the move is recorded; the command
    says this process publishes nothing until it has the new URL, and its fan-out declines."""
    before = stored(persona)
    out, err = command("move-base-url", B)
    assert out.startswith(f"moved the public base URL from {A} to {B}")
    assert err == (
        f"this process runs with VIRGO_PUBLIC_BASE_URL={A}: it publishes nothing until it is "
        "given the new URL\n"
    )
    assert stored(persona) == before
    assert base_url.recorded_base_url() == B


def test_the_move_refuses_what_is_not_a_base_url_and_shows_both_urls(settings: Any) -> None:
    """VX-SCALE-4: a URL that is not one is refused saying why, and nothing is recorded;
    `virgo cards base-url` shows the installation's URL beside this process's."""
    refusal = "'virgo-b.example.org' is not a public base URL: it does not start with https://"
    with pytest.raises(CommandError, match=re.escape(refusal)):
        command("move-base-url", "virgo-b.example.org")
    assert base_url.recorded_base_url() is None
    out, _ = command("base-url")
    assert out == (
        f"installation: none recorded yet (the first card records it)\nthis process: {A}\n"
    )
    on(settings, B)
    command("move-base-url", B)
    on(settings, A)
    assert command("base-url")[0] == f"installation: {B}\nthis process: {A}\n"


def test_an_upgraded_installation_records_the_url_of_most_of_its_cards(settings: Any) -> None:
    """VX-SCALE-4: the migration that brings the record records the URL most published cards
    were rendered under (normalised), so the machines serving them keep publishing."""
    personas = [make_persona(make_agent(make_owner())) for _ in range(3)]
    PublishedCard.objects.filter(persona=personas[0]).update(base_url=B)
    PublishedCard.objects.exclude(persona=personas[0]).update(base_url=f"{A.upper()}:443")
    PublicBaseUrl.objects.all().delete()
    migration = importlib.import_module("cards.migrations.0009_public_base_url")
    migration.record_the_cards_url(django_apps, None)
    assert base_url.recorded_base_url() == A
