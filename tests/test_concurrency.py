"""Many writers changing one persona at once, each on its own PostgreSQL connection."""

import threading

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from cards.models import PublishedCard
from personas import services
from personas.models import Persona, PersonaClass
from personas.services import validation
from stamps.models import CapabilityStamp
from stamps.storage import stamp_path
from tests.factories import (
    CLASS_ADDRESSES,
    free_address,
    make_agent,
    make_owner,
    make_persona,
    standing_verbs,
)
from tests.live import DEADLINE_SECONDS

pytestmark = [
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("live_postgres"),
]

WRITERS = 8
# Verbs a project lead may add to its class tools; each writer's subset is different.
OPTIONAL_VERBS = ["list_todos", "claim", "complete", "create_for"]


def subset_of_writer(index: int) -> list[str]:
    extra = [verb for bit, verb in enumerate(OPTIONAL_VERBS) if (index + 1) & (1 << bit)]
    return standing_verbs(PersonaClass.PROJECT_LEAD, *extra)


def test_concurrent_subset_changes_each_make_exactly_one_generation() -> None:
    """S9-SKL-3, V1-STAMP-1, V1-STAMP-2: no lost update; one stamp per generation at most."""
    persona = make_persona(
        make_agent(make_owner()),
        persona_class=PersonaClass.PROJECT_LEAD,
        verb_subset=standing_verbs(PersonaClass.PROJECT_LEAD),
    )
    subsets = [subset_of_writer(index) for index in range(WRITERS)]
    assert len({tuple(sorted(s)) for s in [*subsets, persona.verb_subset]}) == WRITERS + 1
    start = threading.Barrier(WRITERS)
    errors: list[BaseException] = []

    def write(subset: list[str]) -> None:
        try:
            start.wait(DEADLINE_SECONDS)
            # Each writer starts from the persona as it read it, possibly already stale.
            stale = Persona.objects.get(pk=persona.pk)
            services.persona_update(persona=stale, actor=persona.agent.owner, verb_subset=subset)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(subset,)) for subset in subsets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE_SECONDS)
    assert errors == []

    persona.refresh_from_db()
    generations = list(persona.generations.order_by("pk"))
    numbers = [generation.number for generation in generations]
    assert numbers == list(range(1, WRITERS + 2)), "strictly increasing, one per number"
    written = [sorted(generation.composition["verb_subset"]) for generation in generations[1:]]
    assert sorted(written) == sorted(sorted(subset) for subset in subsets), "no change lost"
    assert persona.generation == WRITERS + 1
    assert sorted(persona.verb_subset) == written[-1], "the persona is its last generation"

    stamps = CapabilityStamp.objects.filter(generation__persona=persona)
    stamped = [stamp.generation_number for stamp in stamps]
    assert len(stamped) == len(set(stamped)), "never two stamps for one generation"
    assert persona.generation in stamped
    for stamp in stamps:
        assert stamp_path(persona.uuid, stamp.generation_number).read_bytes() == bytes(stamp.body)
    assert PublishedCard.objects.get(persona=persona).generation == persona.generation


# `mutation`: a run given a PostgreSQL (MUTATION_TESTS with DATABASE_URL) tests the lock with it.
@pytest.mark.mutation
def test_two_personas_racing_for_one_address_leave_one_holder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """VX-GRANT-5 (attack): two writes that make personas of one owner at one address at once.
    The first has checked that nobody holds the address and not yet committed; the second must
    wait for it (the address row is locked) and is then refused naming it, not find the
    address free and commit a second holder."""
    agent = make_agent(make_owner())
    first_checked, first_may_commit = threading.Event(), threading.Event()
    checked_after_the_address = validation._validate_ask_first

    def first_waits_after_its_check(persona: Persona) -> None:
        checked_after_the_address(persona)
        if threading.current_thread().name == "first":
            first_checked.set()
            first_may_commit.wait(DEADLINE_SECONDS)

    monkeypatch.setattr(validation, "_validate_ask_first", first_waits_after_its_check)
    shared = free_address(agent, CLASS_ADDRESSES[PersonaClass.CODER_DEPUTY])
    outcomes: dict[str, object] = {}

    def create(name: str) -> None:
        try:
            outcomes[name] = services.persona_create(
                agent=agent,
                actor=agent.owner,
                name=name,
                system_prompt="You review pull requests.",
                persona_class=PersonaClass.CODER_DEPUTY,
                verb_subset=standing_verbs(PersonaClass.CODER_DEPUTY),
                queues=["reviews"],
                address=shared,
            )
        except ValidationError as refused:
            outcomes[name] = refused
        finally:
            connection.close()

    first = threading.Thread(target=create, args=("First",), name="first")
    second = threading.Thread(target=create, args=("Second",), name="second")
    first.start()
    assert first_checked.wait(DEADLINE_SECONDS)
    second.start()
    # Given the time to finish were the address not locked: locked, it waits for the first.
    second.join(3)
    first_may_commit.set()
    first.join(DEADLINE_SECONDS)
    second.join(DEADLINE_SECONDS)
    assert isinstance(outcomes["First"], Persona)
    refused = outcomes["Second"]
    assert isinstance(refused, ValidationError), refused
    assert "'First'" in refused.message_dict["address"][0]
    assert list(Persona.objects.filter(address=shared).values_list("name", flat=True)) == ["First"]
