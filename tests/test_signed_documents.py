"""Documents Virgo signs beside cards (a revoked persona's tombstone), read as a peer reads them.

`sign_document` and `verify_document` (cards.signing) sign and check with the card keys; the
tombstone (cards.tombstones) is what a revoked persona's card URL answers. These pin what a peer
relies on: any signature of the set may be the one that verifies, a document signed again is
signed over its content alone, a refusal says why, and the tombstone tells time in UTC whatever
the machine's zone.
"""

import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import pytest
from jwt.utils import base64url_decode, base64url_encode

from cards.signing import BadSignature, sign_document, verify_document
from cards.tombstones import TOMBSTONE_TYPE, tombstone_bytes, tombstone_document

pytestmark = pytest.mark.django_db

DOCUMENT = {"type": TOMBSTONE_TYPE, "persona": "p-1", "reason": "retired"}


def test_a_document_signed_again_is_signed_over_its_content_alone() -> None:
    """VX-TRUST-5: signing a signed document replaces its signatures; the old ones are not part
    of what the new ones cover, so it verifies."""
    once = sign_document(DOCUMENT)
    twice = sign_document(once)
    assert len(twice["signatures"]) == len(once["signatures"])
    assert verify_document(twice)


def test_any_signature_of_the_document_may_be_the_one_that_verifies() -> None:
    """VX-TRUST-5: a peer tries every signature: one it cannot check (an unknown kid, a broken
    header) before a good one does not make the document fail."""
    signed = sign_document(DOCUMENT)
    good = signed["signatures"][0]
    header = base64url_encode(json.dumps({"alg": "ES256", "kid": "not-ours"}).encode()).decode()
    unknown_kid = {"protected": header, "signature": "AA"}
    broken = {"protected": "not base64 json", "signature": good["signature"]}
    document = {**signed, "signatures": [unknown_kid, broken, good]}
    assert verify_document(document) == json.loads(base64url_decode(good["protected"]))["kid"]


def test_a_document_no_signature_verifies_says_so() -> None:
    """VX-TRUST-5: the refusal names what failed, for the peer's log."""
    signed = sign_document(DOCUMENT)
    with pytest.raises(
        BadSignature, match=r"^no signature verifies against a key in Virgo's JWKS$"
    ):
        verify_document({**signed, "reason": "compromised"})
    with pytest.raises(BadSignature, match="Virgo's JWKS"):
        verify_document(DOCUMENT)
    # Checked with a peer's keys, the refusal does not blame Virgo's.
    with pytest.raises(BadSignature, match=r"a key in the JWKS given$"):
        verify_document(signed, published={})


@pytest.fixture
def machine_zone() -> Iterator[None]:
    """The process's local zone set far from UTC, as an operator's machine may have it."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Tokyo"
    time.tzset()
    yield
    if before is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = before
    time.tzset()


def test_the_tombstone_tells_time_in_utc_whatever_the_zone(machine_zone: None) -> None:
    """VX-TRUST-5: `revokedAt` is UTC with a Z, whatever zone the revocation was stored in or
    the machine runs in."""
    at = datetime(2026, 8, 4, 18, 12, 5, 123456, tzinfo=timezone(timedelta(hours=2)))
    document = tombstone_document(
        persona_id="p-1", revoked_at=at, reason_code="retired", generation=None
    )
    assert document["revokedAt"] == "2026-08-04T16:12:05Z"
    stored_utc = tombstone_document(
        persona_id="p-1", revoked_at=at.astimezone(UTC), reason_code="retired", generation=3
    )
    assert stored_utc["revokedAt"] == "2026-08-04T16:12:05Z"
    assert (stored_utc["scope"], stored_utc["generation"]) == ("generation", 3)


def test_the_tombstone_is_compact_json_in_utf8() -> None:
    """VX-TRUST-5: the tombstone is small: no space between tokens, text as UTF-8."""
    document = {"reason": "retired", "note": "Zoë"}
    assert tombstone_bytes(document) == '{"reason":"retired","note":"Zoë"}'.encode()
