"""Composition changes stamp new generations through Celery, and standing decides advertising."""

import pytest
from django.test import Client

from personas import services
from personas.models import Persona
from personas.services import agent_update
from settling.tasks import settle_persona
from stamps.models import CapabilityStamp
from stamps.projections import mcp_tool_list
from tests.factories import (
    REVIEWER_VERBS,
    make_agent,
    make_owner,
    make_persona,
    run_on_commit,
    standing_verbs,
    stop_standing,
    update_persona,
)

pytestmark = pytest.mark.django_db


def card_status(persona: Persona) -> int:
    return Client().get(persona.card_path).status_code


def test_a_verb_subset_change_stamps_a_new_generation_through_celery() -> None:
    """V1-STAMP-1, V1-FAC-6: the task queued on commit (eager here) builds generation 2's stamp,
    and the runtime's tool list follows the new subset."""
    persona = make_persona(make_agent(make_owner()))
    assert "claim" in mcp_tool_list(CapabilityStamp.objects.get(generation_number=1).data)
    verbs = [verb for verb in persona.verb_subset if verb != "claim"]
    with run_on_commit() as callbacks:
        services.persona_update(persona=persona, actor=persona.agent.owner, verb_subset=verbs)
        assert not CapabilityStamp.objects.filter(generation_number=2).exists()
    assert len(callbacks) == 1
    persona.refresh_from_db()
    assert persona.generation == 2
    assert persona.standing is True
    second = CapabilityStamp.objects.get(persona_uuid=persona.uuid, generation_number=2)
    assert "claim" not in mcp_tool_list(second.path.read_bytes())
    assert persona.generations.get(number=2).stamp_hash == second.stamp_hash


def test_running_the_task_again_changes_nothing() -> None:
    """V1-STAMP-2: the task is idempotent per (persona, generation): a retry finds the stamp."""
    persona = make_persona(make_agent(make_owner()))
    stored = CapabilityStamp.objects.get()
    settle_persona.delay(persona.pk)
    settle_persona.delay(persona.pk)
    assert list(CapabilityStamp.objects.values_list("pk", flat=True)) == [stored.pk]
    persona.refresh_from_db()
    assert (persona.generation, persona.standing) == (1, True)


def test_a_persona_that_stops_standing_is_no_longer_advertised() -> None:
    """V1-INV-2, S9-WK-1: dropping a required tool records the exact reason, takes the persona
    out of the directory and its public card answers 404; restoring it brings it back."""
    persona = make_persona(make_agent(make_owner()), discoverable=True)
    assert card_status(persona) == 200
    assert Persona.objects.advertised().filter(pk=persona.pk).exists()

    agent = persona.agent
    persona = stop_standing(persona, "workspace_write")
    generation = persona.generations.get(number=2)
    assert generation.standing is False
    assert generation.not_standing_reasons == ["not standing: missing tool workspace_write"]
    assert persona.standing is False
    assert not persona.is_advertised
    assert not Persona.objects.advertised().filter(pk=persona.pk).exists()
    assert card_status(persona) == 404
    assert not CapabilityStamp.objects.filter(generation_number=2).exists()

    # The agent's grant restored, the owner's edit giving the tool back stands again: against
    # generation 1, the last that stood, it widens nothing.
    agent.refresh_from_db()
    with run_on_commit():
        agent_update(
            agent=agent, actor=agent.owner, granted_verbs=[*agent.granted_verbs, "workspace_write"]
        )
    persona = update_persona(persona, verb_subset=[*persona.verb_subset, "workspace_write"])
    assert (persona.generation, persona.standing) == (3, True)
    assert card_status(persona) == 200


def test_a_tool_outside_the_class_takes_the_persona_down_with_the_reason() -> None:
    """V1-POL-2: create_for is '-' for a coder deputy: recorded, not stamped, not advertised."""
    agent = make_agent(make_owner())
    persona = make_persona(
        agent,
        verb_subset=[*standing_verbs("coder-deputy", *REVIEWER_VERBS), "create_for"],
        discoverable=True,
    )
    assert persona.standing is False
    assert persona.generations.get().not_standing_reasons == [
        "tool create_for is not available to class coder-deputy: 'tasks: assign' is '-' "
        "(not exposed)"
    ]
    assert card_status(persona) == 404


def test_the_batched_fan_out_stamps_every_new_generation() -> None:
    """V1-STAMP-1: a changed verb->skill map opens generations in batches; each gets its stamp."""
    owner = make_owner()
    agent = make_agent(owner)
    personas = [make_persona(agent) for _ in range(3)]
    superuser = make_owner("staff")
    superuser.is_superuser = True
    superuser.save()
    with run_on_commit():
        services.skill_save(
            actor=superuser,
            slug="ack-inbox",
            name="Acknowledge the inbox",
            description="Acknowledges coordination messages.",
            required_verbs=["ack_coordination_message"],
            tags=["inbox"],
        )
    for persona in personas:
        persona.refresh_from_db()
        assert (persona.generation, persona.standing) == (2, True)
        assert CapabilityStamp.objects.filter(
            persona_uuid=persona.uuid, generation_number=2
        ).exists()
