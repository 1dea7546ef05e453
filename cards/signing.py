"""A2A v1.0 §8.4 card signatures: a JWS (RFC 7515) per signing key over the card's RFC 8785 form.

The payload is detached, as A2A defines it: `signatures` carries only `protected` and
`signature`, and a verifier recomputes the payload from the card. What it recomputes is the
card as the A2A data model holds it: the JSON parsed into the SDK's AgentCard and written back
(so a default-valued field such as an extension's `"required": false` is absent), without
`signatures`, with empty strings, lists and objects dropped (a2a-python's rule, A2A #2122),
canonicalised by RFC 8785. That is exactly what the a2a-sdk's verifier
(a2a.utils.signing.create_signature_verifier) computes, so it accepts every card Virgo serves,
whatever the script of its text or an empty description. The written-back form is computed
from the SDK's descriptors without building its objects (cards.card_model).

Signing uses PyJWT's algorithms (cryptography underneath); nothing here is hand-made crypto.
The protected header is `{"alg", "kid", "typ": "JOSE", "jku"}`, `jku` being Virgo's own JWKS on
its public origin. Peers must not follow a `jku` they did not choose: they fetch the JWKS from
the origin they pinned (docs/endpoints.md, "Verifying a card").

`sign_document` and `verify_document` sign and check any JSON document the same way, for what
Virgo publishes beside cards (a revoked persona's tombstone).
"""

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

import jwt
from django.conf import settings
from jwt.exceptions import PyJWTError
from jwt.utils import base64url_decode, base64url_encode

from cards import card_model, keys
from cards.keys import Signer
from virgo.canonical import I_JSON_MAX_INT, canonical_bytes

JWKS_PATH = "/.well-known/jwks.json"
_SIGNATURES_MEMBER = b',"signatures":'
ALGORITHMS = ["ES256", "EdDSA"]


class BadSignature(Exception):
    """No signature of a document verifies against a key of the JWKS it was checked with."""


def jwks_url() -> str:
    return settings.VIRGO_PUBLIC_BASE_URL + JWKS_PATH


def signers_marker(signers: Sequence[Signer]) -> str:
    """What PublishedCard.signed_by holds for a card these keys signed."""
    return " ".join(sorted(signer.kid for signer in signers))


def current_marker() -> str:
    """The marker of the signing set now, read without making a key (the reconciler's count)."""
    return " ".join(sorted(key.kid for key in keys.signing_keys()))


def _signed_form(value: Any) -> Any:
    """What a card's signatures cover of a value, in one walk: a2a-python's canonicalisation
    drops empty strings, lists and objects, recursively; and integral floats are integers, as
    RFC 8785 writes 3.0 as 3, so the bytes are the same and without floats canonical_bytes takes
    its fast encoder (an extension's params are a protobuf Struct, whose numbers come back as
    floats)."""
    if isinstance(value, dict):
        kept = {k: v for k, item in value.items() if (v := _signed_form(item)) is not None}
        return kept or None
    if isinstance(value, list):
        items = [v for item in value if (v := _signed_form(item)) is not None]
        return items or None
    if isinstance(value, str):
        return value or None
    if isinstance(value, float) and value.is_integer() and abs(value) <= I_JSON_MAX_INT:
        return int(value)
    return value


def card_payload(card: dict[str, Any]) -> bytes:
    """The bytes a card's signatures cover (see the module docstring), for a card that passed
    cards.rendering.validate_card: the SDK's model of it as cards.card_model computes it."""
    unsigned = {name: value for name, value in card.items() if name != "signatures"}
    return canonical_bytes(_signed_form(card_model.as_model(unsigned)) or {})


@functools.lru_cache(maxsize=64)
def _protected_header(algorithm: str, kid: str, jku: str) -> str:
    header = {"alg": algorithm, "kid": kid, "typ": "JOSE", "jku": jku}
    encoded = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    return base64url_encode(encoded).decode()


def _protected(signer: Signer) -> str:
    return _protected_header(signer.algorithm, signer.kid, jwks_url())


def jws_for(payload: bytes, signers: Sequence[Signer] | None = None) -> list[dict[str, str]]:
    """One detached JWS (`{"protected", "signature"}`) over `payload` per signing key, the
    active key's first; by default the current signing set's (made if there is none)."""
    if signers is None:
        signers = keys.signers()
    encoded = base64url_encode(payload).decode()
    signatures = []
    for signer in signers:
        protected = _protected(signer)
        algorithm = jwt.get_algorithm_by_name(signer.algorithm)
        signature = algorithm.sign(f"{protected}.{encoded}".encode(), signer.private)
        signatures.append(
            {"protected": protected, "signature": base64url_encode(signature).decode()}
        )
    return signatures


def signed_card_body(
    card: dict[str, Any], signers: Sequence[Signer], payload: bytes | None = None
) -> tuple[bytes, bytes]:
    """The bytes a card is served as (the card and its `signatures`, signed once, here), and
    the payload they cover; `payload` is card_payload(card) when the caller has it already."""
    unsigned = {name: value for name, value in card.items() if name != "signatures"}
    if payload is None:
        payload = card_payload(unsigned)
    signed = {**unsigned, "signatures": jws_for(payload, signers)}
    return json.dumps(signed, ensure_ascii=False, separators=(",", ":")).encode(), payload


def resigned_card_body(body: bytes, signers: Sequence[Signer], payload: bytes) -> bytes:
    """`body` (a card as signed_card_body wrote it) with new signatures over `payload`.

    signed_card_body writes `signatures` last, and inside a JSON string a quote is always
    escaped, so the last `,"signatures":` of the bytes is that member: the bytes before it are
    kept as they are, without parsing and re-serialising the card (a rotation re-signs every
    card). Bytes of any other shape are re-serialised.
    """
    cut = body.rfind(_SIGNATURES_MEMBER)
    if cut == -1 or not body.endswith(b"]}"):
        card = json.loads(body)
        return signed_card_body(card, signers, payload)[0]
    signatures = json.dumps(jws_for(payload, signers), separators=(",", ":")).encode()
    return body[:cut] + _SIGNATURES_MEMBER + signatures + b"}"


def sign_document(document: dict[str, Any]) -> dict[str, Any]:
    """`document` with `signatures` over the RFC 8785 form of the rest, by the signing set.

    For documents that are not Agent Cards (no empty-value rule applies): a peer checks them
    with the same JWKS, e.g. by `verify_document`.
    """
    unsigned = {name: value for name, value in document.items() if name != "signatures"}
    return {**unsigned, "signatures": jws_for(canonical_bytes(unsigned))}


def verify_document(
    document: dict[str, Any], published: Mapping[str, dict[str, Any]] | None = None
) -> str:
    """The kid of the first signature of `document` that verifies against `published` (kid ->
    JWK; Virgo's own JWKS unless given: a peer's, for what a federated registry reads), as
    `sign_document` made it; BadSignature when none does."""
    unsigned = {name: value for name, value in document.items() if name != "signatures"}
    payload = base64url_encode(canonical_bytes(unsigned)).decode()
    whose = "the JWKS given"
    if published is None:
        whose = "Virgo's JWKS"
        published = {jwk["kid"]: jwk for jwk in keys.public_jwks()["keys"]}
    for signature in document.get("signatures") or []:
        try:
            header = json.loads(base64url_decode(signature["protected"]))
            jwk = published[header["kid"]]
            token = f"{signature['protected']}.{payload}.{signature['signature']}"
            jwt.api_jws.decode(token, jwt.PyJWK(jwk).key, algorithms=[jwk["alg"]])
        except (PyJWTError, KeyError, TypeError, ValueError):
            continue
        return str(header["kid"])
    raise BadSignature(f"no signature verifies against a key in {whose}")
