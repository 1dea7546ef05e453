"""The revocation status list as a peer reads it (VX-TRUST-7): the list's URL, a revocation by
the owner, the list's signature verified with the served JWKS alone, and a generation's index."""

import base64
import json
from typing import Any

import jwt
import rfc8785
from django.test import Client

from personas.models import Generation, Persona, StatusListEntry
from personas.services import persona_revoke
from tests.factories import run_on_commit

LIST = "/.well-known/status/revocation"


def revoke(persona: Persona, **kwargs: Any) -> Any:
    with run_on_commit():
        return persona_revoke(
            persona=persona,
            actor=persona.agent.owner,
            reason_code="compromised",
            reason="its host was broken into",
            via="test",
            **kwargs,
        )


def verified(document: dict[str, Any]) -> str:
    """The kid of a signature over `document` that verifies with the served JWKS, as a peer
    checks it: PyJWT over the RFC 8785 form of the document without `signatures`."""
    jwks = {
        jwk["kid"]: jwk
        for jwk in json.loads(Client().get("/.well-known/jwks.json").content)["keys"]
    }
    unsigned = {name: value for name, value in document.items() if name != "signatures"}
    payload = base64.urlsafe_b64encode(rfc8785.dumps(unsigned)).rstrip(b"=").decode()
    for signature in document["signatures"]:
        header = json.loads(base64.urlsafe_b64decode(signature["protected"] + "=="))
        jwk = jwks.get(header["kid"])
        if jwk is None:
            continue
        token = f"{signature['protected']}.{payload}.{signature['signature']}"
        jwt.api_jws.decode(token, jwt.PyJWK(jwk).key, algorithms=[jwk["alg"]])
        return str(header["kid"])
    raise AssertionError("no signature verifies against the JWKS")


def index_of(persona: Persona, number: int | None = None) -> int:
    generation = Generation.objects.get(persona=persona, number=number or persona.generation)
    return StatusListEntry.objects.get(generation=generation).index
