"""The revocation status list (VX-TRUST-7): every card names its place in one signed list, in
the manner of W3C Bitstring Status List v1.0, and a revocation sets exactly its bits in the
transaction that revokes.

A peer checks the way README "Checking revocation" says: the card's status extension gives the
list's URL and the index; one fetch of the list, verified with the JWKS alone (PyJWT, and
RFC 8785 by the rfc8785 package: nothing of Virgo's), answers for every card it holds.
"""

import base64
import gzip
import json
import re
import time
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import jwt
import pytest
from django.conf import settings
from django.core.cache import cache
from django.db import IntegrityError, connection, transaction
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from cards import keys
from cards import status_list as status_list_module
from cards.status_list import MIN_BITS, STATUS_EXTENSION, status_entry, status_list_url
from personas import audit
from personas.models import (
    AuditEvent,
    Generation,
    GenerationFrozen,
    Persona,
    StatusListEntry,
    StatusListVersion,
)
from personas.services import (
    agent_delete,
    composition_hash,
    persona_delete,
    persona_purge,
    persona_revoke,
    status_list_changed,
)
from personas.status_list import list_state, revoked_indexes, status_indexes
from tests.factories import make_agent, make_owner, make_persona, run_on_commit, update_persona
from tests.revocation_support import moderator
from tests.status_list_support import LIST, index_of, revoke, verified

pytestmark = pytest.mark.django_db

SECURITY_HEADERS = (
    "Content-Security-Policy",
    "X-Frame-Options",
    "X-Content-Type-Options",
    "Referrer-Policy",
    "Cross-Origin-Opener-Policy",
)


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


@pytest.fixture(autouse=True)
def private_home(tmp_path: Any, settings: Any) -> None:
    settings.VIRGO_HOME = tmp_path / "home"


@pytest.fixture
def owner() -> Any:
    return make_owner()


@pytest.fixture
def persona(owner: Any) -> Persona:
    return make_persona(make_agent(owner), discoverable=True)


def bits(document: dict[str, Any]) -> bytes:
    """The bitstring: multibase base64url (prefix u, no padding) of its GZIP."""
    encoded = document["credentialSubject"]["encodedList"]
    assert encoded.startswith("u") and "=" not in encoded
    return gzip.decompress(base64.urlsafe_b64decode(encoded[1:] + "=" * (-len(encoded[1:]) % 4)))


def bit(bitstring: bytes, index: int) -> int:
    """W3C: index 0 is the left-most bit of the first byte."""
    return (bitstring[index // 8] >> (7 - index % 8)) & 1


def set_bits(bitstring: bytes) -> list[int]:
    return [index for index in range(len(bitstring) * 8) if bit(bitstring, index)]


def fetch(**headers: str) -> Any:
    return Client().get(LIST, headers=headers)


def served_list() -> dict[str, Any]:
    response = fetch()
    assert response.status_code == 200, response.content
    document: dict[str, Any] = json.loads(response.content)
    verified(document)
    return document


def card_status(persona: Persona) -> dict[str, Any]:
    card = json.loads(Client().get(persona.card_path).content)
    [extension] = [
        extension
        for extension in card["capabilities"]["extensions"]
        if extension["uri"] == STATUS_EXTENSION
    ]
    params: dict[str, Any] = extension["params"]
    return params


def test_the_list_verifies_against_the_jwks_and_is_a_bitstring_status_list(
    persona: Persona,
) -> None:
    """VX-TRUST-7: the list is a BitstringStatusListCredential-shaped document, signed by a key
    of the JWKS (a changed bit fails), its encodedList at least 131,072 bits, all clear while
    nothing is revoked."""
    document = served_list()
    assert verified(document) in {key["kid"] for key in keys.public_jwks()["keys"]}
    del document["signatures"]
    subject = document["credentialSubject"]
    assert document["type"] == ["VerifiableCredential", "BitstringStatusListCredential"]
    assert document["id"] == status_list_url()
    assert (subject["type"], subject["statusPurpose"]) == ("BitstringStatusList", "revocation")
    bitstring = bits(document)
    assert len(bitstring) * 8 >= MIN_BITS
    assert set_bits(bitstring) == []
    forged = json.loads(fetch().content)
    flipped = bytearray(bitstring)
    flipped[0] |= 0x80
    packed = base64.urlsafe_b64encode(gzip.compress(bytes(flipped))).rstrip(b"=").decode()
    forged["credentialSubject"]["encodedList"] = "u" + packed
    with pytest.raises(jwt.exceptions.InvalidSignatureError):
        verified(forged)


def test_a_card_names_its_generations_index_and_is_signed_with_it(persona: Persona) -> None:
    """VX-TRUST-7: the card's status extension is a BitstringStatusListEntry naming the list and
    this generation's index; the next generation's card names another index."""
    first = index_of(persona)
    assert card_status(persona) == status_entry(first)
    assert card_status(persona)["statusListCredential"] == status_list_url()
    persona = update_persona(persona, description="Another generation.")
    second = index_of(persona)
    assert second != first
    assert card_status(persona)["statusListIndex"] == str(second)


def test_a_persona_revocation_sets_every_generations_bit_and_nothing_else(
    persona: Persona, owner: Any
) -> None:
    """VX-TRUST-7: revoking the persona sets the bit of each of its generations; another
    persona's stays clear."""
    persona = update_persona(persona, description="Generation two.")
    other = make_persona(make_agent(owner), discoverable=True)
    revoke(persona)
    bitstring = bits(served_list())
    assert set_bits(bitstring) == sorted([index_of(persona, 1), index_of(persona, 2)])
    assert bit(bitstring, index_of(other)) == 0


def test_a_generation_revocation_sets_that_bit_only_and_the_next_generation_is_clear(
    persona: Persona,
) -> None:
    """VX-TRUST-7: a revoked generation's bit is set, the owner's next generation's is not; the
    card of the revoked one answers its tombstone as before."""
    persona = update_persona(persona, description="Generation two.")
    revoke(persona, generation=2)
    assert Client().get(persona.card_path).status_code == 410
    persona = update_persona(persona, description="Generation three.")
    bitstring = bits(served_list())
    assert set_bits(bitstring) == [index_of(persona, 2)]
    assert bit(bitstring, index_of(persona, 1)) == 0
    assert bit(bitstring, index_of(persona, 3)) == 0
    assert card_status(persona)["statusListIndex"] == str(index_of(persona, 3))


def test_the_bit_is_set_in_the_revoking_transaction_and_a_rollback_flips_nothing(
    persona: Persona,
) -> None:
    """VX-TRUST-7: inside the revoking transaction the bit and the version have moved already;
    a revocation rolled back leaves both as they were."""
    before = list_state()
    etag = fetch()["ETag"]

    class Undo(Exception):
        pass

    with pytest.raises(Undo), transaction.atomic():
        revoke(persona)
        assert StatusListEntry.objects.get(index=index_of(persona)).revoked_at is not None
        assert list_state().version == before.version + 1
        raise Undo
    assert list_state() == before
    assert StatusListEntry.objects.filter(revoked_at__isnull=False).count() == 0
    assert set_bits(bits(served_list())) == []
    assert fetch(If_None_Match=etag).status_code == 304


def test_the_etag_moves_with_a_revocation_and_revalidates(persona: Persona) -> None:
    """VX-TRUST-7: an unchanged list answers 304 to its ETag; after a revocation the old ETag
    gets 200 and the new list, whose ETag then answers 304. Short and public caching."""
    first = fetch()
    assert first["Cache-Control"] == "public, max-age=60"
    assert fetch(If_None_Match=first["ETag"]).status_code == 304
    revoke(persona)
    after = fetch(If_None_Match=first["ETag"])
    assert after.status_code == 200
    assert after["ETag"] != first["ETag"]
    assert bit(bits(json.loads(after.content)), index_of(persona)) == 1
    assert fetch(If_None_Match=after["ETag"]).status_code == 304


def test_a_key_rotation_signs_the_list_again(persona: Persona) -> None:
    """VX-TRUST-7: a change of the signing set moves the list's ETag, and the new list carries a
    signature by the new key."""
    before = served_list()
    etag = fetch()["ETag"]
    with run_on_commit():
        new = keys.rotate()
    after = served_list()
    assert fetch()["ETag"] != etag
    kids = {
        json.loads(base64.urlsafe_b64decode(s["protected"] + "=="))["kid"]
        for s in after["signatures"]
    }
    assert new.kid in kids
    assert after["credentialSubject"] == before["credentialSubject"]


def test_a_render_reads_the_signing_set_once(
    persona: Persona, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-TRUST-7: a list's signatures and its ETag come of one read of the signing set, so a
    key rotated while the list renders never leaves it signed by one set under the ETag of
    another (and no render pays for the set twice)."""
    reads = []
    read_signers = keys.signers

    def counted() -> Any:
        reads.append(1)
        return read_signers()

    with transaction.atomic():
        status_list_changed()
    monkeypatch.setattr(keys, "signers", counted)
    assert fetch().status_code == 200
    assert len(reads) == 1


def test_one_fetch_answers_for_thousands_of_cards_in_queries_that_do_not_grow(
    persona: Persona,
) -> None:
    """VX-TRUST-7: with 2,000 more generations, one GET answers every one of them; rendering the
    list costs the same queries as with one persona, and an unchanged list costs one."""

    def render_queries() -> int:
        """The queries of a GET that finds the list changed: it renders and signs it."""
        with transaction.atomic():
            status_list_changed()
        with CaptureQueriesContext(connection) as render:
            assert fetch().status_code == 200
        return len(render.captured_queries)

    fetch()
    few = render_queries()
    template = Generation.objects.get(persona=persona)
    personas = Persona.objects.bulk_create(
        [
            Persona(
                uuid=uuid.uuid4(),
                agent_id=persona.agent_id,
                name=f"Many {number}",
                system_prompt=persona.system_prompt,
                persona_class=persona.persona_class,
                address_id=persona.address_id,
                discoverable=True,
            )
            for number in range(2000)
        ]
    )
    generations = Generation.objects.bulk_create(
        [
            Generation(
                persona=many,
                number=1,
                composition={**template.composition, "persona": str(many.uuid)},
                base_composition_hash=composition_hash(template.composition),
            )
            for many in personas
        ]
    )
    indexes = status_indexes(generation.pk for generation in generations)
    assert len(set(indexes.values())) == 2000
    revoked = personas[::400]
    actor = moderator()
    for many in revoked:
        with run_on_commit():
            persona_revoke(
                persona=many, actor=actor, reason_code="compromised", reason="test", via="test"
            )
    assert render_queries() == few
    with CaptureQueriesContext(connection) as unchanged:
        assert fetch().status_code == 200
    assert len(unchanged.captured_queries) == 1
    bitstring = bits(served_list())
    assert set_bits(bitstring) == sorted(
        indexes[generation.pk] for generation in generations if generation.persona in revoked
    )


def test_the_list_has_every_security_header_the_card_has(persona: Persona) -> None:
    """VX-TRUST-7: the list's 200 and 304 carry the card's security headers (CSP default-src
    'none' for JSON, nosniff, ...); HEAD has no body; other methods and bodies are refused."""
    card = Client().get(persona.card_path)
    response = fetch()
    assert response["Content-Type"] == "application/json"
    assert "default-src 'none'" in response["Content-Security-Policy"]
    assert response["X-Content-Type-Options"] == "nosniff"
    not_modified = fetch(If_None_Match=response["ETag"])
    for name in SECURITY_HEADERS:
        assert response[name] == card[name], name
        assert not_modified[name] == card[name], name
    head = Client().head(LIST)
    assert head.status_code == 200 and head.content == b""
    assert Client().post(LIST).status_code == 405
    assert Client().generic("GET", LIST, data=b"x").status_code == 413


@pytest.mark.parametrize(
    "if_none_match",
    ['"' + "a" * 100_000 + '"', "W/" * 20_000, ",," * 30_000, '"\x00\x7f"', '"unterminated'],
)
def test_a_malformed_or_huge_if_none_match_gets_the_list(
    persona: Persona, if_none_match: str
) -> None:
    """VX-TRUST-7: an If-None-Match that is huge or malformed matches nothing: 200 and the
    list, quickly."""
    response = fetch(If_None_Match=if_none_match)
    assert response.status_code == 200
    verified(json.loads(response.content))


def test_the_list_reveals_nothing_but_bits(persona: Persona, owner: Any) -> None:
    """VX-TRUST-7: the document names no persona, generation, owner or count: exactly the W3C
    members, the installation as issuer, and the bits."""
    revoke(persona)
    document = served_list()
    assert set(document) == {
        "@context", "id", "type", "issuer", "validFrom", "validUntil", "credentialSubject",
        "signatures",
    }  # fmt: skip
    assert set(document["credentialSubject"]) == {"id", "type", "statusPurpose", "encodedList"}
    text = fetch().content.decode()
    for secret in (str(persona.uuid), persona.name, owner.username, owner.email):
        assert not secret or secret not in text


def test_an_index_is_never_given_to_another_generation(persona: Persona, owner: Any) -> None:
    """VX-TRUST-7: one entry per generation (the database refuses a second), an entry is never
    re-pointed, and a purged persona's revoked indexes stay set and are never handed out
    again."""
    generation = Generation.objects.get(persona=persona)
    entry = StatusListEntry.objects.get(generation=generation)
    with pytest.raises(IntegrityError), transaction.atomic():
        StatusListEntry.objects.create(generation=generation)
    other = make_persona(make_agent(owner))
    with pytest.raises(GenerationFrozen):
        StatusListEntry.objects.filter(pk=entry.pk).update(generation=other.generations.get())
    with pytest.raises(GenerationFrozen):
        entry.save()
    revoke(persona)
    with run_on_commit():
        persona_purge(persona=persona, actor=moderator())
    kept = StatusListEntry.objects.get(pk=entry.pk)
    assert kept.generation_id is None and kept.revoked_at is not None
    assert bit(bits(served_list()), entry.index) == 1
    newest = make_persona(make_agent(owner))
    assert index_of(newest) > max(entry.index, index_of(other))


@pytest.mark.parametrize("deletion", ["the persona", "its agent", "through the API"])
def test_deleting_a_persona_revokes_it_first(owner: Any, deletion: str) -> None:
    """VX-TRUST-9: a peer holding the signed card of a deleted persona must learn it is gone:
    each of its generations' bits is set in the list, its card URL answers 410 with its
    tombstone (not 404), and its one audit event says it was revoked on the way out."""
    persona = make_persona(make_agent(owner), discoverable=True)
    update_persona(persona, description="a second generation")
    indexes = [index_of(persona, 1), index_of(persona, 2)]
    path = persona.card_path
    with run_on_commit():
        if deletion == "the persona":
            persona_delete(persona=persona, actor=owner)
        elif deletion == "its agent":
            agent_delete(agent=persona.agent, actor=owner)
        else:
            client = APIClient()
            client.force_authenticate(owner)
            assert client.delete(f"/api/personas/{persona.uuid}/").status_code == 204
    listed = bits(served_list())
    assert [bit(listed, index) for index in indexes] == [1, 1]
    gone = Client().get(path)
    assert gone.status_code == 410
    assert (gone.json()["scope"], gone.json()["reason"]) == ("persona", "retired")
    [deleted] = AuditEvent.objects.filter(kind=AuditEvent.Kind.PERSONA_DELETED)
    assert deleted.data["revoked_generations"] == [1, 2]
    assert audit.describe(deleted.kind, deleted.data).endswith(
        "revoked first: its card answers with its tombstone"
    )
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.REVOKED).exists()


def test_a_missing_version_row_is_made_by_the_first_change_and_moves_by_one() -> None:
    """VX-TRUST-7: where the version row is gone (the tables emptied after migrating, as a
    flush does), the state reads version 0 (and highest index 0, none given out), the first
    change makes the row at 1, and every later change moves it by one: a process holding the
    list of version 0 renders again."""
    StatusListVersion.objects.all().delete()
    assert not StatusListEntry.objects.exists()
    assert list_state() == (0, 0)  # no version yet, and no index given out
    status_list_changed()
    assert list(StatusListVersion.objects.values_list("pk", "version")) == [(1, 1)]
    status_list_changed()
    assert list_state().version == 2


def test_a_version_row_another_process_makes_meanwhile_is_moved_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """VX-TRUST-7: a change that finds no row but loses the race to make it (another
    transaction made it between the two statements) still moves the version past the other's,
    so the two changes are two versions and no process keeps the first list under the second."""
    StatusListVersion.objects.all().delete()
    make = StatusListVersion.objects.get_or_create

    def made_meanwhile(**kwargs: Any) -> tuple[StatusListVersion, bool]:
        StatusListVersion.objects.create(pk=1, version=7)  # the other transaction's change
        return make(**kwargs)

    monkeypatch.setattr(StatusListVersion.objects, "get_or_create", made_meanwhile)
    status_list_changed()
    assert list_state().version == 8


def test_the_cards_status_extension_is_the_w3c_entry_and_says_how_to_read_it(
    persona: Persona,
) -> None:
    """VX-TRUST-7: the card's status extension carries a BitstringStatusListEntry spelled as W3C
    Bitstring Status List v1.0 spells it (the member names and type a peer's verifier looks
    up, the index as a string of digits), is not required of a client, and its description
    tells a peer, in the entry's own member names, where to look and what a set bit means."""
    index = index_of(persona)
    url = f"{settings.VIRGO_PUBLIC_BASE_URL}/.well-known/status/revocation"
    card = json.loads(Client().get(persona.card_path).content)
    [extension] = [
        extension
        for extension in card["capabilities"]["extensions"]
        if extension["uri"] == "https://virgo.dev/a2a/extensions/revocation-status/v1"
    ]
    assert extension == {
        "uri": "https://virgo.dev/a2a/extensions/revocation-status/v1",
        "description": (
            "Where to check whether this card is revoked: fetch statusListCredential (a W3C "
            "Bitstring Status List, signed by the keys of this installation's JWKS) and read "
            "the bit at statusListIndex; set means revoked, and the card's URL answers a "
            "tombstone. One fetch answers for every card of this installation."
        ),
        "required": False,
        "params": {
            "id": f"{url}#{index}",
            "type": "BitstringStatusListEntry",
            "statusPurpose": "revocation",
            "statusListIndex": str(index),
            "statusListCredential": url,
        },
    }


def test_the_list_names_the_installation_as_its_issuer(persona: Persona) -> None:
    """VX-TRUST-7: the list's issuer is this installation, by its public base URL (the
    origin a peer fetched the card and the JWKS from), in the W3C credentials v2 context."""
    document = served_list()
    assert document["issuer"] == f"{settings.VIRGO_PUBLIC_BASE_URL}/"
    assert document["@context"] == ["https://www.w3.org/ns/credentials/v2"]
    assert document["credentialSubject"]["id"] == f"{status_list_url()}#list"


def test_the_list_is_one_block_until_an_index_needs_the_next(persona: Persona) -> None:
    """VX-TRUST-7: the list is the W3C minimum, 131,072 bits and no more, while every index given
    out is below it; an index at 131,072 makes it one whole block longer, with that index's bit
    readable there."""
    assert len(bits(served_list())) * 8 == MIN_BITS
    # Entries whose generations are gone (a purged persona's keep their indexes), at the last
    # index of the first block and then the first of the second.
    StatusListEntry.objects.create(index=MIN_BITS - 1)
    assert len(bits(served_list())) * 8 == MIN_BITS
    StatusListEntry.objects.create(index=MIN_BITS, revoked_at=timezone.now())
    bitstring = bits(served_list())
    assert len(bitstring) * 8 == 2 * MIN_BITS
    assert set_bits(bitstring) == [MIN_BITS]


def test_a_revoked_index_on_a_byte_boundary_sets_its_bit_alone(persona: Persona) -> None:
    """VX-TRUST-7: an index that is a multiple of 8 is the left-most bit of its byte (W3C: index
    0 is the left-most bit of the first byte); revoking it sets that bit and no other bit of the
    byte."""
    for number in range(2, 10):
        if index_of(persona) % 8 == 0:
            break
        persona = update_persona(persona, description=f"Generation {number}.")
    index = index_of(persona)
    assert index % 8 == 0
    revoke(persona, generation=persona.generation)
    assert set_bits(bits(served_list())) == [index]


def test_the_lists_etag_has_the_form_of_every_etag_virgo_serves(persona: Persona) -> None:
    """VX-TRUST-7: the list's ETag is a strong validator of the same form as the card's and the
    JWKS's: the first 128 bits of a SHA-256 in hex, quoted."""
    form = re.compile(r'"[0-9a-f]{32}"')
    for response in (
        Client().get(persona.card_path),
        Client().get("/.well-known/jwks.json"),
        fetch(),
    ):
        assert response.status_code == 200
        assert form.fullmatch(response["ETag"]), response["ETag"]


def test_the_revoked_indexes_are_read_without_a_deprecated_call(persona: Persona) -> None:
    """VX-TRUST-7: the revoked indexes the list is rendered from are read, in index order, with no
    warning: nothing the list is rendered from is on its way out of Django, which would then
    refuse it and the list would answer 500."""
    revoke(persona)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert revoked_indexes() == [index_of(persona)]


class _RenderedMeanwhile:
    """The render lock, as a thread finds it that waited for another thread's render: on
    entry, the list that other thread rendered and kept is already there."""

    def __init__(self, kept: Any) -> None:
        self.kept = kept
        self.entered = 0

    def __enter__(self) -> None:
        self.entered += 1
        status_list_module._held = self.kept

    def __exit__(self, *exc: object) -> None:
        return None


def test_a_current_list_is_served_without_the_render_lock_and_rendered_once(
    persona: Persona, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-TRUST-7: a list kept for the state and validity period of now is served without
    taking the render lock (requests never queue behind a render they do not need), and a
    request that waited for another's render serves that list instead of signing again."""
    status_list_module._forget()
    state = list_state()
    validity = status_list_module.validity_at(time.time())
    rendered_by_the_other = status_list_module._render(state, validity)
    renders: list[object] = []
    real_render = status_list_module._render
    monkeypatch.setattr(
        status_list_module, "_render", lambda *args: renders.append(args) or real_render(*args)
    )
    waited = _RenderedMeanwhile(rendered_by_the_other)
    monkeypatch.setattr(status_list_module, "_rendering", waited)
    assert status_list_module.current_list() is rendered_by_the_other
    assert (waited.entered, renders) == (1, [])
    assert status_list_module.current_list() is rendered_by_the_other
    assert waited.entered == 1, "a request took the render lock for a list already kept"
