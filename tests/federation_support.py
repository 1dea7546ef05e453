"""A peer ARD registry on loopback for the federation tests (VX-DISC-5): a real HTTP server
that answers search, serves signed A2A cards, its JWKS and a signed revocation status list, and
can be told to lie, stall or break in each way a peer can.

Its cards are signed with the a2a-sdk's own signer and its status list as Virgo signs its own
(a detached JWS over the RFC 8785 form), with a P-256 key of its own: nothing of Virgo's signs
for it, so what the registry under test accepts it accepted by verifying.
"""

import base64
import gzip
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
import rfc8785
from a2a.client.card_resolver import parse_agent_card
from a2a.utils.signing import create_agent_card_signer
from cryptography.hazmat.primitives.asymmetric import ec
from google.protobuf.json_format import MessageToDict

from cards.ard.entries import ENTRY_TYPE, PINNED_GRANT
from cards.rendering import IDENTITY_EXTENSION, PINNED_GRANT_EXTENSION
from cards.status_list import STATUS_EXTENSION
from tests.loopback_http import LoopbackServer, QuietHandler

STATUS_PATH = "/.well-known/status/revocation"
LIST_BITS = 131_072


def _jws_parts(payload: bytes, key: Any, kid: str, algorithm: str = "ES256") -> dict[str, str]:
    token = jwt.api_jws.encode(payload, key, algorithm=algorithm, headers={"kid": kid})
    protected, _, signature = token.split(".")
    return {"protected": protected, "signature": signature}


@dataclass
class PeerCard:
    """One persona the peer lists: what its entry and its card say."""

    name: str
    index: int
    publisher: str = ""
    persona_uuid: str = field(default_factory=lambda: str(uuid.uuid4()))
    grant_digest: str = "a1" * 32
    organization: str = ""


class FakePeer(LoopbackServer):
    """Serves /api/ard/search, /cards/<uuid>.json, /.well-known/jwks.json and the status list.

    Attributes a test changes to make it misbehave: `revoked` (indexes), `valid_for` (the
    list's validity around now, negative for a stale list), `delay` (seconds before a search
    answers), `search_status`, `search_body` (raw bytes instead of the results), `entry_edits`
    (a function changing each entry as served), `card_edits` (the same for each card, after
    signing), `card_fields` (the same before signing, so the card still verifies),
    `status_edits` (the status list before signing), `list_bits` (the list's length in bits),
    `host` (the name its URLs use for 127.0.0.1), `shared_secret` (published in the JWKS as
    an HS256 key, which then signs the status list in place of the peer's EC key),
    `card_secret` (the same for the cards: published in the JWKS, it signs each card) and
    `jwks_edits` (a function changing the JWKS as served; it may return what is not a JSON
    object).
    """

    def __init__(self) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.kid = "peer-" + uuid.uuid4().hex[:8]
        self.cards: list[PeerCard] = []
        self.revoked: set[int] = set()
        self.valid_for = timedelta(hours=1)
        self.delay = 0.0
        self.search_status = 200
        self.search_body: bytes | None = None
        self.entry_edits: Callable[[dict[str, Any]], dict[str, Any]] = lambda entry: entry
        self.card_edits: Callable[[dict[str, Any]], dict[str, Any]] = lambda card: card
        self.card_fields: Callable[[dict[str, Any]], dict[str, Any]] = lambda card: card
        self.status_edits: Callable[[dict[str, Any]], dict[str, Any]] = lambda status: status
        self.list_bits = LIST_BITS
        self.host = "127.0.0.1"
        self.shared_secret: bytes | None = None
        self.card_secret: bytes | None = None
        self.jwks_edits: Callable[[dict[str, Any]], Any] = lambda jwks: jwks
        self.searches: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.requested: list[str] = []
        self.fetch_headers: list[dict[str, str]] = []
        served = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                served.searches.append((dict(self.headers), body))
                if self.path != "/api/ard/search":
                    return self.send(404, b"{}")
                time.sleep(served.delay)
                answer = served.search_body
                if answer is None:
                    answer = json.dumps({"results": served.entries()}).encode()
                self.send(served.search_status, answer)

            def do_GET(self) -> None:
                served.requested.append(self.path)
                served.fetch_headers.append(dict(self.headers))
                if self.path == "/.well-known/jwks.json":
                    return self.send(200, json.dumps(served.jwks_edits(served.jwks())).encode())
                if self.path == STATUS_PATH:
                    return self.send(200, json.dumps(served.status_list()).encode())
                for card in served.cards:
                    if self.path == f"/cards/{card.persona_uuid}.json":
                        return self.send(200, json.dumps(served.card(card)).encode())
                self.send(404, b"{}")

        super().__init__(Handler)

    @property
    def origin(self) -> str:
        return f"http://{self.host}:{self.server.server_address[1]}"

    @property
    def registry(self) -> str:
        return f"{self.origin}/api/ard/"

    def add(self, name: str, **fields: Any) -> PeerCard:
        fields.setdefault("publisher", "127.0.0.1")
        card = PeerCard(name=name, index=len(self.cards) + 7, **fields)
        self.cards.append(card)
        return card

    def card_url(self, card: PeerCard) -> str:
        return f"{self.origin}/cards/{card.persona_uuid}.json"

    def entry(self, card: PeerCard) -> dict[str, Any]:
        urn = f"urn:air:{card.publisher}:virgo-persona:{card.persona_uuid}"
        return {
            "identifier": urn,
            "displayName": card.name,
            "type": ENTRY_TYPE,
            "url": self.card_url(card),
            "score": 50,
            "source": self.registry,
            "trustManifest": {
                "identity": urn,
                "identityType": "other",
                "attestations": [
                    {
                        "type": PINNED_GRANT,
                        "uri": self.card_url(card),
                        "mediaType": ENTRY_TYPE,
                        "digest": card.grant_digest,
                    }
                ],
            },
        }

    def entries(self) -> list[dict[str, Any]]:
        return [self.entry_edits(self.entry(card)) for card in self.cards]

    def jwks(self) -> dict[str, Any]:
        public = jwt.algorithms.ECAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        keys = [{**public, "kid": self.kid, "alg": "ES256", "use": "sig"}]
        for kid, shared in (("shared", self.shared_secret), ("card-shared", self.card_secret)):
            if shared is not None:
                secret = base64.urlsafe_b64encode(shared).decode().rstrip("=")
                keys.append({"kty": "oct", "k": secret, "kid": kid, "alg": "HS256"})
        return {"keys": keys}

    def card(self, card: PeerCard) -> dict[str, Any]:
        identity: dict[str, Any] = {"provider": "installation"}
        if card.organization:
            identity = {
                "provider": "organization",
                "organization": {"domain": card.organization, "verification": "dns-txt"},
            }
        document = {
            "name": card.name,
            "description": f"{card.name}, a persona of the peer",
            "version": "1",
            "supportedInterfaces": [
                {
                    "url": f"{self.origin}/a2a/{card.persona_uuid}",
                    "protocolBinding": "JSONRPC",
                    "protocolVersion": "1.0",
                }
            ],
            "capabilities": {
                "extensions": [
                    {"uri": PINNED_GRANT_EXTENSION, "params": {"grantDigest": card.grant_digest}},
                    {"uri": IDENTITY_EXTENSION, "params": identity},
                    {
                        "uri": STATUS_EXTENSION,
                        "params": {
                            "statusListCredential": self.origin + STATUS_PATH,
                            "statusListIndex": str(card.index),
                            "statusPurpose": "revocation",
                        },
                    },
                ]
            },
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [
                {"id": "review", "name": "Review", "description": "Reviews.", "tags": ["code"]}
            ],
        }
        header = {"kid": self.kid, "alg": "ES256", "typ": "JOSE"}
        key: Any = self.key
        if self.card_secret is not None:
            header, key = {"kid": "card-shared", "alg": "HS256", "typ": "JOSE"}, self.card_secret
        signer = create_agent_card_signer(key, header)
        signed = MessageToDict(signer(parse_agent_card(self.card_fields(document))))
        return self.card_edits(signed)

    def status_list(self) -> dict[str, Any]:
        bits = bytearray(self.list_bits // 8)
        for index in self.revoked:
            bits[index // 8] |= 0x80 >> (index % 8)
        encoded = base64.urlsafe_b64encode(gzip.compress(bytes(bits), mtime=0))
        now = datetime.now(UTC)
        start, end = sorted((now - timedelta(minutes=5), now + self.valid_for))
        if self.valid_for < timedelta(0):
            start, end = now - timedelta(days=2), now + self.valid_for
        document = {
            "id": self.origin + STATUS_PATH,
            "type": ["VerifiableCredential", "BitstringStatusListCredential"],
            "validFrom": start.isoformat(timespec="seconds"),
            "validUntil": end.isoformat(timespec="seconds"),
            "credentialSubject": {
                "type": "BitstringStatusList",
                "statusPurpose": "revocation",
                "encodedList": "u" + encoded.decode().rstrip("="),
            },
        }
        document = self.status_edits(document)
        payload = rfc8785.dumps(document)
        if self.shared_secret is not None:
            signature = _jws_parts(payload, self.shared_secret, "shared", "HS256")
        else:
            signature = _jws_parts(payload, self.key, self.kid)
        return {**document, "signatures": [signature]}


def extension_edit(
    uri: str, change: Callable[[dict[str, Any]], dict[str, Any] | None]
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A `card_fields` hook: the card's extension `uri` with the params `change` makes of its
    own (returning None: the card lists no such extension)."""

    def fields(document: dict[str, Any]) -> dict[str, Any]:
        listed = []
        for extension in document["capabilities"]["extensions"]:
            if extension["uri"] != uri:
                listed.append(extension)
            elif (params := change(dict(extension["params"]))) is not None:
                listed.append({**extension, "params": params})
        document["capabilities"]["extensions"] = listed
        return document

    return fields


def multibase(compressed: bytes) -> str:
    """`compressed` as a status list's encodedList: multibase base64url, unpadded."""
    return "u" + base64.urlsafe_b64encode(compressed).decode().rstrip("=")
