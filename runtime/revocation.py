"""What a revocation ends in the runtime (VX-TRUST-5), in the revoking transaction.

The records revoke (personas.services.persona_revoke) and announce it; the runtime refuses every
later call on its own (runtime.stamp.load_active_stamp). What was already waiting is ended here:
the persona's pending confirmations are cancelled, so no authority can approve an operation
for it afterwards and nothing approved runs; and the learned choices keyed to a revoked stamp
are retired, so they never match again, are never carried onto a later stamp and never travel
in a snapshot (only accepted entries do).
"""

from typing import Any

from django.utils import timezone

from personas.models import Persona
from runtime.models import DecisionRecord, PromptRegistryEntry


def persona_revoked(sender: type, persona: Persona, stamp_hashes: list[str], **kwargs: Any) -> None:
    cancel_pending_confirmations(persona)
    retire_learned_choices(persona, stamp_hashes)


def cancel_pending_confirmations(persona: Persona) -> int:
    """Every request of the persona still waiting, whichever stamp asked: once its current
    generation is revoked no stamp of it stands to run the answer."""
    return DecisionRecord.objects.filter(
        requester=persona, decision=DecisionRecord.Decision.PENDING
    ).update(
        decision=DecisionRecord.Decision.CANCELLED,
        decided_via=DecisionRecord.Via.REVOCATION,
        decided_at=timezone.now(),
    )


def retire_learned_choices(persona: Persona, stamp_hashes: list[str]) -> int:
    Review = PromptRegistryEntry.Review
    return (
        PromptRegistryEntry.objects.filter(
            location=PromptRegistryEntry.Location.EXPERIENCE,
            persona=persona,
            stamp_hash__in=stamp_hashes,
        )
        .exclude(review=Review.REVOKED)
        # Unkeyed, as every entry that does not apply is: no digest can match it.
        .update(review=Review.REVOKED, key_digest="")
    )
