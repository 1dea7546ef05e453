"""What the card URL of a revoked persona or generation answers: 410 Gone and a tombstone.

The tombstone is small and names no tool: which persona, which generation when only one was
revoked, when, and the reason code (the words written beside it stay in the audit event). It is
one plain JSON object built by `tombstone_document` and signed by the keys that sign cards
(cards.signing.sign_document: a JWS over its RFC 8785 form without `signatures`, verified
against the same JWKS) before `tombstone_bytes` serialises it. It depends only on what the
revocation stored, so every web process, and every request, answers the same document.
"""

import json
from datetime import UTC, datetime
from typing import Any

from django.conf import settings

TOMBSTONE_TYPE = "https://virgo.dev/a2a/tombstone/v1"


def tombstone_document(
    *, persona_id: str, revoked_at: datetime, reason_code: str, generation: int | None
) -> dict[str, Any]:
    """The tombstone of a revoked persona (`generation` None) or of one of its generations."""
    document: dict[str, Any] = {
        "type": TOMBSTONE_TYPE,
        "persona": persona_id,
        "card": f"{settings.VIRGO_PUBLIC_BASE_URL}/a/{persona_id}/.well-known/agent-card.json",
        "scope": "persona" if generation is None else "generation",
        "revokedAt": revoked_at.astimezone(UTC)
        .isoformat(timespec="seconds")
        .replace("+00:00", "Z"),
        "reason": reason_code,
    }
    if generation is not None:
        document["generation"] = generation
    return document


def tombstone_bytes(document: dict[str, Any]) -> bytes:
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()
