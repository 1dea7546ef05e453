"""Federation peers stored before URLs had one spelling (decision 296) brought to it by cards
migration 0011 (cards.ard.peers.normalise_stored_peers, decision 298), with nothing deleted and
no credential lost.

Rows are stored here as they were before: their URL as given, their credential sealed for it.
"""

import io
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from cards import sealing
from cards.ard import federation, peers
from cards.models import FederationPeer
from virgo import kek

pytestmark = pytest.mark.django_db
CREDENTIAL = "peer-token-5f1e9c"
RAW = "HTTPS://Peer.Example:443/api/ard/"
STORED = "https://peer.example/api/ard/"


@pytest.fixture(autouse=True)
def own_origin(settings: Any) -> None:
    settings.VIRGO_PUBLIC_BASE_URL = "http://testserver"


def stored_before(url: str, credential: str = CREDENTIAL, **fields: Any) -> FederationPeer:
    """A peer as a release before decision 296 stored it."""
    return FederationPeer.objects.create(
        url=url,
        label=fields.pop("label", url),
        credential_sealed=peers.sealed_credential(url, credential),
        **fields,
    )


def opened(peer: FederationPeer) -> bytes:
    peer.refresh_from_db()
    return sealing.unseal(peer.url, peer.credential_sealed, sealing.PEER_CREDENTIAL)


def as_it_is(peer: FederationPeer) -> tuple[str, str, bool, str]:
    peer.refresh_from_db()
    return (peer.url, peer.label, peer.enabled, peer.credential_sealed)


def test_a_peer_in_another_spelling_is_respelled_and_its_credential_still_opens() -> None:
    """VX-DISC-5: a peer stored as `HTTPS://Peer.Example:443/...` is stored in the one spelling
    and its credential, sealed again for that URL, opens to the same token, so federation asks
    it with it; one with no credential moves alone; one already in the spelling is untouched."""
    raw = stored_before(RAW, label="peer one")
    bare = stored_before("http://Bare.Example:80/api/ard", credential="", label="bare")
    spelled = stored_before("https://other.example/api/ard/", credential="s3cond", label="other")
    untouched = as_it_is(spelled)

    done = peers.normalise_stored_peers()

    assert done == peers.Respelled(
        rewritten=[
            (RAW, STORED),
            ("http://Bare.Example:80/api/ard", "http://bare.example/api/ard/"),
        ],
        disabled=[],
        left=[],
    )
    assert opened(raw) == CREDENTIAL.encode()
    assert as_it_is(raw)[1:3] == ("peer one", True)
    with pytest.raises(sealing.KeyCannotBeOpened):
        sealing.unseal(RAW, raw.credential_sealed, sealing.PEER_CREDENTIAL)
    assert as_it_is(bare) == ("http://bare.example/api/ard/", "bare", True, "")
    assert as_it_is(spelled) == untouched
    assert federation.enabled_peers() == [
        federation.Peer(STORED, "peer one", f"Token {CREDENTIAL}"),
        federation.Peer("http://bare.example/api/ard/", "bare", None),
        federation.Peer("https://other.example/api/ard/", "other", "Token s3cond"),
    ]
    assert peers.normalise_stored_peers() == peers.Respelled([], [], [])


@pytest.mark.parametrize(
    "spelling", [RAW, STORED, "https://PEER.example/api/ard", "https://peer.example:443/api/ard/"]
)
def test_virgo_peers_remove_finds_a_respelled_peer_in_any_spelling(spelling: str) -> None:
    """VX-DISC-5: `virgo peers remove` could not find a peer stored in another spelling than
    the one it compares in; once respelled, any spelling of its URL removes it."""
    stored_before(RAW)
    if spelling != RAW:
        with pytest.raises(CommandError, match=f"no peer at {STORED}"):
            call_command("peers", "remove", spelling)
    peers.normalise_stored_peers()
    out = io.StringIO()
    call_command("peers", "remove", spelling, stdout=out)
    assert out.getvalue() == f"removed {STORED}\n"
    assert not FederationPeer.objects.exists()


def test_of_two_spellings_the_one_already_in_it_is_kept_and_the_other_disabled() -> None:
    """VX-DISC-5: a peer stored twice, once in the one spelling, keeps that row; the other stays
    as stored, disabled, not deleted, listed, and `virgo peers remove` removes it as listed."""
    raw = stored_before(RAW, label="raw")
    spelled = stored_before(STORED, credential="s3cond", label="spelled")
    sealed_raw, kept = raw.credential_sealed, as_it_is(spelled)
    # Added after them: still respelled once their URL is settled.
    other = stored_before("HTTPS://Other.Example/api/ard", label="other")
    FederationPeer.objects.filter(pk=other.pk).update(added_at=timezone.now() + timedelta(days=1))

    done = peers.normalise_stored_peers()

    assert done == peers.Respelled(
        [("HTTPS://Other.Example/api/ard", "https://other.example/api/ard/")],
        [(RAW, f"another peer is stored as {STORED}")],
        [],
    )
    assert as_it_is(raw) == (RAW, "raw", False, sealed_raw)
    assert as_it_is(spelled) == kept
    other.delete()
    listed = io.StringIO()
    call_command("peers", "list", stdout=listed)
    assert listed.getvalue() == (
        f"raw  {RAW}  disabled, Token credential\nspelled  {STORED}  enabled, Token credential\n"
    )
    call_command("peers", "remove", RAW, stdout=io.StringIO())
    assert list(FederationPeer.objects.values_list("url", flat=True)) == [STORED]


def test_of_two_other_spellings_the_first_added_is_respelled_and_the_later_disabled() -> None:
    """VX-DISC-5: of peers stored in two other spellings of one URL, the first added (by when,
    then by row) takes the spelling, credential and all; the later stays as stored, disabled."""
    later = stored_before(RAW, label="later")
    first = stored_before("https://PEER.EXAMPLE/api/ard", credential="f1rst", label="first")
    tied = stored_before("https://peer.example:443/api/ard", credential="t1ed", label="tied")
    FederationPeer.objects.filter(pk=later.pk).update(added_at=timezone.now() + timedelta(days=1))
    FederationPeer.objects.filter(pk=tied.pk).update(added_at=first.added_at)
    sealed_later, sealed_tied = later.credential_sealed, tied.credential_sealed

    done = peers.normalise_stored_peers()

    repeated = f"another peer is stored as {STORED}"
    assert done == peers.Respelled(
        rewritten=[("https://PEER.EXAMPLE/api/ard", STORED)],
        disabled=[("https://peer.example:443/api/ard", repeated), (RAW, repeated)],
        left=[],
    )
    assert as_it_is(first)[:3] == (STORED, "first", True) and opened(first) == b"f1rst"
    assert as_it_is(later) == (RAW, "later", False, sealed_later)
    assert as_it_is(tied) == ("https://peer.example:443/api/ard", "tied", False, sealed_tied)


def test_a_peer_on_this_installations_own_origin_is_disabled_where_it_is() -> None:
    """VX-DISC-5: a peer stored in another spelling of this installation's own origin, which
    `virgo peers add` refuses, keeps its URL and credential but is asked no more; one already
    in the spelling is left as it is; the peers stored after them are respelled all the same."""
    raw = stored_before("HTTP://TestServer:80/api/ard/", label="self")
    spelled = stored_before("http://testserver/other/", label="self too")
    after = stored_before(RAW, label="peer")
    sealed, kept = raw.credential_sealed, as_it_is(spelled)

    done = peers.normalise_stored_peers()

    assert done == peers.Respelled(
        [(RAW, STORED)], [("HTTP://TestServer:80/api/ard/", "this installation's own origin")], []
    )
    assert opened(after) == CREDENTIAL.encode()
    assert as_it_is(raw) == ("HTTP://TestServer:80/api/ard/", "self", False, sealed)
    assert as_it_is(spelled) == kept
    call_command("peers", "remove", "HTTP://TestServer:80/api/ard/", stdout=io.StringIO())
    assert not FederationPeer.objects.filter(pk=raw.pk).exists()


def test_a_url_that_cannot_be_spelled_so_is_left_as_stored() -> None:
    """VX-DISC-5: a stored URL the one spelling has no form for (not http(s), a port past
    65535, a query) is left as stored, enabled as it was, each with why."""
    urls = ["ftp://Peer.Example/", "https://Peer.Example:99999/", "HTTPS://Peer.Example/?x=1"]
    rows = [stored_before(url) for url in urls]
    before = [as_it_is(row) for row in rows]

    done = peers.normalise_stored_peers()

    assert done.rewritten == [] and done.disabled == []
    assert done.left == [
        ("ftp://Peer.Example/", "url: 'ftp://Peer.Example/' is not an http(s) URL of an ARD "
         "registry: it does not start with https:// or http://"),
        ("https://Peer.Example:99999/", "url: 'https://Peer.Example:99999/' is not an http(s) "
         "URL of an ARD registry: its port is not a TCP port (1 to 65535)"),
        ("HTTPS://Peer.Example/?x=1", "url: 'HTTPS://Peer.Example/?x=1' carries a query, "
         "fragment or credentials; give them apart"),
    ]  # fmt: skip
    assert [as_it_is(row) for row in rows] == before
    assert all(opened(row) == CREDENTIAL.encode() for row in rows)


def test_a_credential_that_does_not_open_keeps_its_peer_where_it_was_sealed(
    settings: Any,
) -> None:
    """VX-DISC-5: a credential sealed under a key-encryption key this process is not given
    would be lost if its peer moved, so the peer keeps its URL; given the key, it still opens."""
    lost = kek.generate()
    settings.VIRGO_KEY_ENCRYPTION_KEYS = [lost]
    raw = stored_before(RAW)
    before = as_it_is(raw)
    settings.VIRGO_KEY_ENCRYPTION_KEYS = [kek.generate()]
    with pytest.raises(sealing.KeyCannotBeOpened) as why:
        sealing.unseal(RAW, raw.credential_sealed, sealing.PEER_CREDENTIAL)

    done = peers.normalise_stored_peers()

    assert done == peers.Respelled([], [], [(RAW, str(why.value))])
    assert as_it_is(raw) == before
    settings.VIRGO_KEY_ENCRYPTION_KEYS = [lost]
    assert opened(raw) == CREDENTIAL.encode()


def test_a_peer_whose_credential_does_not_open_leaves_the_spelling_to_the_next(
    settings: Any,
) -> None:
    """VX-DISC-5: of two spellings of one URL, the first added keeps its URL when its
    credential does not open here; the next takes the spelling, and no row is disabled for a
    peer that is not stored in it."""
    lost, given = kek.generate(), kek.generate()
    settings.VIRGO_KEY_ENCRYPTION_KEYS = [lost]
    first = stored_before(RAW, label="first")
    settings.VIRGO_KEY_ENCRYPTION_KEYS = [given]
    later = stored_before("https://PEER.EXAMPLE/api/ard", credential="l4ter", label="later")
    FederationPeer.objects.filter(pk=later.pk).update(added_at=timezone.now() + timedelta(days=1))
    before = as_it_is(first)
    with pytest.raises(sealing.KeyCannotBeOpened) as why:
        sealing.unseal(RAW, first.credential_sealed, sealing.PEER_CREDENTIAL)

    done = peers.normalise_stored_peers()

    assert done == peers.Respelled(
        rewritten=[("https://PEER.EXAMPLE/api/ard", STORED)],
        disabled=[],
        left=[(RAW, str(why.value))],
    )
    assert as_it_is(first) == before
    assert as_it_is(later)[:3] == (STORED, "later", True) and opened(later) == b"l4ter"


# Upgrading --------------------------------------------------------------------------------------

BEFORE = [("cards", "0010_federation_peer")]


def migrate(targets: list[tuple[str, str]]) -> Any:
    MigrationExecutor(connection).migrate(targets)
    return MigrationExecutor(connection).loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_upgrading_respells_the_stored_peers_and_says_what_it_left(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """VX-DISC-5: migrating from 0010 respells a peer stored in another spelling, its credential
    opening for its new URL, and disables a second spelling of it, saying so and how to remove
    it."""
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    old = migrate(BEFORE)
    try:
        model = old.get_model("cards", "FederationPeer")
        for url, label in ((RAW, "first"), ("https://PEER.example/api/ard", "second")):
            model.objects.create(
                url=url, label=label, credential_sealed=peers.sealed_credential(url, CREDENTIAL)
            )
    finally:
        migrate(leaves)
    first = FederationPeer.objects.get(label="first")
    assert (first.url, first.enabled) == (STORED, True)
    assert opened(first) == CREDENTIAL.encode()
    second = FederationPeer.objects.get(label="second")
    assert (second.url, second.enabled) == ("https://PEER.example/api/ard", False)
    assert capsys.readouterr().out == (
        "\n  federation peer https://PEER.example/api/ard disabled: another peer is stored as "
        f"{STORED}; `virgo peers remove` it as listed\n"
    )
