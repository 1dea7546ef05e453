"""What a signing key's record is and what opening it says (cards.keys): the kid is the key's own
RFC 7638 thumbprint, every refusal names the key and why, and the first key says why it was made."""

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from cards import keys, sealing
from cards.models import SigningKey
from personas.models import AuditEvent
from tests.factories import make_agent, make_owner, make_persona, run_on_commit
from tests.signing_support import key_file, new_process  # noqa: F401 (autouse fixture)

pytestmark = pytest.mark.django_db


def thumbprint(jwk: dict[str, Any], members: tuple[str, ...]) -> str:
    """RFC 7638 section 3: the required members, in lexicographic order, without whitespace."""
    required = json.dumps({name: jwk[name] for name in sorted(members)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(hashlib.sha256(required.encode()).digest()).decode().rstrip("=")


@pytest.mark.parametrize(
    ("algorithm", "members"), [("ES256", ("crv", "kty", "x", "y")), ("EdDSA", ("crv", "kty", "x"))]
)
def test_a_kid_is_the_keys_rfc_7638_thumbprint(algorithm: str, members: tuple[str, ...]) -> None:
    """VX-TRUST-1: a kid names exactly one public key: its RFC 7638 SHA-256 thumbprint in
    base64url without padding; the JWK says its algorithm and that it is for signatures. The
    record says Virgo made it (an imported key says it was not)."""
    key = keys.create_key(algorithm=algorithm)
    assert (key.generated, key.private_key_path) == (True, "")
    jwk = key.public_jwk
    assert key.kid == jwk["kid"] == thumbprint(jwk, members)
    assert len(key.kid) == 43 and "=" not in key.kid
    assert (jwk["alg"], jwk["use"]) == (algorithm, "sig")


def test_an_ec_key_on_another_curve_is_refused_naming_the_curve(tmp_path: Path) -> None:
    """VX-TRUST-1: ES256 is P-256: a P-384 key file is refused saying which curve it is on."""
    path = tmp_path / "p384.pem"
    key_file(path, ec.generate_private_key(ec.SECP384R1()))
    with pytest.raises(keys.UnusableKeyFile) as refused:
        keys.create_key(import_from=path)
    assert str(refused.value) == "an EC key on secp384r1; ES256 needs P-256"
    assert not SigningKey.objects.exists()


def test_an_algorithm_virgo_does_not_sign_with_is_refused_naming_both(tmp_path: Path) -> None:
    """VX-TRUST-1: a key is ES256 or EdDSA: any other algorithm asked for is refused, as is an
    imported file whose key is not of the algorithm asked for."""
    with pytest.raises(keys.KeyRefused) as refused:
        keys.create_key(algorithm="RS256")
    assert str(refused.value) == "algorithm 'RS256': use ES256 or EdDSA"
    path = tmp_path / "ec.pem"
    key_file(path)
    with pytest.raises(keys.KeyRefused) as refused:
        keys.create_key(algorithm="EdDSA", import_from=path)
    assert str(refused.value) == f"{path} holds an ES256 key, not EdDSA"
    assert keys.create_key(algorithm="ES256", import_from=path).algorithm == "ES256"


def test_a_key_is_never_imported_twice(tmp_path: Path) -> None:
    """VX-TRUST-3: a kid names one key for ever: the same key file imported again, even after
    its key retired, is refused naming the kid."""
    path = tmp_path / "once.pem"
    key_file(path, ed25519.Ed25519PrivateKey.generate())
    first = keys.create_key(import_from=path)
    with run_on_commit():
        keys.rotate()
        keys.retire(first.kid)
    with pytest.raises(keys.KeyRefused) as refused:
        keys.rotate(import_from=path)
    assert str(refused.value) == f"key {first.kid} is already known (a key is never used twice)"


def unsaved_key(**fields: Any) -> SigningKey:
    return SigningKey(kid="kid-under-test", algorithm="ES256", **fields)


def test_opening_a_key_says_which_and_why_it_cannot(tmp_path: Path) -> None:
    """VX-SCALE-2: a sealed form that holds no key, one that holds a key of another kind, a key
    with no private half, and one made before sealing whose file is not here: each refused
    naming the key, and the last saying what to run where."""
    rsa_der = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.DER,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    said = {
        "kid-under-test: its sealed form holds no key": unsaved_key(
            private_key_sealed=sealing.seal("kid-under-test", b"not a key")
        ),
        "kid-under-test: not a P-256 or an Ed25519 key": unsaved_key(
            private_key_sealed=sealing.seal("kid-under-test", rsa_der)
        ),
        "kid-under-test has no private key (it signs nothing)": unsaved_key(),
    }
    for reason, key in said.items():
        with pytest.raises(keys.CannotSign) as refused:
            keys.open_private(key)
        assert str(refused.value) == f"signing key {reason}"
    missing = tmp_path / "elsewhere.pem"
    with pytest.raises(keys.CannotSign) as refused:
        keys.open_private(unsaved_key(private_key_path=str(missing)))
    message = str(refused.value)
    assert message.startswith("signing key kid-under-test is not sealed in the database and ")
    assert str(missing) in message
    assert message.endswith("; run `virgo keys rewrap` on the machine that has its file")


def test_without_a_key_encryption_key_no_key_is_made(settings: Any) -> None:
    """VX-SCALE-2: the first card of a process with no key-encryption key makes no key it could
    not seal: refused in the sealing's own words, and no row is left."""
    settings.VIRGO_KEY_ENCRYPTION_KEYS = []
    with pytest.raises(keys.CannotSign) as refused:
        keys.ensure_active_key()
    assert str(refused.value) == (
        "no key-encryption key is configured (VIRGO_KEY_ENCRYPTION_KEY): nothing can be sealed"
    )
    assert not SigningKey.objects.exists()


def test_the_first_key_says_the_first_card_needed_it() -> None:
    """VX-AUDIT-1: the key made for the first card is recorded as made, and why, with no actor."""
    with run_on_commit():
        make_persona(make_agent(make_owner()), discoverable=True)
    [event] = AuditEvent.objects.filter(kind=AuditEvent.Kind.KEY_CREATED)
    assert event.data["why"] == "the first card needed one"
    assert event.actor is None


def test_a_signing_set_with_no_active_key_gets_one_before_signing() -> None:
    """VX-TRUST-3: should the signing set hold only a retiring key (its active key lost between
    two writes), the next signature first makes an active key: cards are never signed by a
    retiring key alone."""
    retiring = keys.ensure_active_key()
    SigningKey.objects.filter(pk=retiring.pk).update(state=SigningKey.State.RETIRING)
    signers = keys.signers()
    assert [signer.key.state for signer in signers] == ["active", "retiring"]
    assert signers[1].key.kid == retiring.kid
