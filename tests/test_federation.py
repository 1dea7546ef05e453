"""Federated search (issue 42, VX-DISC-5): a registry asks its configured peers within a time
and size budget, shows a foreign entry only once its card's signatures and status list verify,
labels it with its source, never lets it stand in for a local entry, and a failing peer
degrades to its absence. The peers here are real HTTP servers on loopback (FakePeer) that sign
with keys of their own."""

import base64
import contextlib
import io
import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any, Self
from unittest import mock

import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from jwt.exceptions import PyJWKError
from rest_framework.test import APIClient

from cards import sealing
from cards.ard import federation, foreign, peers
from cards.ard.entries import ENTRY_TYPE
from cards.ard.views import ANSWERED_AS
from cards.models import FederationPeer
from cards.rendering import IDENTITY_EXTENSION, PINNED_GRANT_EXTENSION
from cards.status_list import STATUS_EXTENSION
from tests.factories import make_agent, make_owner, make_persona
from tests.federation_support import (
    STATUS_PATH,
    FakePeer,
    PeerCard,
    extension_edit,
    multibase,
)
from tests.owner_clients import token_client
from virgo.public_url import origin_of

pytestmark = pytest.mark.django_db
SEARCH = "/api/ard/search"
CREDENTIAL = "peer-token-5f1e9c"


@pytest.fixture(autouse=True)
def budget(settings: Any) -> Iterator[None]:
    # No VIRGO_OUTBOUND_ALLOWED_NETWORKS: a peer the operator named is reached on loopback
    # because they named it, and nothing else there is.
    settings.VIRGO_OUTBOUND_ALLOWED_NETWORKS = []
    settings.VIRGO_ARD_FEDERATION_SECONDS = 5.0
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def client() -> APIClient:
    return token_client(make_owner("reader"))


@pytest.fixture
def local() -> Any:
    agent = make_agent(make_owner("ada", organization="", oidc=False))
    return make_persona(
        agent, name="Quokka Keeper", description="Feeds quokkas.", discoverable=True
    )


@pytest.fixture
def peer() -> Iterator[FakePeer]:
    with FakePeer() as serving:
        serving.add("Quokka Counter")
        serving.add("Quokka Painter")
        peers.add_peer(serving.registry, label="peer one", credential=CREDENTIAL)
        yield serving


def search(client: APIClient, **body: Any) -> Any:
    return client.post(SEARCH, {"query": {"text": "quokka"}, **body}, format="json")


def names(answer: Any) -> list[str]:
    return [entry["displayName"] for entry in answer.json()["results"]]


def test_a_search_shows_the_peers_verified_entries_after_its_own_labelled_by_source(
    client: APIClient, local: Any, peer: FakePeer
) -> None:
    """VX-DISC-5: `auto` asks the peer (with `none`, and its credential, in JSON), then shows
    its verified entries after the registry's own, each with the peer as its `source`, whatever
    source the peer's entries claim."""
    peer.entry_edits = lambda entry: {**entry, "source": "https://elsewhere.example/api/ard/"}
    answer = search(client)
    assert answer.status_code == 200, answer.content
    assert answer[ANSWERED_AS] == "auto"
    assert names(answer) == ["Quokka Keeper", "Quokka Counter", "Quokka Painter"]
    sources = [entry["source"] for entry in answer.json()["results"]]
    assert sources[0].endswith("/api/ard/") and sources[0] != peer.registry
    assert sources[1:] == [peer.registry, peer.registry]
    [(headers, asked)] = peer.searches
    # Asked for what fits on the page after the one local entry.
    assert asked == {"query": {"text": "quokka"}, "federation": "none", "pageSize": 9}
    assert headers["Authorization"] == f"Token {CREDENTIAL}"
    # Header names and media types are case-insensitive (RFC 9110).
    sent = {name.lower(): value.lower() for name, value in headers.items()}
    assert (sent["content-type"], sent["accept"]) == ("application/json",) * 2
    # The credential goes to the peer's search alone, never with a card, JWKS or list it names.
    assert peer.fetch_headers and not [h for h in peer.fetch_headers if "Authorization" in h]


def test_none_and_referrals_ask_no_peer(client: APIClient, local: Any, peer: FakePeer) -> None:
    """VX-DISC-5: only `auto` federates; the client's `none` or `referrals` is this registry
    alone."""
    for mode in ("none", "referrals"):
        answer = search(client, federation=mode)
        assert names(answer) == ["Quokka Keeper"] and answer[ANSWERED_AS] == mode
    assert peer.searches == []


def _other_key_signs(peer: FakePeer) -> None:
    stranger = FakePeer()
    stranger.kid = peer.kid
    stranger.key, peer.key = peer.key, stranger.key
    # The cards are signed with a key the JWKS does not publish; the JWKS still has the kid.
    peer_jwks = stranger.jwks()
    peer.jwks = lambda: peer_jwks  # type: ignore[method-assign]
    stranger.server.server_close()


LIES: dict[str, Any] = {
    "a card changed after signing": lambda peer, card: setattr(
        peer, "card_edits", lambda signed: {**signed, "name": "Quokka Thief"}
    ),
    "a card signed by a key its origin does not publish": lambda peer, card: _other_key_signs(peer),
    "a publisher that is not the card's": lambda peer, card: setattr(
        card, "publisher", "bank.example"
    ),
    "an organization the card does not name": lambda peer, card: setattr(
        peer,
        "entry_edits",
        lambda entry: {
            **entry,
            "identifier": entry["identifier"].replace("127.0.0.1", "ada-labs.example"),
        },
    ),
    "an entry whose pinned grant is not its card's": lambda peer, card: setattr(
        peer,
        "entry_edits",
        lambda entry: {
            **entry,
            "trustManifest": {
                **entry["trustManifest"],
                "attestations": [
                    {**entry["trustManifest"]["attestations"][0], "digest": "b2" * 32}
                ],
            },
        },
    ),
    "an entry that is not an A2A card": lambda peer, card: setattr(
        peer, "entry_edits", lambda entry: {**entry, "type": "application/mcp-server-card+json"}
    ),
    "a status index past the end of its list": lambda peer, card: setattr(
        card, "index", 10_000_000
    ),
    "a revoked card": lambda peer, card: peer.revoked.add(card.index),
    "a stale status list": lambda peer, card: setattr(peer, "valid_for", -timedelta(hours=1)),
    # A key anyone who reads the JWKS holds: whoever serves the list could have made it.
    "a status list signed only by a shared secret in the JWKS": lambda peer, card: setattr(
        peer, "shared_secret", b"published-for-all-to-read-0123456789"
    ),
    "a card naming a status list elsewhere": lambda peer, card: setattr(
        peer, "card_edits", lambda signed: _status_elsewhere(signed)
    ),
}


def _status_elsewhere(card: dict[str, Any]) -> dict[str, Any]:
    for extension in card["capabilities"]["extensions"]:
        if "statusListCredential" in extension.get("params", {}):
            extension["params"]["statusListCredential"] = "http://127.0.0.2/status"
    return card


@pytest.mark.parametrize("lie", sorted(LIES))
def test_an_entry_that_does_not_verify_is_left_out(
    client: APIClient, local: Any, lie: str, caplog: pytest.LogCaptureFixture
) -> None:
    """VX-DISC-5: each way a peer's entry can fail to verify leaves it out (the search still
    answers, with everything that did verify), and the log says why, never the credential."""
    with FakePeer() as peer:
        lying = peer.add("Quokka Liar")
        peers.add_peer(peer.registry, label="liar", credential=CREDENTIAL)
        LIES[lie](peer, lying)
        with caplog.at_level(logging.WARNING, logger="virgo.federation"):
            answer = search(client)
    assert answer.status_code == 200
    assert names(answer) == ["Quokka Keeper"], lie
    assert any(
        record.getMessage().startswith("federation peer liar: an entry left out: ")
        for record in caplog.records
    ), caplog.text
    assert CREDENTIAL not in caplog.text


def test_a_peer_cannot_make_the_registry_fetch_from_another_private_address(
    client: APIClient, local: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """VX-DISC-5 with the outbound rules: the operator's choice of a peer reaches that peer's
    origin only; an entry naming a card elsewhere on loopback (an internal service, for the
    registry) is not fetched, and a cloud metadata address is refused even as a peer."""
    with FakePeer() as peer, FakePeer() as internal:
        elsewhere = internal.add("Quokka Internal")
        peer.entry_edits = lambda entry: {**entry, "url": internal.card_url(elsewhere)}
        peer.add("Quokka Pointer")
        peers.add_peer(peer.registry, label="pointer")
        with caplog.at_level(logging.WARNING, logger="virgo.federation"):
            answer = search(client)
        assert names(answer) == ["Quokka Keeper"]
        assert "is a loopback address" in caplog.text
        assert not [path for path in internal.requested if path.startswith("/cards/")]
    metadata = federation.Peer("http://169.254.169.254/api/ard/", "metadata", None)
    assert "a cloud metadata address, never allowed" in federation.check_peer(
        metadata, {"text": "quokka"}
    )


def test_a_card_of_an_organization_it_proves_may_publish_under_that_domain(
    client: APIClient, local: Any
) -> None:
    """VX-DISC-5: an entry whose publisher is the organization the signed card names as its
    verified provider is shown (the other half of the publisher binding above)."""
    with FakePeer() as peer:
        peer.add("Quokka Auditor", publisher="ada-labs.example", organization="ada-labs.example")
        peers.add_peer(peer.registry)
        assert names(search(client)) == ["Quokka Keeper", "Quokka Auditor"]


FAILURES: dict[str, Any] = {
    "slow": lambda peer: setattr(peer, "delay", 3.0),
    "an error": lambda peer: setattr(peer, "search_status", 500),
    "not JSON": lambda peer: setattr(peer, "search_body", b"<html>busy</html>"),
    "not ARD": lambda peer: setattr(peer, "search_body", b'{"items": []}'),
    "too large": lambda peer: setattr(peer, "search_body", b'{"results": [' + b" " * 4096 + b"]}"),
}


@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_a_failing_peer_degrades_to_its_absence(
    client: APIClient, local: Any, settings: Any, failure: str
) -> None:
    """VX-DISC-5: a peer that is slow, errs, answers what is not ARD or more than the budget
    reads is left out; the other peer and the local entries are shown. (That a search ends
    with its budget is proven without a clock by the test of a budget under a second.)"""
    settings.VIRGO_ARD_FEDERATION_SECONDS = 1.0
    settings.VIRGO_ARD_FEDERATION_BYTES = 2048
    with FakePeer() as failing, FakePeer() as working:
        failing.add("Quokka Ghost")
        working.add("Quokka Counter")
        peers.add_peer(failing.registry, label="failing")
        peers.add_peer(working.registry, label="working")
        FAILURES[failure](failing)
        answer = search(client)
    assert answer.status_code == 200
    assert names(answer) == ["Quokka Keeper", "Quokka Counter"]


def test_checking_a_peer_that_answers_what_is_not_ard_says_so() -> None:
    """VX-DISC-5: a search answered with JSON that holds no ARD results, or with what is not
    JSON, is named as such by `virgo peers check`; a fetch with no time left in the budget is
    not made, and one refused as a private address names what it was for."""
    with FakePeer() as peer:
        peer.search_body = b'{"items": []}'
        said = federation.check_peer(federation.Peer(peer.registry, "odd", None), {"text": "q"})
        assert said == f"left out: {peer.registry}search did not answer ARD search results"
        with pytest.raises(foreign.Unverified) as late:
            foreign.json_object(
                peer.registry + "search",
                what="search",
                deadline=time.monotonic() - 1,
                limit=2048,
                operator_chosen=True,
            )
        assert str(late.value) == "search: no time left in the search's budget"
        # A deadline that is this very instant leaves no time either.
        with (
            mock.patch.object(foreign.time, "monotonic", return_value=1000.0),
            pytest.raises(foreign.Unverified) as now,
        ):
            foreign.json_object(
                peer.registry, what="card", deadline=1000.0, limit=2048, operator_chosen=True
            )
        assert str(now.value) == "card: no time left in the search's budget"
        assert peer.requested == []
        peer.search_body = b"<html>busy</html>"
        said = federation.check_peer(federation.Peer(peer.registry, "odd", None), {"text": "q"})
        assert said == f"left out: federation peer: {peer.registry}search is not JSON"
    with pytest.raises(foreign.Unverified) as private:
        foreign.json_object(
            "http://10.0.0.1/card.json",
            what="card",
            deadline=time.monotonic() + 5,
            limit=2048,
            operator_chosen=False,
        )
    assert str(private.value) == (
        "card: 10.0.0.1 is a private address; VIRGO_OUTBOUND_ALLOWED_NETWORKS can allow its network"
    )


def test_a_peer_that_is_down_degrades_to_its_absence(client: APIClient, local: Any) -> None:
    """VX-DISC-5: nothing listening at the peer's address is an absence, not an error."""
    gone = FakePeer()
    peers.add_peer(gone.registry, label="gone")
    gone.server.server_close()
    answer = search(client)
    assert answer.status_code == 200 and names(answer) == ["Quokka Keeper"]


def test_a_peer_never_stands_in_for_a_local_entry(client: APIClient, local: Any) -> None:
    """VX-DISC-5: an entry naming a local persona's uuid (whatever its publisher says) is left
    out, and of two peers naming one identifier only the first is shown."""
    with FakePeer() as first, FakePeer() as second:
        impostor = first.add("Quokka Keeper (peer)")
        impostor.persona_uuid = str(local.uuid)
        shared = first.add("Quokka Shared")
        copy = second.add("Quokka Shared again")
        copy.persona_uuid = shared.persona_uuid
        copy.publisher = shared.publisher
        peers.add_peer(first.registry, label="first")
        peers.add_peer(second.registry, label="second")
        answer = search(client)
    assert names(answer) == ["Quokka Keeper", "Quokka Shared"]
    assert answer.json()["results"][1]["source"] == first.registry


def test_an_entry_whose_card_is_on_this_installations_origin_is_left_out(
    client: APIClient, local: Any, peer: FakePeer, settings: Any
) -> None:
    """VX-DISC-5: a card on this installation's own origin is this installation's to answer
    for, so a peer's entry naming one is left out even when its card verifies (here the peer
    serves from the origin the installation calls its own)."""
    settings.VIRGO_PUBLIC_BASE_URL = peer.origin
    answer = search(client)
    assert answer.status_code == 200 and names(answer) == ["Quokka Keeper"]
    # Asked, and its cards fetched to verify them: left out for where they live, nothing else.
    assert peer.searches and [path for path in peer.requested if path.startswith("/cards/")]
    settings.VIRGO_PUBLIC_BASE_URL = "http://testserver"
    cache.clear()
    assert names(search(client)) == ["Quokka Keeper", "Quokka Counter", "Quokka Painter"]


def test_a_card_on_this_installations_origin_in_another_spelling_is_left_out(
    client: APIClient, local: Any, settings: Any
) -> None:
    """VX-DISC-5 (attack): a peer cannot pass a card on this installation's origin off as its
    own by spelling the host in other letters' case; an origin is compared in one spelling."""
    resolved = socket.getaddrinfo("localhost", None, type=socket.SOCK_STREAM)
    if resolved[0][4][0] != "127.0.0.1":
        pytest.skip("localhost does not resolve to 127.0.0.1 first here")
    with FakePeer() as peer:
        peer.host = "LocalHost"
        peer.add("Quokka Mimic", publisher="localhost")
        peers.add_peer(peer.registry, label="mimic")
        assert names(search(client)) == ["Quokka Keeper", "Quokka Mimic"]
        settings.VIRGO_PUBLIC_BASE_URL = f"http://localhost:{peer.server.server_address[1]}"
        cache.clear()
        assert names(search(client)) == ["Quokka Keeper"]


def test_the_peers_entries_follow_on_one_more_page_when_the_last_local_page_is_full(
    client: APIClient, local: Any, peer: FakePeer
) -> None:
    """VX-DISC-5 with ARD's pageSize: a page never holds more than asked; the peers' entries
    come on the page after the last local one, and the peers are asked only then."""
    first = search(client, pageSize=1)
    assert names(first) == ["Quokka Keeper"] and "pageToken" in first.json()
    assert peer.searches == []
    second = search(client, pageSize=1, pageToken=first.json()["pageToken"])
    assert names(second) == ["Quokka Counter"]
    assert [asked["pageSize"] for _, asked in peer.searches] == [1]


def test_a_credential_is_sealed_bound_to_its_peer_and_never_shown(peer: FakePeer) -> None:
    """VX-DISC-5 with VX-SEC rules on secrets: the stored credential is sealed, opens only for
    the peer it was given for, and no listing shows it."""
    row = FederationPeer.objects.get(url=peer.registry)
    assert CREDENTIAL not in row.credential_sealed
    assert sealing.unseal(row.url, row.credential_sealed, sealing.PEER_CREDENTIAL) == (
        CREDENTIAL.encode()
    )
    with pytest.raises(sealing.KeyCannotBeOpened, match="the credential for peer http://x/"):
        sealing.unseal("http://x/", row.credential_sealed, sealing.PEER_CREDENTIAL)
    with pytest.raises(sealing.KeyCannotBeOpened):
        sealing.unseal(row.url, row.credential_sealed)  # a signing key's purpose
    listed = io.StringIO()
    call_command("peers", "list", stdout=listed)
    assert listed.getvalue() == f"peer one  {peer.registry}  enabled, Token credential\n"


def test_a_peer_whose_credential_does_not_open_is_left_out(
    client: APIClient, local: Any, peer: FakePeer, caplog: pytest.LogCaptureFixture
) -> None:
    """VX-DISC-5: a credential sealed for another peer (copied onto this row) does not open,
    and the peer is left out, the log saying why it did not open."""
    copied = peers.sealed_credential("http://elsewhere/", CREDENTIAL)
    FederationPeer.objects.filter(url=peer.registry).update(credential_sealed=copied)
    with pytest.raises(sealing.KeyCannotBeOpened) as why:
        sealing.unseal(peer.registry, copied, sealing.PEER_CREDENTIAL)
    with caplog.at_level(logging.WARNING, logger="virgo.federation"):
        answer = search(client)
    assert names(answer) == ["Quokka Keeper"] and answer[ANSWERED_AS] == "referrals"
    assert str(why.value)
    assert f"federation peer peer one left out: {why.value}" in [
        record.getMessage() for record in caplog.records
    ]


def test_a_peer_whose_credential_does_not_open_leaves_the_next_peers_asked() -> None:
    """VX-DISC-5: a credential that does not open leaves out its own peer only; the peers
    added after it are asked, with their credentials."""
    peers.add_peer("https://first.example/api/ard/", label="first", credential=CREDENTIAL)
    peers.add_peer("https://second.example/api/ard/", label="second", credential="s3cond")
    peers.add_peer("https://third.example/api/ard/", label="third")
    FederationPeer.objects.filter(label="first").update(
        credential_sealed=peers.sealed_credential("http://elsewhere/", CREDENTIAL)
    )
    assert federation.enabled_peers() == [
        federation.Peer("https://second.example/api/ard/", "second", "Token s3cond"),
        federation.Peer("https://third.example/api/ard/", "third", None),
    ]


def test_peers_commands_add_list_check_and_remove(tmp_path: Any) -> None:
    """VX-DISC-5: `virgo peers` takes the credential from a file (never the command line),
    says what a peer answers, and removes it."""
    with FakePeer() as peer:
        peer.add("Quokka Counter")
        peer.revoked.add(peer.add("Quokka Gone").index)
        token = tmp_path / "peer.token"
        token.write_text(CREDENTIAL + "\n")
        out = io.StringIO()
        call_command(
            "peers", "add", peer.registry.rstrip("/"), "--credential-file", str(token), stdout=out
        )
        assert out.getvalue() == (
            f"added 127.0.0.1:{peer.server.server_address[1]} ({peer.registry}), "
            "with a sealed credential\n"
        )
        checked = io.StringIO()
        call_command("peers", "check", "--text", "quokka", stdout=checked)
        report = checked.getvalue()
        assert report.startswith(
            f"127.0.0.1:{peer.server.server_address[1]}: answered 2 entries, 1 verified"
        )
        assert "left out:" in report and "revoked" in report
        call_command("peers", "remove", peer.registry, stdout=io.StringIO())
    assert not FederationPeer.objects.exists()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["add", "ftp://peer.example/"], "url: 'ftp://peer.example/' is not an http(s) URL"),
        (["add", "https://peer.example/?x=1"], "carries a query, fragment or credentials"),
        (["add", "http://testserver/api/ard/"], "is this installation's own origin"),
        (
            ["add", "http://TESTSERVER/api/ard/"],
            "url: http://testserver/api/ard/ is this installation's own origin",
        ),
        (
            ["add", "HTTP://testserver:80/api/ard/"],
            "url: http://testserver/api/ard/ is this installation's own origin",
        ),
        (
            ["add", "https://peer.example:99999/"],
            "url: 'https://peer.example:99999/' is not an "
            "http(s) URL of an ARD registry: its port is not a TCP port (1 to 65535)",
        ),
        (["remove", "https://never.example/api/ard/"], "no peer at https://never.example/api/ard/"),
        (["check"], "no enabled peer to check"),
    ],
)
def test_peers_commands_refuse_with_the_reason(
    arguments: list[str], message: str, settings: Any
) -> None:
    """VX-DISC-5: bad input to `virgo peers` is one line naming what is wrong."""
    settings.VIRGO_PUBLIC_BASE_URL = "http://testserver"
    with pytest.raises(CommandError, match=re.escape(message)):
        call_command("peers", *arguments)


def test_a_credential_with_spaces_is_refused(tmp_path: Any) -> None:
    """VX-DISC-5: a credential file holding more than one token is refused, not half-sent."""
    token = tmp_path / "two.token"
    token.write_text("one two")
    with pytest.raises(CommandError, match="credential: one token"):
        call_command("peers", "add", "https://peer.example/", "--credential-file", str(token))


@pytest.mark.parametrize(
    ("url", "kwargs", "message"),
    [
        ("https://peer.example/api/ard/#top", {}, "url: 'https://peer.example/api/ard/#top' "
         "carries a query, fragment or credentials; give them apart"),
        ("https://ada@peer.example/api/ard/", {}, "url: 'https://ada@peer.example/api/ard/' "
         "carries a query, fragment or credentials; give them apart"),
        ("https://:secret@peer.example/", {}, "url: 'https://:secret@peer.example/' carries a "
         "query, fragment or credentials; give them apart"),
        ("https://peer.example/", {"scheme": "Basic"}, "scheme: 'Basic' is not one of Token, "
         "Bearer"),
        ("https://peer.example/", {"credential": "one\ntwo"}, "credential: one token, without "
         "spaces or line breaks"),
    ],
)  # fmt: skip
def test_a_peer_refused_says_exactly_why(url: str, kwargs: dict[str, str], message: str) -> None:
    """VX-DISC-5: each part of a peer Virgo will not add is refused alone (a fragment, a user
    name without a password, a password without a user name, a scheme it does not send, a
    credential of two words), with the field and the reason, and nothing is stored."""
    with pytest.raises(peers.PeerRefused) as refused:
        peers.add_peer(url, **kwargs)
    assert str(refused.value) == message
    assert not FederationPeer.objects.exists()


def test_a_peer_added_with_nothing_but_its_url_is_named_by_its_host_and_holds_no_credential() -> (
    None
):
    """VX-DISC-5: `virgo peers add URL` alone labels the peer by its host and port and stores no
    credential, so its searches are sent without one."""
    peer = peers.add_peer("https://peer.example:8443/api/ard")
    assert (peer.url, peer.label, peer.scheme, peer.credential_sealed) == (
        "https://peer.example:8443/api/ard/",
        "peer.example:8443",
        "Token",
        "",
    )
    assert federation.enabled_peers() == [
        federation.Peer("https://peer.example:8443/api/ard/", "peer.example:8443", None)
    ]


def test_setting_up_django_loads_the_peer_records_but_not_the_federation_client() -> None:
    """VX-OPS-10 (decision 292): every command sets Django up, which imports each admin; the
    peers' admin needs only the peer records, so neither federated search nor the A2A client it
    asks peers with is loaded before a search."""
    listed = subprocess.run(
        [sys.executable, "-c", "import django, sys; django.setup(); print(' '.join(sys.modules))"],
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "virgo.settings", "VIRGO_EMBEDDED": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = set(listed.stdout.split())
    assert {"cards.admin", "cards.ard.peers"} <= loaded
    assert not {"cards.ard.federation", "cards.ard.foreign", "a2a.client"} & loaded


_URN = "urn:air:peer.example:virgo-persona:7c1e4b52-3f7e-4d47-9a43-3f0f2f4b8f10"
_CARD_URL = "https://peer.example/a/card.json"
# Each entry and what `virgo peers check` says of it: the checks made before anything is fetched.
MALFORMED_ENTRIES: dict[str, tuple[Any, str]] = {
    "a list": (["not", "an", "entry"], "the entry is not a JSON object"),
    "an identifier that is no string": (
        {"identifier": 7, "type": ENTRY_TYPE, "url": _CARD_URL},
        "the entry has no urn:air: identifier",
    ),
    "an identifier of another scheme": (
        {"identifier": "urn:other:quokka", "type": ENTRY_TYPE, "url": _CARD_URL},
        "the entry has no urn:air: identifier",
    ),
    "a type other than an A2A card": (
        {"identifier": _URN, "type": "text/html", "url": _CARD_URL},
        f"{_URN}: only A2A agent cards can be verified, not 'text/html'",
    ),
    "a card URL that is no string": (
        {"identifier": _URN, "type": ENTRY_TYPE, "url": 5},
        f"{_URN}: the entry names no http(s) card URL",
    ),
    "a card URL of another scheme": (
        {"identifier": _URN, "type": ENTRY_TYPE, "url": "ftp://peer.example/a/card.json"},
        f"{_URN}: the entry names no http(s) card URL",
    ),
}


@pytest.mark.parametrize("served", sorted(MALFORMED_ENTRIES))
def test_a_malformed_entry_is_refused_saying_what_it_lacks(served: str) -> None:
    """VX-DISC-5: an entry that is not one, names no identifier of ours, is no A2A card or names
    no http(s) card URL is refused for that, word for word, before anything is fetched."""
    entry, reason = MALFORMED_ENTRIES[served]
    fetcher = foreign.Fetcher(time.monotonic() + 5)
    with pytest.raises(foreign.Unverified) as refused:
        foreign.verified(entry, fetcher)
    assert str(refused.value) == reason
    assert fetcher.documents == {}


def test_an_https_card_url_is_fetched_and_a_key_of_another_kind_never_verifies() -> None:
    """VX-DISC-5: an https card URL passes the entry's checks to have its card and its origin's
    JWKS read, and a card that cannot be read is named as the card; a kid the JWKS does not
    publish, or a key not for the algorithms cards are signed with, is named as such."""
    fetcher = foreign.Fetcher(time.monotonic() + 5)
    fetcher.documents[_CARD_URL] = {"name": "Quokka"}
    fetcher.documents["https://peer.example" + foreign.JWKS_PATH] = {"keys": []}
    entry = {"identifier": _URN, "type": ENTRY_TYPE, "url": _CARD_URL}
    with pytest.raises(foreign.Unverified) as refused:
        foreign.verified(entry, fetcher)
    assert "http(s)" not in str(refused.value) and str(refused.value).startswith(_URN)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}/a/card.json"
    unanswered = foreign.Fetcher(time.monotonic() + 5, peer_origin=origin_of(closed))
    with pytest.raises(foreign.Unverified) as refused:
        foreign.verified({**entry, "url": closed}, unanswered)
    assert str(refused.value) == f"card: {closed} did not answer (ConnectError)"
    with pytest.raises(PyJWKError) as missing:
        foreign._key({}, "k1")
    assert str(missing.value) == "no key 'k1' in the card origin's JWKS"
    with pytest.raises(PyJWKError) as other:
        foreign._key({"k1": {"kid": "k1", "kty": "oct", "alg": "HS256"}}, "k1")
    assert str(other.value) == "key 'k1' is not for ES256 or EdDSA"


def test_only_a_superuser_manages_peers_in_the_admin() -> None:
    """VX-DISC-5: the admin's peers page is a superuser's; the credential typed there is sealed
    and never rendered back."""
    staff = make_owner("staff")
    browser = Client()
    browser.force_login(staff)
    assert browser.get("/admin/cards/federationpeer/").status_code == 403
    root = make_owner("root")
    root.is_superuser = True
    root.save()
    browser.force_login(root)
    added = browser.post(
        "/admin/cards/federationpeer/add/",
        {
            "url": "https://peer.example/api/ard",
            "label": "peer",
            "scheme": "Token",
            "enabled": "on",
            "credential": CREDENTIAL,
        },
    )
    assert added.status_code == 302, added.content
    row = FederationPeer.objects.get()
    assert row.url == "https://peer.example/api/ard/" and CREDENTIAL not in row.credential_sealed
    page = browser.get(f"/admin/cards/federationpeer/{row.pk}/change/")
    assert page.status_code == 200 and CREDENTIAL not in page.content.decode()
    moved = browser.post(
        f"/admin/cards/federationpeer/{row.pk}/change/",
        {
            "url": "https://other.example/api/ard/",
            "label": "peer",
            "scheme": "Token",
            "enabled": "on",
            "credential": "",
        },
    )
    assert "Enter the credential again for the new URL." in moved.content.decode()
    # A row kept in an older spelling is respelled when saved as it stands: the credential was
    # sealed for the old spelling and would no longer open, so it is asked for again.
    FederationPeer.objects.filter(pk=row.pk).update(
        url="https://peer.example/api/ard",
        credential_sealed=peers.sealed_credential("https://peer.example/api/ard", CREDENTIAL),
    )
    unchanged = {"url": "https://peer.example/api/ard", "label": "peer", "scheme": "Token"}
    resaved = browser.post(
        f"/admin/cards/federationpeer/{row.pk}/change/",
        {**unchanged, "enabled": "on", "credential": ""},
    )
    assert "Enter the credential again for the new URL." in resaved.content.decode()
    assert FederationPeer.objects.get().url == "https://peer.example/api/ard"
    resaved = browser.post(
        f"/admin/cards/federationpeer/{row.pk}/change/",
        {**unchanged, "enabled": "on", "credential": CREDENTIAL},
    )
    assert resaved.status_code == 302, resaved.content
    row = FederationPeer.objects.get()
    assert row.url == "https://peer.example/api/ard/"
    opened = sealing.unseal(row.url, row.credential_sealed, sealing.PEER_CREDENTIAL)
    assert opened == CREDENTIAL.encode()


def test_a_fault_of_virgos_own_leaves_the_peer_out_and_logs_its_traceback(
    client: APIClient,
    local: Any,
    peer: FakePeer,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """VX-DISC-5: even an error in the verification itself is the peer's absence, never a 500;
    it is logged as an error with its traceback, not as a peer's failure."""

    def broken(entry: Any, fetcher: Any) -> Any:
        raise RuntimeError("a bug in the verifier")

    monkeypatch.setattr(federation, "verified", broken)
    with caplog.at_level(logging.WARNING, logger="virgo.federation"):
        answer = search(client)
    assert answer.status_code == 200 and names(answer) == ["Quokka Keeper"]
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert record.getMessage() == "federation peer peer one left out"
    assert record.exc_info and "a bug in the verifier" in str(record.exc_info[1])


def _checked(peer: FakePeer) -> str:
    """What `virgo peers check` says of `peer` for a search for quokkas."""
    return federation.check_peer(
        federation.Peer(peer.registry, "checked", None), {"text": "quokka"}
    )


def _subject(**changes: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A `status_edits` hook changing the list's credentialSubject."""
    return lambda status: {
        **status,
        "credentialSubject": {**status["credentialSubject"], **changes},
    }


def _without(name: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A hook leaving `name` out of the document (an entry, a card or a status list)."""
    return lambda document: {key: value for key, value in document.items() if key != name}


def _attestations(value: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """An `entry_edits` hook: the entry's trust manifest with `value` as its attestations."""
    return lambda entry: {
        **entry,
        "trustManifest": {**entry["trustManifest"], "attestations": value},
    }


_ORGANIZATION_UNCLAIMED: dict[str, Any] = {
    "provider": "installation",
    "organization": {"domain": "ada-labs.example", "verification": "dns-txt"},
}


def _organization_unclaimed(peer: FakePeer, card: PeerCard) -> None:
    card.publisher = "ada-labs.example"
    peer.card_fields = extension_edit(IDENTITY_EXTENSION, lambda params: _ORGANIZATION_UNCLAIMED)


# What a peer serves (set on the peer and its one card) -> the reason `virgo peers check` gives;
# {urn} is the entry's identifier and {status} the peer's status list.
REASONS: dict[str, tuple[Callable[[FakePeer, PeerCard], None], str]] = {
    "a card pinning no grant": (
        lambda peer, card: setattr(
            peer, "card_fields", extension_edit(PINNED_GRANT_EXTENSION, lambda params: None)
        ),
        "{urn}: its card pins no grant",
    ),
    "a card pinning an empty grant digest": (
        lambda peer, card: setattr(card, "grant_digest", ""),
        "{urn}: its card pins no grant",
    ),
    "a card without capabilities": (
        lambda peer, card: setattr(peer, "card_fields", _without("capabilities")),
        "{urn}: its card pins no grant",
    ),
    "a card whose capabilities list no extensions": (
        lambda peer, card: setattr(
            peer, "card_fields", lambda document: {**document, "capabilities": {}}
        ),
        "{urn}: its card pins no grant",
    ),
    "an entry whose pinned grant is not its card's": (
        lambda peer, card: setattr(
            peer,
            "entry_edits",
            lambda entry: _attestations(
                [{**entry["trustManifest"]["attestations"][0], "digest": "b2" * 32}]
            )(entry),
        ),
        "{urn}: the entry's pinned-grant digest is not its card's",
    ),
    "an organization the card names without being its provider": (
        _organization_unclaimed,
        "{urn}: its publisher 'ada-labs.example' is neither the card's host nor the "
        "organization its signed card names",
    ),
    "a card naming no status list": (
        lambda peer, card: setattr(
            peer, "card_fields", extension_edit(STATUS_EXTENSION, lambda params: None)
        ),
        "{urn}: its card names no revocation status list",
    ),
    "a status list on another origin": (
        lambda peer, card: setattr(
            peer,
            "card_fields",
            extension_edit(
                STATUS_EXTENSION,
                lambda params: {**params, "statusListCredential": "http://127.0.0.2/status"},
            ),
        ),
        "{urn}: its status list is not on its card's origin",
    ),
    "a statusListIndex that is not a number": (
        lambda peer, card: setattr(
            peer,
            "card_fields",
            extension_edit(STATUS_EXTENSION, lambda params: {**params, "statusListIndex": "7a"}),
        ),
        "{urn}: its card's statusListIndex is not a number",
    ),
    "a status list that is not there": (
        lambda peer, card: setattr(
            peer,
            "card_fields",
            extension_edit(
                STATUS_EXTENSION,
                lambda params: {
                    **params,
                    "statusListCredential": params["statusListCredential"] + "-gone",
                },
            ),
        ),
        "status list: {status}-gone answered 404",
    ),
    # A key anyone who reads the JWKS holds proves nothing of who signed: asymmetric only.
    "a card signed only by a shared secret in the JWKS": (
        lambda peer, card: setattr(peer, "card_secret", b"published-for-all-to-read-0123456789"),
        "{urn}: its card's signatures do not verify (No valid signature found)",
    ),
    "a status list signed only by a shared secret": (
        lambda peer, card: setattr(peer, "shared_secret", b"published-for-all-to-read-0123456789"),
        "{status}: no signature by a key of its origin's JWKS verifies",
    ),
    "a status list stating no end": (
        lambda peer, card: setattr(peer, "status_edits", _without("validUntil")),
        "{status} states no validity period",
    ),
    "a status list starting at a time without a timezone": (
        lambda peer, card: setattr(
            peer, "status_edits", lambda status: {**status, "validFrom": "2026-01-01T00:00:00"}
        ),
        "{status} states no validity period",
    ),
    "a status list without a credentialSubject": (
        lambda peer, card: setattr(peer, "status_edits", _without("credentialSubject")),
        "{status} has no multibase encodedList",
    ),
    "an encodedList in another multibase encoding": (
        lambda peer, card: setattr(
            peer,
            "status_edits",
            lambda status: _subject(
                encodedList="z" + status["credentialSubject"]["encodedList"][1:]
            )(status),
        ),
        "{status} has no multibase encodedList",
    ),
    "an encodedList compressed as zlib, not GZIP": (
        lambda peer, card: setattr(
            peer, "status_edits", _subject(encodedList=multibase(zlib.compress(bytes(16))))
        ),
        "{status}: its encodedList is not base64url GZIP",
    ),
    "a list longer than 16 MB once inflated": (
        lambda peer, card: setattr(peer, "list_bits", (16 * 1024 * 1024 + 1024) * 8),
        "{status}: its list is longer than 16777216 bytes",
    ),
}


@pytest.mark.parametrize("served", sorted(REASONS))
def test_checking_a_peer_says_exactly_why_its_entry_is_left_out(served: str) -> None:
    """VX-DISC-5: each way a peer's entry fails to verify (a card, its extensions, the status
    list and its bits, each signed as served) leaves it out for the one reason it fails, and
    `virgo peers check` tells the operator exactly that reason."""
    setup, reason = REASONS[served]
    with FakePeer() as peer:
        card = peer.add("Quokka Liar")
        setup(peer, card)
        said = _checked(peer)
        urn = peer.entry(card)["identifier"]
        expected = reason.format(urn=urn, status=peer.origin + STATUS_PATH)
    assert said == f"answered 1 entries, 0 verified\n  left out: {expected}"


# What a peer serves that nothing in VX-DISC-5 asks of it: the entry still verifies.
TOLERATED: dict[str, Callable[[FakePeer], None]] = {
    "an entry without a trust manifest": lambda peer: setattr(
        peer, "entry_edits", _without("trustManifest")
    ),
    "a trust manifest whose attestations are null": lambda peer: setattr(
        peer, "entry_edits", _attestations(None)
    ),
    "a card extension without params": lambda peer: setattr(
        peer,
        "card_fields",
        lambda document: {
            **document,
            "capabilities": {
                "extensions": [
                    {"uri": "urn:example:no-params"},
                    *document["capabilities"]["extensions"],
                ]
            },
        },
    ),
}


@pytest.mark.parametrize("served", sorted(TOLERATED))
def test_an_entry_is_shown_whatever_it_leaves_unsaid(served: str) -> None:
    """VX-DISC-5: an entry stating no pinned-grant attestation has none to contradict its card,
    and an extension the registry does not read is passed over: the entry verifies."""
    with FakePeer() as peer:
        peer.add("Quokka Terse")
        TOLERATED[served](peer)
        assert _checked(peer) == "answered 1 entries, 1 verified"


def test_a_status_bit_is_read_at_its_index_up_to_the_lists_last() -> None:
    """VX-DISC-5 with W3C Bitstring Status List: index i is bit 0x80 >> (i % 8) of byte i // 8;
    in a list of 16 bits (its base64url unpadded), 8 is clear though 15 is set, 15 is revoked
    and 16 is past the end. `virgo peers check` asks for a page of 10 and says why each entry
    left out is, a line each."""
    with FakePeer() as peer:
        peer.list_bits = 16
        peer.add("Quokka Clear").index = 8
        revoked = peer.add("Quokka Revoked")
        revoked.index = 15
        peer.revoked.add(15)
        beyond = peer.add("Quokka Beyond")
        beyond.index = 16
        status = peer.origin + STATUS_PATH
        said = _checked(peer)
    assert said == (
        "answered 3 entries, 1 verified"
        f"\n  left out: {peer.entry(revoked)['identifier']}: revoked (its bit is set in {status})"
        f"\n  left out: {peer.entry(beyond)['identifier']}: its status index is past the end "
        f"of {status}"
    )
    [(_, asked)] = peer.searches
    assert asked == {"query": {"text": "quokka"}, "federation": "none", "pageSize": 10}


class _Stopped(datetime):
    """cards.ard.foreign's datetime with its clock stopped at 2026-12-07 12:00 UTC."""

    @classmethod
    def now(cls, tz: tzinfo | None = None) -> Self:
        return cls(2026, 12, 7, 12, 0, tzinfo=UTC)


def _valid(start: datetime, end: datetime) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A `status_edits` hook: the list valid from `start` until `end`."""
    return lambda status: {**status, "validFrom": start.isoformat(), "validUntil": end.isoformat()}


def test_a_status_list_is_valid_from_its_first_instant_until_its_last(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """VX-DISC-5 with VX-TRUST-8: a list is valid from the instant its validFrom names (that
    instant included) until its validUntil (excluded): at that instant it proves nothing."""
    monkeypatch.setattr(foreign, "datetime", _Stopped)
    now, hour = _Stopped.now(), timedelta(hours=1)
    with FakePeer() as peer:
        peer.add("Quokka Punctual")
        peer.status_edits = _valid(now, now + hour)
        assert _checked(peer) == "answered 1 entries, 1 verified"
        peer.status_edits = _valid(now - hour, now)
        assert _checked(peer) == (
            f"answered 1 entries, 0 verified\n  left out: {peer.origin}{STATUS_PATH} is valid "
            "from 2026-12-07 11:00:00+00:00 until 2026-12-07 12:00:00+00:00, not now"
        )


def test_a_publisher_names_the_cards_host_in_any_case() -> None:
    """VX-DISC-5: a host name is case-insensitive, so an entry whose URN names its card's host
    in capitals (LOCALHOST for a card at localhost) is bound to it and shown."""
    resolved = socket.getaddrinfo("localhost", None, type=socket.SOCK_STREAM)
    if resolved[0][4][0] != "127.0.0.1":
        pytest.skip("localhost does not resolve to 127.0.0.1 first here")
    with FakePeer() as peer:
        peer.host = "localhost"
        card = peer.add("Quokka Shouter", publisher="LOCALHOST")
        assert peer.entry(card)["identifier"].startswith("urn:air:LOCALHOST:")
        assert _checked(peer) == "answered 1 entries, 1 verified"


def _logged(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    """The federation log's lines as (level, message)."""
    return [
        (record.levelname, record.getMessage())
        for record in caplog.records
        if record.name == "virgo.federation"
    ]


def test_federated_asks_the_enabled_peers_unless_told_which(peer: FakePeer) -> None:
    """VX-DISC-5: without a list of peers a search asks the enabled peers (never a disabled
    one); given a list, it asks those alone (none for an empty list), and a page of no entries
    asks nobody."""
    with FakePeer() as disabled:
        disabled.add("Quokka Sleeper")
        peers.add_peer(disabled.registry, label="off")
        FederationPeer.objects.filter(url=disabled.registry).update(enabled=False)
        shown = federation.federated({"text": "quokka"}, 10)
        assert [entry["displayName"] for entry in shown] == ["Quokka Counter", "Quokka Painter"]
        assert [entry["source"] for entry in shown] == [peer.registry, peer.registry]
        assert federation.federated({"text": "quokka"}, 10, []) == []
        assert federation.federated({"text": "quokka"}, 0) == []
        assert federation.federated({"text": "quokka"}, -1) == []
        assert disabled.searches == []
    assert len(peer.searches) == 1


def test_each_peer_left_out_is_logged_with_why_and_the_rest_follow_in_peer_order(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """VX-DISC-5: of the peers a search is given, one answering what does not verify is left
    out with a warning saying why, one Virgo fails on is left out with an error (and its
    traceback), and the others' entries are shown in the peers' order, each with its source."""
    real = federation.verified
    with (
        FakePeer() as first,
        FakePeer() as refusing,
        FakePeer() as broken,
        FakePeer() as second,
    ):
        first.add("Quokka One")
        refusing.add("Quokka Refused")
        refusing.search_status = 500
        broken.add("Quokka Broken")
        second.add("Quokka Two")
        second.add("Quokka Three")

        def verifier(entry: Any, fetcher: Any) -> Any:
            if entry["url"].startswith(broken.origin):
                raise RuntimeError("a bug in the verifier")
            return real(entry, fetcher)

        monkeypatch.setattr(federation, "verified", verifier)
        peers = [
            federation.Peer(first.registry, "first", None),
            federation.Peer(refusing.registry, "refusing", None),
            federation.Peer(broken.registry, "broken", None),
            federation.Peer(second.registry, "second", None),
        ]
        with caplog.at_level(logging.INFO, logger="virgo.federation"):
            shown = federation.federated({"text": "quokka"}, 10, peers)
    assert [(entry["displayName"], entry["source"]) for entry in shown] == [
        ("Quokka One", first.registry),
        ("Quokka Two", second.registry),
        ("Quokka Three", second.registry),
    ]
    assert _logged(caplog) == [
        (
            "WARNING",
            f"federation peer refusing left out: federation peer: {refusing.registry}search "
            "answered 500",
        ),
        ("ERROR", "federation peer broken left out"),
    ]
    [error] = [record for record in caplog.records if record.levelname == "ERROR"]
    assert error.exc_info and str(error.exc_info[1]) == "a bug in the verifier"


class RecordedPool(ThreadPoolExecutor):
    """The pool a search asks its peers on, kept for the test to read and to join."""

    made: list["RecordedPool"] = []

    def __init__(self, max_workers: int) -> None:
        super().__init__(max_workers=max_workers)
        self.size = max_workers
        RecordedPool.made.append(self)


@pytest.fixture
def pools(monkeypatch: pytest.MonkeyPatch) -> list[RecordedPool]:
    RecordedPool.made = []
    monkeypatch.setattr(federation, "ThreadPoolExecutor", RecordedPool)
    return RecordedPool.made


def test_a_search_asks_at_most_eight_peers_at_once(
    settings: Any, monkeypatch: pytest.MonkeyPatch, pools: list[RecordedPool]
) -> None:
    """VX-DISC-5: however many peers are enabled, a search has at most eight of them answering
    at once (and all of them when it has fewer), so one search cannot open a connection to
    every registry an operator added; each is asked once."""
    settings.VIRGO_ARD_FEDERATION_SECONDS = 30.0
    asked: list[str] = []
    monkeypatch.setattr(federation, "_ask", lambda peer, *_: asked.append(peer.label) or [])
    peers = [federation.Peer(f"http://peer{n}.example/", f"peer {n}", None) for n in range(12)]
    assert federation.federated({"text": "quokka"}, 10, peers) == []
    assert federation.federated({"text": "quokka"}, 10, peers[:3]) == []
    assert [pool.size for pool in pools] == [federation._MAX_PEERS_AT_ONCE, 3]
    assert federation._MAX_PEERS_AT_ONCE == 8
    assert sorted(asked) == sorted([peer.label for peer in peers] + [p.label for p in peers[:3]])


def test_the_merged_answer_is_one_page_and_never_names_a_persona_of_this_installation(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-DISC-5: the peers' verified entries are merged into at most one page, whatever form
    their identifiers take; an identifier naming a persona of this installation is left out
    even after one whose uuid part is no uuid."""
    ours = make_persona(make_agent(make_owner("merge-owner")))
    answers = {
        "first": [
            {"identifier": "urn:example:not-ours", "url": "https://a.example/card"},
            {
                "identifier": "urn:air:peer.example:virgo-persona:not-a-uuid",
                "url": "https://a.example/x",
            },
            {
                "identifier": f"urn:air:peer.example:virgo-persona:{ours.uuid}",
                "url": "https://a.example/y",
            },
        ],
        "second": [
            {"identifier": f"urn:peer:{n}", "url": f"https://b.example/{n}"} for n in range(4)
        ],
    }
    monkeypatch.setattr(
        federation, "_ask", lambda peer, query, page_size, deadline: answers[peer.label]
    )
    peers_asked = [federation.Peer(f"http://{n}.example/", n, None) for n in answers]
    shown = federation.federated({"text": "quokka"}, 4, peers_asked)
    assert [entry["identifier"] for entry in shown] == [
        "urn:example:not-ours",
        "urn:air:peer.example:virgo-persona:not-a-uuid",
        "urn:peer:0",
        "urn:peer:1",
    ]


def test_a_budget_under_a_second_is_kept_and_a_peer_queued_past_it_is_never_asked(
    settings: Any, monkeypatch: pytest.MonkeyPatch, pools: list[RecordedPool]
) -> None:
    """VX-DISC-5: a search waits for its peers no longer than its budget, however short, and a
    peer still waiting its turn when the budget ends is never asked afterwards: the search's
    work ends with its answer."""
    settings.VIRGO_ARD_FEDERATION_SECONDS = 0.1
    asked: list[str] = []
    released = threading.Event()

    def held(peer: Any, query: Any, page_size: int, deadline: float) -> list[Any]:
        # Answers only once the search has answered: a search that waited would show it.
        asked.append(peer.label)
        released.wait(timeout=10)
        return [{"identifier": f"urn:peer:{peer.label}"}]

    monkeypatch.setattr(federation, "_ask", held)
    count = federation._MAX_PEERS_AT_ONCE + 1
    peers = [federation.Peer(f"http://peer{n}.example/", f"peer {n}", None) for n in range(count)]
    try:
        assert federation.federated({"text": "quokka"}, 10, peers) == []
    finally:
        released.set()
    [pool] = pools
    pool.shutdown(wait=True)
    assert sorted(asked) == sorted(peer.label for peer in peers[:-1])


def test_a_peer_still_answering_at_the_deadline_is_not_waited_for(
    settings: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """VX-DISC-5: a search waits for its peers until VIRGO_ARD_FEDERATION_SECONDS is over and
    no longer, even when what still runs is Virgo's own work on a peer's answer (not bounded
    by the fetches' timeouts): that peer is left out, the log saying it gave no answer within
    the budget."""
    settings.VIRGO_ARD_FEDERATION_SECONDS = 2.0

    def overrunning(entry: Any, fetcher: Any) -> Any:
        # Done 0.3 s after the deadline (and before a second of the search has passed).
        time.sleep(max(0.0, fetcher.deadline - time.monotonic()) + 0.3)
        return entry

    monkeypatch.setattr(federation, "verified", overrunning)
    with FakePeer() as slow:
        slow.add("Quokka Dawdler")
        with caplog.at_level(logging.INFO, logger="virgo.federation"):
            shown = federation.federated(
                {"text": "quokka"}, 10, [federation.Peer(slow.registry, "dawdler", None)]
            )
        assert shown == [] and len(slow.searches) == 1
    assert _logged(caplog) == [
        ("WARNING", "federation peer dawdler left out: no answer within the budget")
    ]


def test_a_peer_still_queued_at_the_deadline_is_left_out_as_unanswered(
    settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """VX-DISC-5: with more peers than are asked at once, one still waiting its turn when the
    budget ends is left out as unanswered like the rest, never an error of the search."""
    settings.VIRGO_ARD_FEDERATION_SECONDS = 1.0
    with contextlib.ExitStack() as stack:
        peers = [stack.enter_context(FakePeer()) for _ in range(federation._MAX_PEERS_AT_ONCE + 1)]
        for serving in peers:
            serving.delay = 4.0
        asked = [
            federation.Peer(serving.registry, f"peer {n}", None) for n, serving in enumerate(peers)
        ]
        with caplog.at_level(logging.INFO, logger="virgo.federation"):
            assert federation.federated({"text": "quokka"}, 10, asked) == []
    assert _logged(caplog) == [
        ("WARNING", f"federation peer peer {n} left out: no answer within the budget")
        for n in range(len(peers))
    ]


def _jwks_key(**changes: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A `jwks_edits` hook: the card's signing key with `changes` (None: that member left out)."""

    def edit(jwks: dict[str, Any]) -> dict[str, Any]:
        [key, *others] = jwks["keys"]
        changed = {**key, **changes}
        return {"keys": [{k: v for k, v in changed.items() if v is not None}, *others]}

    return edit


def _header_kid(kid: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A `card_edits` hook: the card's signature with a protected header naming `kid`."""
    header = json.dumps({"alg": "ES256", "kid": kid, "typ": "JOSE"}).encode()
    protected = base64.urlsafe_b64encode(header).decode().rstrip("=")
    return lambda card: {
        **card,
        "signatures": [{**card["signatures"][0], "protected": protected}],
    }


NOT_VERIFIED = "{urn}: its card's signatures do not verify (No valid signature found)"

# What a peer serves of its keys -> the reason `virgo peers check` gives; {urn} is the entry's
# identifier and {jwks} the peer's JWKS.
KEY_REASONS: dict[str, tuple[Callable[[FakePeer], None], str]] = {
    "a JWKS that is not a JSON object": (
        lambda peer: setattr(peer, "jwks_edits", lambda jwks: jwks["keys"]),
        "JWKS: {jwks} is not a JSON object",
    ),
    "a JWKS without a keys list": (
        lambda peer: setattr(peer, "jwks_edits", lambda jwks: {"keys": jwks["keys"][0]}),
        "{jwks} has no keys",
    ),
    "the card's key published for RS256": (
        lambda peer: setattr(peer, "jwks_edits", _jwks_key(alg="RS256")),
        NOT_VERIFIED,
    ),
    "the card's key published without an alg": (
        lambda peer: setattr(peer, "jwks_edits", _jwks_key(alg=None)),
        NOT_VERIFIED,
    ),
    "a card signature naming its kid in a list": (
        lambda peer: setattr(peer, "card_edits", _header_kid([peer.kid])),
        NOT_VERIFIED,
    ),
}


@pytest.mark.parametrize("served", sorted(KEY_REASONS))
def test_checking_a_peer_says_why_its_card_origins_keys_do_not_verify(served: str) -> None:
    """VX-DISC-5: a card verifies only by a key its origin's JWKS lists under the kid its
    signature names (a string), for ES256 or EdDSA; a JWKS that lists no keys verifies
    nothing. `virgo peers check` says exactly why the entry is left out."""
    setup, reason = KEY_REASONS[served]
    with FakePeer() as peer:
        card = peer.add("Quokka Keyless")
        setup(peer)
        said = _checked(peer)
        expected = reason.format(
            urn=peer.entry(card)["identifier"], jwks=peer.origin + "/.well-known/jwks.json"
        )
    assert said == f"answered 1 entries, 0 verified\n  left out: {expected}"


def test_a_jwks_entry_that_is_not_a_key_with_a_string_kid_is_passed_over() -> None:
    """VX-DISC-5: what a JWKS lists that is not an object with a string kid names no key; the
    key the card is signed with still verifies it."""
    with FakePeer() as peer:
        peer.add("Quokka Tidy")
        peer.jwks_edits = lambda jwks: {
            "keys": ["junk", {"kty": "oct", "kid": 7}, {"kty": "oct"}, *jwks["keys"]]
        }
        assert _checked(peer) == "answered 1 entries, 1 verified"


_REFUSED = (
    "{urn}: its publisher {publisher!r} is neither the card's host nor the organization its "
    "signed card names"
)


# The identity the signed card states, the entry's publisher -> None when it is shown, else
# the reason `virgo peers check` gives.
def _organization(domain: str | None = "ada-labs.example", **verification: str) -> dict[str, Any]:
    """The identity a card's provider states: an organization, its domain and verification."""
    organization = {**({"domain": domain} if domain else {}), **verification}
    return {"provider": "organization", "organization": organization}


PUBLISHERS: dict[str, tuple[dict[str, Any], str, str | None]] = {
    "an organization domain in other case": (
        _organization("Ada-Labs.Example", verification="dns-txt"),
        "ADA-LABS.example",
        None,
    ),
    "an organization stating no verification": (_organization(), "ada-labs.example", _REFUSED),
    "an organization stated unverified": (
        _organization(verification="unverified"),
        "ada-labs.example",
        _REFUSED,
    ),
    "a subdomain of the organization's": (
        _organization(verification="dns-txt"),
        "eu.ada-labs.example",
        _REFUSED,
    ),
    "an organization naming no domain, publisher none": (
        _organization(None, verification="dns-txt"),
        "none",
        _REFUSED,
    ),
    "an organization naming no domain, publisher xxxx": (
        _organization(None, verification="dns-txt"),
        "xxxx",
        _REFUSED,
    ),
}


@pytest.mark.parametrize("served", sorted(PUBLISHERS))
def test_a_publisher_is_the_organization_domain_the_signed_card_proves_in_any_case(
    served: str,
) -> None:
    """VX-DISC-5: besides the card's host, an entry may publish under the domain of the
    organization its signed card names as its provider, verified (a verification stated, and
    not `unverified`), in any case; a subdomain, or a card naming no domain, allows no other
    publisher, and `virgo peers check` says so exactly."""
    identity, publisher, reason = PUBLISHERS[served]
    with FakePeer() as peer:
        card = peer.add("Quokka Branded", publisher=publisher)
        peer.card_fields = extension_edit(IDENTITY_EXTENSION, lambda params: identity)
        said = _checked(peer)
        urn = peer.entry(card)["identifier"]
    if reason is None:
        assert said == "answered 1 entries, 1 verified"
    else:
        expected = reason.format(urn=urn, publisher=publisher.lower())
        assert said == f"answered 1 entries, 0 verified\n  left out: {expected}"
