"""publish_card: one rendering per generation, and never an older card over a newer one."""

import threading
from typing import Any

import pytest
from django.db import connection

from cards.models import PublishedCard
from cards.publishing import publish_card, render_card, unsigned_card
from personas.models import Persona
from tests.factories import make_agent, make_owner, make_persona, update_persona


def persona_with_generations(count: int) -> Persona:
    persona = make_persona(make_agent(make_owner()), discoverable=True)
    for number in range(2, count + 1):
        persona = update_persona(persona, name=f"Renamed {number}")
    assert persona.generation == count
    return persona


def as_read_at(persona: Persona, generation: int) -> Persona:
    """The persona as a publisher that loaded it at `generation` still holds it."""
    stale = Persona.objects.get(pk=persona.pk)
    stale.generation = generation
    return stale


@pytest.mark.django_db
def test_a_stale_publisher_gets_the_newer_card_back_and_changes_nothing() -> None:
    """S9-WK-2: a slow task or request holding generation 1 cannot put it back on the path."""
    persona = persona_with_generations(2)
    newer = PublishedCard.objects.get(persona=persona)
    assert newer.generation == 2

    returned = publish_card(as_read_at(persona, 1))

    stored = PublishedCard.objects.get(persona=persona)
    assert returned.generation == stored.generation == 2
    assert bytes(stored.body) == bytes(newer.body)
    assert stored.etag == newer.etag
    assert stored.last_modified == newer.last_modified


@pytest.mark.django_db
def test_publishing_a_generation_again_rewrites_nothing() -> None:
    persona = persona_with_generations(1)
    first = PublishedCard.objects.get(persona=persona)
    again = publish_card(Persona.objects.get(pk=persona.pk))
    assert (again.etag, again.last_modified) == (first.etag, first.last_modified)


@pytest.mark.django_db
def test_a_newer_generation_replaces_the_card_with_later_validators() -> None:
    """S9-WK-2: within one second too, Last-Modified moves on, so If-Modified-Since never
    mistakes the new card for the old."""
    persona = persona_with_generations(1)
    first = PublishedCard.objects.get(persona=persona)
    persona = update_persona(persona, name="Renamed")
    second = PublishedCard.objects.get(persona=persona)
    assert second.generation == 2
    assert second.etag != first.etag
    assert second.last_modified > first.last_modified
    assert b'"name":"Renamed"' in bytes(second.body)


def race(publishers: list[Persona]) -> list[BaseException]:
    """Start every publisher at once, each on its own thread and connection; their errors."""
    start = threading.Barrier(len(publishers))
    errors: list[BaseException] = []

    def publish(stale: Persona) -> None:
        try:
            start.wait()
            publish_card(stale)
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=publish, args=(p,)) for p in publishers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
def test_concurrent_publishers_leave_the_newest_generation(live_postgres: Any) -> None:
    """S9-WK-2: publishers of generations 1..4 racing (first insert and later updates alike)
    always leave generation 4 stored, with generation 4's bytes."""
    persona = persona_with_generations(4)
    expected = render_card(as_read_at(persona, 4))
    for round_ in range(5):
        if round_ % 2 == 0:
            PublishedCard.objects.filter(persona=persona).delete()
        else:
            PublishedCard.objects.filter(persona=persona).update(generation=0)
        assert race([as_read_at(persona, number) for number in (1, 2, 3, 4)]) == []
        stored = PublishedCard.objects.get(persona=persona)
        assert stored.generation == 4, f"round {round_}"
        assert unsigned_card(bytes(stored.body)) == expected
