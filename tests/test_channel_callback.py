"""The hub's decision callback: signed, bounded, CSRF-free, and answered only by the routed
authority. One test runs the whole loop over real sockets: hub -> Virgo's live server."""

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.urls import reverse

from channel.hub import Hub
from channel.models import AcceptedCallback
from channel.signing import HEADER, sign, signature
from runtime.models import DecisionRecord
from tests.channel_support import (
    DELETE,
    SECRET,
    held_delete,
    human_principal,
    owner_with_surface,
    persona_principal,
    running_hub,
)
from tests.factories import make_owner
from tests.live import DEADLINE_SECONDS
from tests.runtime_support import call, correlation, standing_persona

URL = "/api/channel/decisions/"


@pytest.fixture
def hub(settings) -> Iterator[Hub]:
    with running_hub(settings) as hub:
        yield hub


def post(body: bytes, signature_header: str | None) -> Any:
    headers = {HEADER: signature_header} if signature_header is not None else {}
    return Client(enforce_csrf_checks=True).post(
        URL, body, content_type="application/json", headers=headers
    )


def held(hub: Hub) -> tuple[Any, Any, str]:
    owner = owner_with_surface(hub)
    persona = standing_persona(owner)
    cid = correlation()
    held_delete(persona, cid)
    return owner, persona, cid


def still_pending(cid: str) -> bool:
    return DecisionRecord.objects.get(correlation_id=cid).decision == "pending"


@pytest.mark.django_db
def test_the_url_is_the_one_the_cards_name() -> None:
    assert reverse("channel-decision") == URL


@pytest.mark.django_db
def test_unsigned_forged_tampered_and_stale_answers_are_refused(hub: Hub) -> None:
    """V1-CONF-3: only the hub (holder of VIRGO_CHANNEL_SECRET) can carry an answer."""
    owner, persona, cid = held(hub)
    body, headers = hub.signed_answer(cid, "approve", human_principal(owner), secret=SECRET)
    good = headers[HEADER]
    forged = sign(secret="not-" + SECRET, body=body)
    tampered = body.replace(b'"approve"', b'"deny"')
    stale = signature(secret=SECRET, body=body, timestamp=int(time.time()) - 3600)
    for sent, header in (
        (body, None),
        (body, ""),
        (body, "t=abc,v1=00"),
        (body, forged),
        (tampered, good),
        (body, stale),
    ):
        response = post(sent, header)
        assert (response.status_code, response.json()["error"]) == (401, "bad_signature")
    assert still_pending(cid)
    assert call(persona, "workspace_write", DELETE, cid)["status"] == "pending"


@pytest.mark.django_db
def test_a_signed_answer_from_the_wrong_principal_is_refused(hub: Hub) -> None:
    """V1-CONF-1, V1-CONF-3: another human, the requester itself, a made-up shape: refused."""
    owner, persona, cid = held(hub)
    for principal, status, code in (
        (human_principal(make_owner()), 403, "wrong_principal"),
        ({"kind": "human", "id": f"teams:user/{owner.username}"}, 403, "wrong_principal"),
        (persona_principal(persona), 403, "own_request"),
    ):
        body, headers = hub.signed_answer(cid, "approve", principal, secret=SECRET)
        response = post(body, headers[HEADER])
        assert (response.status_code, response.json()["error"]) == (status, code)
    for payload in (
        {"correlation_id": cid, "decision": "approve", "principal": {"kind": "root", "id": "x"}},
        {"correlation_id": cid, "decision": "maybe", "principal": human_principal(owner)},
        ["not", "an", "object"],
    ):
        body = json.dumps(payload).encode()
        assert post(body, sign(secret=SECRET, body=body)).status_code == 400
    body = json.dumps(
        {"correlation_id": "corr-none", "decision": "approve", "principal": human_principal(owner)}
    ).encode()
    assert post(body, sign(secret=SECRET, body=body)).status_code == 404
    assert still_pending(cid)


@pytest.mark.django_db
def test_no_secret_configured_refuses_every_answer(hub: Hub, settings) -> None:
    owner, _, cid = held(hub)
    body, headers = hub.signed_answer(cid, "approve", human_principal(owner), secret=SECRET)
    settings.VIRGO_CHANNEL_SECRET = ""
    assert post(body, headers[HEADER]).status_code == 401
    assert still_pending(cid)


@pytest.mark.django_db
def test_bodies_are_bounded_and_only_post_is_accepted(hub: Hub, settings) -> None:
    settings.VIRGO_CHANNEL_CALLBACK_MAX_BYTES = 256
    body = json.dumps({"padding": "x" * 300}).encode()
    response = post(body, sign(secret=SECRET, body=body))
    assert (response.status_code, response.json()["error"]) == (413, "payload_too_large")
    assert Client().get(URL).status_code == 405


@pytest.mark.django_db
def test_callbacks_are_rate_limited_per_address_before_any_work(hub: Hub, settings) -> None:
    """A flood from one address gets 429 with Retry-After before its body is read or its
    signature checked; the request held for a decision stays pending, other senders go on."""
    cache.clear()
    settings.VIRGO_CHANNEL_CALLBACK_RATE_LIMIT = "2/m"
    owner, _, cid = held(hub)
    body, headers = hub.signed_answer(cid, "approve", human_principal(owner), secret=SECRET)

    def from_address(address: str, payload: bytes) -> Any:
        return Client(REMOTE_ADDR=address).post(
            URL, payload, content_type="application/json", headers={HEADER: "t=1,v1=00"}
        )

    flood = [from_address("198.51.100.9", b"{}").status_code for _ in range(2)]
    assert flood == [401, 401]
    limited = Client(REMOTE_ADDR="198.51.100.9").post(
        URL, body, content_type="application/json", headers=headers
    )
    assert (limited.status_code, limited.json()["error"]) == (429, "rate_limited")
    assert 1 <= int(limited["Retry-After"]) <= 60
    assert still_pending(cid)
    answered = Client(REMOTE_ADDR="198.51.100.10").post(
        URL, body, content_type="application/json", headers=headers
    )
    assert answered.status_code == 200
    assert not still_pending(cid)
    cache.clear()


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_the_whole_loop_over_real_sockets(hub: Hub, settings, live_server: Any) -> None:
    """V1-CONF-1, V1-CONF-2, V1-HS-2: Virgo sends the card to the hub over HTTP; the hub posts
    the signed approval to Virgo's live server; the held operation then runs once."""
    settings.VIRGO_PUBLIC_BASE_URL = live_server.url
    owner, persona, cid = held(hub)
    assert hub.confirmations[cid]["request"]["callback"]["url"] == live_server.url + URL
    response = hub.answer(cid, "approve", human_principal(owner), secret=SECRET)
    assert response.status_code == 200, response.text
    assert response.json() == {"correlation_id": cid, "decision": "approved"}
    first = call(persona, "workspace_write", DELETE, cid)
    assert first["ok"] is True and first["result"]["deleted"] is True
    assert call(persona, "workspace_write", DELETE, cid) == first
    record = DecisionRecord.objects.get(correlation_id=cid)
    assert record.decided_by_user == owner and record.executed_at is not None


# Bounded parsing and single acceptance (VX-SEC-10) ----------------------------------------------


@pytest.mark.django_db
def test_every_malformed_header_is_a_401_in_the_json_shape_never_a_500(hub: Hub) -> None:
    """VX-SEC-10: a `t=` of 5,000 digits broke int() before any authentication; the header and
    its parts are now bounded, and each malformed form is refused as such."""
    owner, _, cid = held(hub)
    body, headers = hub.signed_answer(cid, "approve", human_principal(owner), secret=SECRET)
    now = str(int(time.time()))
    mac = headers[HEADER].split(",v1=")[1]
    for header in (
        f"t={'9' * 5000},v1={mac}",
        f"t={'0' * 5000}{now},v1={mac}",
        f"t=1{'0' * 12},v1={mac}",
        f"t={now},v1={mac}{'0' * 5000}",
        f"t={now},v1={mac.upper()}",
        f"t={now},v1={mac[:-1]}",
        f"t={now},v1={mac},t={now}",
        f"t={now},v1={mac},v0={mac}",
        f"t={now},,v1={mac}",
        f" t={now},v1={mac}",
        f"t={now};v1={mac}",
        "x" * 10_000,
    ):
        response = post(body, header)
        assert response.status_code == 401, header[:40]
        assert response.json() == {
            "error": "bad_signature",
            "detail": "signature header is malformed",
        }
    assert still_pending(cid)
    assert post(body, headers[HEADER]).status_code == 200


@pytest.mark.django_db
def test_a_signed_callback_is_accepted_once(hub: Hub) -> None:
    """VX-SEC-10: the same signed bytes sent again inside the tolerance window are refused as a
    replay, whether the first copy was acted on or refused; a newly signed repeat is answered."""
    owner, _, cid = held(hub)
    body, headers = hub.signed_answer(cid, "deny", human_principal(owner), secret=SECRET)
    assert post(body, headers[HEADER]).json() == {"correlation_id": cid, "decision": "denied"}
    replayed = post(body, headers[HEADER])
    assert replayed.status_code == 409
    assert replayed.json() == {
        "error": "replayed",
        "detail": "this signed callback was already received; sign a new one",
    }
    assert DecisionRecord.objects.get(correlation_id=cid).decision == "denied"
    resigned = sign(secret=SECRET, body=body, now=time.time() + 1)
    assert post(body, resigned).json() == {"correlation_id": cid, "decision": "denied"}

    _, _, other = held(hub)
    stranger = human_principal(make_owner())
    body, headers = hub.signed_answer(other, "approve", stranger, secret=SECRET)
    assert post(body, headers[HEADER]).json()["error"] == "wrong_principal"
    assert post(body, headers[HEADER]).json()["error"] == "replayed"
    assert still_pending(other)


@pytest.mark.django_db
def test_accepted_signatures_are_kept_only_while_they_could_verify(hub: Hub, settings) -> None:
    """VX-SEC-10: the record of accepted signatures is pruned past the tolerance window."""
    settings.VIRGO_CHANNEL_CALLBACK_TOLERANCE = 300
    now = int(time.time())
    AcceptedCallback.objects.create(digest="a" * 64, signed_at=now - 301)
    AcceptedCallback.objects.create(digest="b" * 64, signed_at=now - 200)
    owner, _, cid = held(hub)
    body, headers = hub.signed_answer(cid, "approve", human_principal(owner), secret=SECRET)
    assert post(body, headers[HEADER]).status_code == 200
    kept = set(AcceptedCallback.objects.values_list("digest", flat=True))
    assert kept == {"b" * 64, headers[HEADER].split(",v1=")[1]}


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("live_postgres")
def test_concurrent_copies_of_one_signed_callback_are_accepted_once(hub: Hub) -> None:
    """VX-SEC-10: copies sent at the same moment, each on its own PostgreSQL connection, are
    decided by the unique signature record: exactly one is answered, every other is a replay."""
    owner, _, cid = held(hub)
    body, headers = hub.signed_answer(cid, "approve", human_principal(owner), secret=SECRET)
    copies = 6
    start = threading.Barrier(copies)
    answers: list[tuple[int, str]] = []
    errors: list[BaseException] = []

    def send() -> None:
        try:
            start.wait(DEADLINE_SECONDS)
            response = post(body, headers[HEADER])
            answers.append((response.status_code, response.json().get("error", "")))
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(copies)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE_SECONDS)
    assert errors == []
    assert sorted(answers) == [(200, "")] + [(409, "replayed")] * (copies - 1)
    assert DecisionRecord.objects.get(correlation_id=cid).decision == "approved"
    assert AcceptedCallback.objects.count() == 1
