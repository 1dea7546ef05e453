"""Bench data, made in bulk: one owner, one agent, and as many personas as a figure needs.

The first persona goes through personas.services like any other; the rest are its copies with
their own uuid and name, written with bulk_create (personas, then their first generations), so
that 100k personas take seconds. Their stamps, where a figure needs them, are built through
the real path (stamps.services.build_generation_stamp), never faked.
"""

import uuid
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from personas import services
from personas.models import (
    Agent,
    Generation,
    OrganizationDomain,
    OwnerIdentity,
    Persona,
    PersonaClass,
    RegisteredAddress,
    Verification,
)
from stamps.profiles import required_tools

BATCH = 2000
PERSONA_CLASS = PersonaClass.CODER_DEPUTY
ADDRESS = "work/core/reviewer"
# Two personas of one owner never share an address (VX-GRANT-5): the searchable persona and
# every copy hold one of their own.
SEARCH_ADDRESS = "work/core/release"
COPY_ADDRESS = "work/bench/p{uuid}"
EXTRA_VERBS = ["list_todos", "claim", "complete"]
# Granted to the agent but not on the template: with them a persona carries deploy-releases,
# the skill the directory search figure filters by.
SEARCH_VERBS = ["register_webhook", "trigger_webhook"]
SEARCH_SKILL = "deploy-releases"
SEARCH_WORD = "quokka"
# The fan-out figure's skills require a verb the searchable personas lack, so that the search
# figures read the same skills at 1k (before the fan-out) as at 100k (after it).
FANOUT_VERBS = ["list_todos", "complete"]
SEARCHABLE_NAME = "Bench searchable"


@dataclass
class Fleet:
    owner: Any
    agent: Agent
    template: Persona


def make_fleet(username: str = "bench") -> Fleet:
    """The owner, agent and first persona (discoverable, standing, card published)."""
    owner = get_user_model().objects.create_user(
        username=username, password=uuid.uuid4().hex, is_staff=True
    )
    # Proven as the installation approves it: cards name the domain, as most owners' will.
    domain = OrganizationDomain.objects.create(
        owner=owner,
        domain=f"{username}.bench.example.org",
        verification=Verification.OPERATOR,
        verified_at=timezone.now(),
    )
    OwnerIdentity.objects.create(user=owner, display_name="Bench Owner", organization_domain=domain)
    verbs = [*required_tools(PERSONA_CLASS), *EXTRA_VERBS]
    agent = services.agent_create(
        owner=owner,
        name="bench-runtime",
        granted_verbs=[*verbs, *SEARCH_VERBS],
        granted_queues=["reviews"],
    )
    RegisteredAddress.objects.get_or_create(path=ADDRESS)
    template = services.persona_create(
        agent=agent,
        actor=owner,
        name="Bench persona 0",
        description="Reviews pull requests queued for review, for the benchmark.",
        system_prompt="You review pull requests from the reviews queue. Be precise and kind.",
        verb_subset=verbs,
        queues=["reviews"],
        persona_class=PERSONA_CLASS,
        address=ADDRESS,
    )
    template = services.persona_set_discoverable(
        persona=template, actor=owner, discoverable=True, via="bench"
    )
    template.refresh_from_db()
    return Fleet(owner=owner, agent=agent, template=template)


def make_searchable(fleet: Fleet) -> Persona:
    """A persona the directory search figure finds: SEARCH_SKILL, and SEARCH_WORD in its words.

    The template's copies carry neither, so the search's matches stay as many however many of
    them the directory holds. It lacks the FANOUT_VERBS its class does not require, so no
    fan-out round changes its skills.
    """
    fanout_only = set(FANOUT_VERBS) - set(required_tools(PERSONA_CLASS))
    RegisteredAddress.objects.get_or_create(path=SEARCH_ADDRESS)
    persona = services.persona_create(
        agent=fleet.agent,
        actor=fleet.owner,
        name=f"{SEARCHABLE_NAME} 0",
        description=f"Ships releases with a {SEARCH_WORD}, for the benchmark.",
        system_prompt="You ship releases. Be precise and kind.",
        verb_subset=[
            *(verb for verb in fleet.template.verb_subset if verb not in fanout_only),
            *SEARCH_VERBS,
        ],
        queues=["reviews"],
        persona_class=PERSONA_CLASS,
        address=SEARCH_ADDRESS,
    )
    persona = services.persona_set_discoverable(
        persona=persona, actor=fleet.owner, discoverable=True, via="bench"
    )
    persona.refresh_from_db()
    if not any(skill["id"] == SEARCH_SKILL for skill in persona.skills):
        raise RuntimeError(f"the searchable bench persona does not carry {SEARCH_SKILL}")
    return persona


def fanout_personas(fleet: Fleet) -> Any:
    """The personas every fan-out round changes: the fleet but its searchable ones."""
    return Persona.objects.filter(agent=fleet.agent).exclude(name__startswith=SEARCHABLE_NAME)


def add_personas(
    fleet: Fleet, count: int, *, start: int, template: Persona | None = None
) -> list[int]:
    """`count` more discoverable copies of the template persona (the fleet's unless another is
    given), each with its generation 1.

    Their stamps are owed (standing unknown), as right after a real create.
    """
    template = template or fleet.template
    first_generation = template.generations.get(number=1)
    ids: list[int] = []
    for offset in range(0, count, BATCH):
        size = min(BATCH, count - offset)
        indexes = range(start + offset, start + offset + size)
        uuids = [uuid.uuid4() for _ in indexes]
        addresses = RegisteredAddress.objects.bulk_create(
            [RegisteredAddress(path=COPY_ADDRESS.format(uuid=each.hex)) for each in uuids]
        )
        personas = []
        for index, persona_uuid, address in zip(indexes, uuids, addresses, strict=True):
            personas.append(
                Persona(
                    uuid=persona_uuid,
                    agent_id=template.agent_id,
                    name=f"{template.name.rsplit(' ', 1)[0]} {index}",
                    description=template.description,
                    system_prompt=template.system_prompt,
                    verb_subset=template.verb_subset,
                    queues=template.queues,
                    skills=template.skills,
                    persona_class=template.persona_class,
                    address_id=address.pk,
                    graph_namespace=template.graph_namespace,
                    human_surface_bindings=template.human_surface_bindings,
                    ask_first_verbs=template.ask_first_verbs,
                    discoverable=True,
                    generation=1,
                    standing=None,
                )
            )
        with transaction.atomic():
            Persona.objects.bulk_create(personas, batch_size=BATCH)
            generations = []
            for persona, address in zip(personas, addresses, strict=True):
                composition = dict(first_generation.composition)
                composition["persona"] = str(persona.uuid)
                composition["name"] = persona.name
                composition["address"] = address.path
                generations.append(
                    Generation(
                        persona_id=persona.pk,
                        number=1,
                        composition=composition,
                        base_composition_hash=services.composition_hash(composition),
                    )
                )
            Generation.objects.bulk_create(generations, batch_size=BATCH)
        ids += [persona.pk for persona in personas]
    return ids


def owed_generations(agent: Agent) -> list[Generation]:
    return list(
        Generation.objects.filter(persona__agent=agent, standing__isnull=True).order_by("pk")
    )
