"""VX-GRANT-5: two personas of one owner never share an address.

Every message a persona sends names its address and the owner's personas reach each other by it,
so an address two live personas held would speak for either. Each way a persona comes to an
address (made by its owner, drafted through the API, moved, a proposal approved later) is refused
while another live persona of the owner holds it, naming the holder; a revoked persona holds none,
and another owner's persona is another hierarchy.
"""

from typing import Any

import pytest
from django.core.exceptions import ValidationError

from personas import services
from personas.models import AuditEvent, GrantProposal, Persona, RevocationReason
from tests.factories import address, make_agent, make_owner, make_persona, run_on_commit
from tests.owner_clients import fresh_rate_limits, token_client  # noqa: F401 (autouse fixture)
from tests.runtime_support import standing_persona

pytestmark = pytest.mark.django_db


def records() -> tuple[int, int, int]:
    return Persona.objects.count(), GrantProposal.objects.count(), AuditEvent.objects.count()


def test_making_a_persona_at_an_address_the_owner_already_uses_is_refused_naming_the_holder() -> (
    None
):
    """VX-GRANT-5: persona_create at an address another live persona of the owner holds raises
    on `address`, naming the holder and what to do, and writes nothing."""
    holder = standing_persona()
    before = records()
    with pytest.raises(ValidationError) as refused:
        make_persona(holder.agent, name="Second", address=holder.address)
    [message] = refused.value.message_dict["address"]
    assert holder.address.path in message and repr(holder.name) in message
    assert str(holder.uuid) in message and "choose another address" in message
    assert records() == before


def test_another_agent_of_the_same_owner_cannot_take_the_address_either() -> None:
    """VX-GRANT-5: the owner's personas find each other by address whichever agent they face,
    so the rule spans the owner's agents."""
    holder = standing_persona()
    other_agent = make_agent(holder.agent.owner, name="Second agent")
    with pytest.raises(ValidationError) as refused:
        make_persona(other_agent, name="Second", address=holder.address)
    assert "address" in refused.value.message_dict


def test_another_owner_may_use_the_same_address() -> None:
    """VX-GRANT-5: the rule is within one owner's hierarchy; another owner's persona at the
    same registered address is theirs to make."""
    holder = standing_persona()
    elsewhere = standing_persona(make_owner(), address=holder.address)
    assert elsewhere.address_id == holder.address_id


def test_a_revoked_persona_frees_its_address() -> None:
    """VX-GRANT-5: a revoked persona speaks for nobody, so its address is free again."""
    holder = standing_persona()
    with run_on_commit():
        services.persona_revoke(
            persona=holder,
            actor=holder.agent.owner,
            reason_code=RevocationReason.SUPERSEDED,
            reason="replaced",
            via="test",
        )
    successor = make_persona(holder.agent, name="Successor", address=holder.address)
    assert successor.address_id == holder.address_id


def test_a_draft_through_the_api_at_a_held_address_is_a_422_naming_address() -> None:
    """VX-GRANT-5: the API's draft is refused with 422 (a rule of the records, as the API
    answers those) naming the field, before any proposal is made."""
    holder = standing_persona()
    before = records()
    body: dict[str, Any] = {
        "agent": holder.agent.pk,
        "name": "Second",
        "system_prompt": "You review pull requests.",
        "verb_subset": holder.verb_subset,
        "queues": holder.queues,
        "persona_class": holder.persona_class,
        "address": holder.address.path,
    }
    with run_on_commit():
        response = token_client(holder.agent.owner).post("/api/personas/", body, format="json")
    assert response.status_code == 422, response.content
    assert holder.address.path in str(response.json()["address"])
    assert records() == before


def test_moving_a_persona_onto_a_held_address_is_refused() -> None:
    """VX-GRANT-5: a PATCH moving one persona onto its sibling's address is a 422 on
    `address`, not a proposal; the persona stays where it was."""
    holder = standing_persona()
    mover = standing_persona(holder.agent.owner, agent=holder.agent, name="Mover")
    assert mover.address_id != holder.address_id
    with run_on_commit():
        response = token_client(holder.agent.owner).patch(
            f"/api/personas/{mover.uuid}/", {"address": holder.address.path}, format="json"
        )
    assert response.status_code == 422, response.content
    assert "address" in response.json()
    assert Persona.objects.get(pk=mover.pk).address_id == mover.address_id
    assert not GrantProposal.objects.filter(persona=mover).exists()


def test_approving_a_move_onto_an_address_taken_meanwhile_is_refused() -> None:
    """VX-GRANT-5: a proposal to move is checked again when the owner approves it: another
    persona made at that address in between keeps it, and the approval changes nothing."""
    mover = standing_persona()
    owner = mover.agent.owner
    target = address("work/core/lead")
    with run_on_commit():
        change = services.persona_submit(
            persona=mover, actor=owner, via=GrantProposal.Via.API, address=target
        )
    assert change.proposal is not None
    make_persona(mover.agent, name="Lead", address=target, persona_class="project-lead")
    generation = Persona.objects.get(pk=mover.pk).generation
    with pytest.raises(ValidationError) as refused, run_on_commit():
        services.proposal_approve(proposal=change.proposal, actor=owner)
    assert "address" in refused.value.message_dict
    assert Persona.objects.get(pk=mover.pk).generation == generation
