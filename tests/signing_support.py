"""Signed cards read as a peer reads them, and signing keys as an operator keeps them.

A peer's check goes through the a2a-sdk's own verifier with a key provider that knows only the
JWKS Virgo serves; a key file is written as an operator writes one, and a "new process" is one
that has opened no key yet (cards.keys._opened emptied).
"""

import base64
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from a2a.client.card_resolver import parse_agent_card
from a2a.utils.signing import create_signature_verifier
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.test import Client
from jwt import PyJWK
from jwt.exceptions import PyJWKError

from cards import keys
from personas.models import Persona

JWKS = "/.well-known/jwks.json"


def served_jwks() -> dict[str, Any]:
    response = Client().get(JWKS)
    assert response.status_code == 200, response.content
    return json.loads(response.content)


def peer_verifier(jwks: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    """The a2a-sdk's verifier, its keys from `jwks` alone; an unknown kid is a PyJWT error, so
    the SDK goes on to the card's next signature."""
    known = {jwk["kid"]: PyJWK(jwk) for jwk in jwks["keys"]}

    def key_provider(kid: str | None, jku: str | None) -> PyJWK:
        if kid not in known:
            raise PyJWKError(f"kid {kid!r} is not in the pinned JWKS")
        return known[kid]

    verifier = create_signature_verifier(key_provider, ["ES256", "EdDSA"])
    return lambda card: verifier(parse_agent_card(card))


def served_card(persona: Persona) -> bytes:
    response = Client().get(persona.card_path)
    assert response.status_code == 200, response.content
    return response.content


def protected_header(signature: dict[str, str]) -> dict[str, Any]:
    encoded = signature["protected"]
    return json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))


@pytest.fixture(autouse=True)
def new_process() -> Iterator[None]:
    keys._opened.clear()
    yield
    keys._opened.clear()


def key_file(path: Path, private: keys.PrivateKey | None = None) -> keys.PrivateKey:
    """A key written as an operator would (PKCS#8 PEM, mode 0600): `private`, or a new P-256."""
    private = private or ec.generate_private_key(ec.SECP256R1())
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    os.chmod(path, 0o600)
    return private
