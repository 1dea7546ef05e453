"""Signed cards (A2A v1.0 §8.4) and the JWKS that verifies them, read as a peer reads them.

Every check goes through the a2a-sdk's own verifier (a2a.utils.signing.create_signature_verifier)
with a key provider that knows only the JWKS Virgo serves: what a peer that pinned Virgo's origin
does.
"""

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from a2a.utils.signing import InvalidSignaturesError
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from django.core.cache import cache
from django.db import connection
from django.test import Client

from cards import keys, sealing, signing
from cards.keys import Signer
from cards.models import PublishedCard, SigningKey
from cards.publishing import card_etag, unsigned_card
from tests.factories import make_agent, make_owner, make_persona, run_on_commit
from tests.signing_support import (
    JWKS,
    peer_verifier,
    protected_header,
    served_card,
    served_jwks,
)
from virgo import kek

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def owner() -> Any:
    return make_owner()


def test_every_public_card_carries_a_jws_whose_kid_is_in_virgos_jwks(owner: Any) -> None:
    """VX-TRUST-1: the card carries `signatures` [{protected, signature}] (detached payload);
    the protected header names alg ES256, a kid of the served JWKS, typ JOSE and the JWKS URL on
    Virgo's public origin; the payload is the RFC 8785 form of the card without signatures, as
    the A2A data model holds it; the ETag covers the signature."""
    persona = make_persona(make_agent(owner), discoverable=True)
    response = Client().get(persona.card_path)
    card = json.loads(response.content)
    [signature] = card["signatures"]
    assert set(signature) == {"protected", "signature"}
    header = protected_header(signature)
    assert header == {
        "alg": "ES256",
        "kid": header["kid"],
        "typ": "JOSE",
        "jku": "http://127.0.0.1:8000/.well-known/jwks.json",
    }
    assert header["kid"] in [jwk["kid"] for jwk in served_jwks()["keys"]]
    assert response["ETag"] == card_etag(response.content)
    stored = PublishedCard.objects.get(persona=persona)
    assert bytes(stored.payload) == signing.card_payload(unsigned_card(response.content))
    assert stored.signed_by == header["kid"]


@pytest.mark.parametrize(
    "name, description",
    [
        ("Рецензент кода", "Проверяет запросы на слияние."),
        ("コードレビュー担当", "プルリクエストを確認します。"),
        ("مراجع الشيفرة", "يراجع طلبات الدمج."),
        ("कोड समीक्षक", "पुल अनुरोधों की समीक्षा करता है।"),
        ("Reviewer 🦊✨", "Reviews 🧪 with care, ü and ß and \U0001d518\U0001d52b."),
        ('Quote " and \\ backslash', "Tab\tand\nnewline \u2028 and \u0007"),
    ],
)
def test_the_a2a_sdk_verifier_accepts_cards_in_any_script(
    owner: Any, name: str, description: str
) -> None:
    """VX-TRUST-2: a2a-python's verifier, against the served JWKS, accepts cards whose name and
    description are in non-Latin scripts, emoji, astral characters and JSON escapes (A2A #2122)."""
    persona = make_persona(make_agent(owner), discoverable=True, name=name, description=description)
    body = served_card(persona)
    card = json.loads(body)
    assert card["name"] == name
    # Served as written, in UTF-8: only what JSON must escape is escaped.
    assert json.dumps(name, ensure_ascii=False).encode() in body
    peer_verifier(served_jwks())(card)


def test_empty_fields_are_signed_as_the_sdk_canonicalises_them(owner: Any) -> None:
    """VX-TRUST-2: a2a-python drops empty strings and lists before canonicalising: a card with
    an empty description, an empty skill description and no tags still verifies."""
    persona = make_persona(make_agent(owner), discoverable=True)
    card = unsigned_card(served_card(persona))
    card["description"] = ""
    card["skills"][0]["description"] = ""
    card["skills"][0]["tags"] = []
    body, _ = signing.signed_card_body(card, keys.signers())
    peer_verifier(served_jwks())(json.loads(body))


def test_a_card_signed_again_is_signed_without_the_signatures_it_carried(owner: Any) -> None:
    """VX-TRUST-2, VX-TRUST-3: the payload never covers a card's own `signatures`: a card handed
    to signing with the signatures it carried, wherever they stood, is signed and served exactly
    as the card without them."""
    persona = make_persona(make_agent(owner), discoverable=True)
    signed = json.loads(served_card(persona))
    card = unsigned_card(served_card(persona))
    assert signing.card_payload(signed) == signing.card_payload(card)
    signer = ed25519_signer("only")
    body, payload = signing.signed_card_body(signed, [signer])
    assert (body, payload) == signing.signed_card_body(card, [signer])
    assert len(json.loads(body)["signatures"]) == 1
    # Wherever they stood, the new signatures are the body's last member (re-signing cuts there).
    first = {"signatures": signed["signatures"], **card}
    assert signing.signed_card_body(first, [signer])[0] == body


@pytest.mark.parametrize(
    ("value", "signed"),
    [(9007199254740991.0, 9007199254740991), (-9007199254740991.0, -9007199254740991)],
)
def test_an_integral_float_up_to_i_json_s_largest_integer_is_signed_as_that_integer(
    value: float, signed: int
) -> None:
    """VX-TRUST-2: RFC 8785 writes an integral number as an integer up to 2**53 - 1 (I-JSON's
    largest exact integer), the bound included; past it the float is left as it is."""
    assert signing._signed_form({"n": value}) == {"n": signed}
    assert type(signing._signed_form({"n": value})["n"]) is int
    assert type(signing._signed_form({"n": 2.0**53})["n"]) is float


def test_one_changed_byte_fails_verification(owner: Any) -> None:
    """VX-TRUST-2: the served card verifies; the same bytes with one character of the name or a
    skill changed do not."""
    persona = make_persona(make_agent(owner), discoverable=True, name="Reviewer")
    body = served_card(persona)
    verify = peer_verifier(served_jwks())
    verify(json.loads(body))
    for original, altered in ((b'"Reviewer"', b'"Reviewes"'), (b'"todos"', b'"todoz"')):
        changed = body.replace(original, altered, 1)
        assert changed != body
        with pytest.raises(InvalidSignaturesError):
            verify(json.loads(changed))


def ed25519_signer(kid: str) -> Signer:
    """A signer of its own (Ed25519 signs deterministically: the same bytes give the same
    signature, so two ways of signing can be compared byte for byte)."""
    return Signer(SigningKey(kid=kid, algorithm="EdDSA"), ed25519.Ed25519PrivateKey.generate())


def test_a_card_signed_again_is_byte_for_byte_the_card_signed_afresh(owner: Any) -> None:
    """VX-TRUST-3: re-signing a stored card (a key rotation, cards.publishing) keeps every byte
    before its signatures and writes exactly what signing the card afresh with the new set
    writes, not the default set's; a stored body of another shape (pretty-printed, or spaced
    with no signatures member at all) is read and written again, compact."""
    persona = make_persona(make_agent(owner), discoverable=True)
    card = unsigned_card(served_card(persona))
    body, payload = signing.signed_card_body(card, [ed25519_signer("old")])
    rotated = [ed25519_signer("new"), ed25519_signer("retiring")]
    afresh, _ = signing.signed_card_body(card, rotated, payload)
    assert signing.resigned_card_body(body, rotated, payload) == afresh
    pretty = json.dumps(json.loads(body), indent=2, ensure_ascii=False).encode()
    assert signing.resigned_card_body(pretty, rotated, payload) == afresh
    # Ending in a list, as a signed body does, but spaced and holding no signatures member.
    last_a_list = {**{k: v for k, v in card.items() if k != "skills"}, "skills": card["skills"]}
    unsigned = json.dumps(last_a_list, ensure_ascii=False).encode()
    assert unsigned.endswith(b"]}")
    expected, _ = signing.signed_card_body(last_a_list, rotated, payload)
    assert signing.resigned_card_body(unsigned, rotated, payload) == expected


def test_a_signature_by_a_kid_not_in_the_jwks_fails(owner: Any) -> None:
    """VX-TRUST-2: a card signed by a key Virgo does not publish (a forger's, with a kid of its
    own or with Virgo's kid) is refused."""
    persona = make_persona(make_agent(owner), discoverable=True)
    card = unsigned_card(served_card(persona))
    forger = ec.generate_private_key(ec.SECP256R1())
    active = SigningKey.objects.get(state="active")
    verify = peer_verifier(served_jwks())
    for kid in ("forged-kid", active.kid):
        record = SigningKey(kid=kid, algorithm="ES256")
        body, _ = signing.signed_card_body(card, [Signer(record, forger)])
        with pytest.raises(InvalidSignaturesError):
            verify(json.loads(body))


def test_a_revoked_keys_signature_fails_and_the_card_is_signed_again(owner: Any) -> None:
    """VX-TRUST-2, VX-TRUST-3: once its key is revoked, a card as it was served before fails
    against the JWKS served now; the card served now verifies (re-signed by the new key)."""
    persona = make_persona(make_agent(owner), discoverable=True)
    before = served_card(persona)
    old = SigningKey.objects.get(state="active")
    with run_on_commit():
        keys.revoke(old.kid)
    jwks = served_jwks()
    assert old.kid not in [jwk["kid"] for jwk in jwks["keys"]]
    verify = peer_verifier(jwks)
    with pytest.raises(InvalidSignaturesError):
        verify(json.loads(before))
    after = served_card(persona)
    verify(json.loads(after))
    assert old.kid not in [protected_header(s)["kid"] for s in json.loads(after)["signatures"]]


def test_ed25519_by_setting(owner: Any, settings: Any) -> None:
    """VX-TRUST-1: VIRGO_SIGNING_ALGORITHM=EdDSA makes Ed25519 keys; the SDK verifies with EdDSA."""
    settings.VIRGO_SIGNING_ALGORITHM = "EdDSA"
    persona = make_persona(make_agent(owner), discoverable=True, name="Ed 🦆")
    card = json.loads(served_card(persona))
    assert protected_header(card["signatures"][0])["alg"] == "EdDSA"
    [jwk] = served_jwks()["keys"]
    assert (jwk["kty"], jwk["crv"], jwk["alg"]) == ("OKP", "Ed25519", "EdDSA")
    peer_verifier({"keys": [jwk]})(card)


def test_the_fast_path_serves_the_signed_bytes_stored_at_publication(owner: Any) -> None:
    """VX-TRUST-1: cards are signed once, at publication: repeated requests answer the same
    signed bytes and ETag (ES256 signatures differ at every signing, so a per-request signer
    would not)."""
    persona = make_persona(make_agent(owner), discoverable=True)
    first = Client().get(persona.card_path)
    second = Client().get(persona.card_path)
    assert first.content == second.content == bytes(PublishedCard.objects.get(pk=persona.pk).body)
    assert first["ETag"] == second["ETag"]


# The JWKS endpoint --------------------------------------------------------------------------------


def test_the_jwks_is_public_cacheable_and_holds_no_private_part(owner: Any) -> None:
    """VX-TRUST-1: anonymous GET, a public Cache-Control, an ETag that revalidates with 304,
    HEAD without a body; only public members (no `d`)."""
    make_persona(make_agent(owner), discoverable=True)
    response = Client().get(JWKS)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Cache-Control"] == "public, max-age=300"
    [jwk] = json.loads(response.content)["keys"]
    assert set(jwk) == {"kty", "crv", "x", "y", "kid", "alg", "use"}
    again = Client().get(JWKS, headers={"If-None-Match": response["ETag"]})
    assert again.status_code == 304
    head = Client().head(JWKS)
    assert head.status_code == 200 and head.content == b""
    assert Client().post(JWKS).status_code == 405


def test_the_jwks_has_every_security_header_the_card_has(owner: Any) -> None:
    """VX-TRUST-1: the JWKS response carries the card response's security headers, same values."""
    persona = make_persona(make_agent(owner), discoverable=True)
    card = Client().get(persona.card_path)
    jwks = Client().get(JWKS)
    for name in (
        "Content-Security-Policy",
        "X-Frame-Options",
        "X-Content-Type-Options",
        "Referrer-Policy",
        "Cross-Origin-Opener-Policy",
    ):
        assert jwks[name] == card[name], name


def test_the_jwks_is_rate_limited_with_the_cards(owner: Any, settings: Any) -> None:
    """VX-TRUST-1: JWKS requests count against the card's per-address limit: past it, 429."""
    settings.VIRGO_CARD_RATE_LIMIT = "3/m"
    persona = make_persona(make_agent(owner), discoverable=True)
    assert Client().get(persona.card_path).status_code == 200
    assert Client().get(JWKS).status_code == 200
    assert Client().get(JWKS).status_code == 200
    limited = Client().get(JWKS)
    assert limited.status_code == 429
    assert int(limited["Retry-After"]) >= 1
    assert Client().get(persona.card_path).status_code == 429


# Private keys -----------------------------------------------------------------------------------


def test_private_keys_are_sealed_in_the_database_and_no_file_is_written(
    owner: Any, virgo_home: Path, settings: Any
) -> None:
    """VX-TRUST-1, VX-SCALE-1: the private key lives in its row only sealed (AES-GCM under the
    key-encryption key, the kid bound to it): no file under VIRGO_HOME, no PEM and no private
    scalar in any row; the sealed bytes open with the KEK, not with another, not for another
    kid."""
    make_persona(make_agent(owner), discoverable=True)
    key = SigningKey.objects.get(state="active")
    assert not (virgo_home / "signing-keys").exists()
    assert key.private_key_path == "" and key.private_key_sealed.startswith("v1:")
    private = keys.open_private(key)
    secret = private.private_numbers().private_value  # type: ignore[union-attr]
    d = base64.urlsafe_b64encode(secret.to_bytes(32, "big")).rstrip(b"=").decode()
    with connection.cursor() as cursor:
        for table in ("cards_signingkey", "cards_publishedcard"):
            cursor.execute(f"SELECT * FROM {table}")
            dumped = repr(cursor.fetchall())
            assert "PRIVATE KEY" not in dumped and d not in dumped
            assert secret.to_bytes(32, "big").hex() not in dumped
    der = sealing.unseal(key.kid, key.private_key_sealed)
    assert serialization.load_der_private_key(der, None).private_numbers() == (  # type: ignore[union-attr]
        private.private_numbers()  # type: ignore[union-attr]
    )
    with pytest.raises(sealing.KeyCannotBeOpened, match="does not open with key-encryption key"):
        sealing.unseal("another-kid", key.private_key_sealed)
    settings.VIRGO_KEY_ENCRYPTION_KEYS = [kek.generate()]
    with pytest.raises(sealing.KeyCannotBeOpened, match="which this process is not given"):
        sealing.unseal(key.kid, key.private_key_sealed)


def test_a_key_file_from_before_sealing_others_can_read_is_refused(
    owner: Any, tmp_path: Path
) -> None:
    """VX-TRUST-1: a key still only in a file (made before keys were sealed, its file not
    sealed yet) is not used when the file has group or other access; the error names the file
    and its mode, never its contents."""
    private = ec.generate_private_key(ec.SECP256R1())
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    path = tmp_path / "old.pem"
    path.write_text(pem)
    os.chmod(path, 0o640)
    key = keys.ensure_active_key()
    SigningKey.objects.filter(pk=key.pk).update(private_key_sealed="", private_key_path=str(path))
    with pytest.raises(keys.CannotSign) as refused:
        keys.signers()
    message = str(refused.value)
    assert str(path) in message and "mode 640" in message and "virgo keys rewrap" in message
    assert "PRIVATE KEY" not in message and pem.splitlines()[1] not in message
