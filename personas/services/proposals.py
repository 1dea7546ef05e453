"""The owner's decision on a change held as a GrantProposal.

Approving makes the change through persona_update, exactly as an immediate change would be made;
rejecting changes nothing of the persona. A proposal the persona has moved on from (a later
generation, another next composition) is marked stale and refused.
"""

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone

from personas import audit
from personas.models import AuditEvent, Generation, GrantProposal, Persona
from personas.services.personas import (
    StaleProposal,
    _loaded_changes,
    _locked_persona,
    _prepare_change,
    persona_update,
)
from personas.services.validation import User


def _require_decider(actor: User, proposal: GrantProposal) -> None:
    if not actor.is_authenticated or proposal.persona.agent.owner_id != actor.pk:
        raise PermissionDenied("only the persona's owner may decide its proposals")


def _pending(proposal: GrantProposal, actor: User) -> GrantProposal:
    proposal = (
        GrantProposal.objects.select_for_update(of=("self",))
        .select_related("persona__agent")
        .get(pk=proposal.pk)
    )
    _require_decider(actor, proposal)
    if proposal.status == GrantProposal.Status.STALE:
        raise StaleProposal(
            {"proposal": ["stale: the persona changed after it was proposed; propose again"]}
        )
    if proposal.status != GrantProposal.Status.PENDING:
        raise ValidationError(
            {"proposal": [f"already {proposal.status}: only a pending proposal can be decided"]}
        )
    return proposal


def proposal_next_generation(*, proposal: GrantProposal, actor: User) -> Generation | None:
    """The unsaved generation approving the proposal would make now, or None when it would
    make none (decided, stale, or no longer valid). Nothing is written: it is the same dry
    preparation approval starts with (the persona locked, the change applied in memory and
    validated), inside a transaction that is rolled back. A draft's is composed with its blank
    prompt, as it was proposed. Only the persona's owner may ask, as only they may decide."""
    if not proposal.decidable:
        return None
    with transaction.atomic():
        try:
            _require_decider(actor, proposal)
            changes = _loaded_changes(proposal)
            drafted = not proposal.persona.system_prompt.strip()
            _, _, proposed, _ = _prepare_change(proposal.persona, actor, changes, draft=drafted)
        except (PermissionDenied, ValidationError):
            return None
        finally:
            # Nothing here may write; if anything did, it is undone as the block ends.
            transaction.set_rollback(True)
    if proposed is None or proposed.base_composition_hash != proposal.next_composition_hash:
        return None
    return proposed


@audit.action
def proposal_approve(
    *, proposal: GrantProposal, actor: User, system_prompt: str | None = None
) -> Persona:
    """The owner approves: the change is made by persona_update, exactly as an immediate change
    would be. A proposal the persona has moved on from (a later generation, or a next
    composition other than the one it showed) is marked stale and refused.

    A draft's proposal (persona_draft) is approved with the system prompt its owner writes now,
    never generated: without one it is refused and stays pending."""
    try:
        with transaction.atomic():
            proposal = _pending(proposal, actor)
            persona = _locked_persona(proposal.persona)
            if persona.generation != proposal.base_generation:
                raise StaleProposal(
                    {
                        "proposal": [
                            f"stale: made against generation {proposal.base_generation}, and the "
                            f"persona is at generation {persona.generation}; propose again"
                        ]
                    }
                )
            changes = _loaded_changes(proposal)
            drafted = not persona.system_prompt.strip()
            if drafted:
                if not (system_prompt or "").strip():
                    raise ValidationError(
                        {
                            "system_prompt": [
                                "this persona is a draft: write its system prompt to approve; "
                                "it is never generated"
                            ]
                        }
                    )
                changes["system_prompt"] = system_prompt
            elif system_prompt is not None:
                raise ValidationError(
                    {"system_prompt": ["only a draft's prompt is written on approval"]}
                )
            # Decided before the change is made: the change makes every proposal still pending
            # stale (and audits it), which this one is not.
            GrantProposal.objects.filter(pk=proposal.pk).update(
                status=GrantProposal.Status.APPROVED
            )
            persona = persona_update(
                persona=persona,
                actor=actor,
                expect_composition_hash=proposal.next_composition_hash,
                as_drafted=drafted,
                **changes,
            )
            _decide(proposal, actor, GrantProposal.Status.APPROVED, persona.generation)
            return persona
    except StaleProposal as stale:
        marked = GrantProposal.objects.filter(
            pk=proposal.pk, status=GrantProposal.Status.PENDING
        ).update(status=GrantProposal.Status.STALE)
        if marked:
            _record(
                proposal,
                actor,
                AuditEvent.Kind.PROPOSAL_STALE,
                why=" ".join(stale.messages),
            )
        raise


@audit.action
@transaction.atomic
def proposal_reject(*, proposal: GrantProposal, actor: User) -> GrantProposal:
    """The owner rejects: nothing of the persona changes."""
    proposal = _pending(proposal, actor)
    _decide(proposal, actor, GrantProposal.Status.REJECTED, None)
    return proposal


def _decide(
    proposal: GrantProposal, actor: User, status: GrantProposal.Status, generation: int | None
) -> None:
    proposal.status = status
    proposal.decided_by = actor  # type: ignore[assignment]
    proposal.decided_at = timezone.now()
    proposal.applied_generation = generation
    proposal.save(update_fields=["status", "decided_by", "decided_at", "applied_generation"])
    kind = {
        GrantProposal.Status.APPROVED: AuditEvent.Kind.PROPOSAL_APPROVED,
        GrantProposal.Status.REJECTED: AuditEvent.Kind.PROPOSAL_REJECTED,
    }[status]
    _record(proposal, actor, kind, generation=generation)


def _record(proposal: GrantProposal, actor: User, kind: AuditEvent.Kind, **extra: object) -> None:
    persona = Persona.objects.select_related("agent").get(pk=proposal.persona_id)
    data = {
        "name": persona.name,
        "fields": sorted(proposal.changes),
        "base_generation": proposal.base_generation,
        "via": proposal.via,
        **{key: value for key, value in extra.items() if value is not None},
    }
    audit.record(kind, actor=actor, persona=persona, data=data)
