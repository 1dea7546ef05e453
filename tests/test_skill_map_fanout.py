"""The verb->skill map fan-out: batched, idempotent, and resumable from the database alone."""

from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import override_settings

from cards.models import PublishedCard
from personas import services
from personas.models import Persona
from settling import tasks
from settling.reconciliation import owed_personas, reconcile
from tests.factories import REVIEWER_VERBS, make_agent, make_owner, make_persona, run_on_commit

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff() -> Any:
    user = make_owner("staff")
    user.is_superuser = True
    user.save()
    return user


def has_skill(persona: Persona, slug: str) -> bool:
    persona.refresh_from_db()
    return slug in [skill["id"] for skill in persona.skills]


def add_review_skill(staff: Any) -> None:
    services.skill_save(
        actor=staff,
        slug="review-code",
        name="Review code",
        description="Claims and completes reviews.",
        required_verbs=["claim", "complete"],
        tags=["review"],
    )


def test_a_map_change_recomputes_every_affected_persona(staff: Any) -> None:
    """S9-SKL-2, S9-SKL-3: a new map row reaches every persona whose verbs satisfy it."""
    agent = make_agent(make_owner())
    reviewers = [make_persona(agent, verb_subset=REVIEWER_VERBS) for _ in range(3)]
    bystander = make_persona(agent, verb_subset=["list_todos"])
    with run_on_commit():
        add_review_skill(staff)
    assert all(has_skill(persona, "review-code") for persona in reviewers)
    assert not has_skill(bystander, "review-code")
    assert all(persona.generation == 2 for persona in reviewers)


def test_a_fan_out_lost_with_the_broker_is_done_by_the_reconciler(staff: Any) -> None:
    """S9-SKL-3: with no task ever run (the queue was down), the map change is not lost."""
    persona = make_persona(make_agent(make_owner()), verb_subset=REVIEWER_VERBS)
    add_review_skill(staff)  # its on-commit fan-out never runs here
    assert not has_skill(persona, "review-code")
    reconcile(grace=timedelta(0))
    assert has_skill(persona, "review-code")


@override_settings(VIRGO_RECOMPUTE_BATCH_SIZE=2)
def test_a_fan_out_stopped_halfway_resumes_with_only_the_rest(staff: Any) -> None:
    """A second fan-out lists only the personas still behind the map."""
    agent = make_agent(make_owner())
    personas = [make_persona(agent, verb_subset=REVIEWER_VERBS) for _ in range(5)]
    add_review_skill(staff)
    first, second = personas[0].pk, personas[1].pk
    tasks.settle_persona_range(first, second)  # the first batch, then the worker died
    behind = services.skill_map_revision()
    assert Persona.objects.filter(skill_map_revision__lt=behind).count() == 3
    # Three personas left, in batches of at most two that shrink toward the end: one each.
    assert tasks.fan_out_skill_map() == 3
    assert all(has_skill(persona, "review-code") for persona in personas)
    assert tasks.fan_out_skill_map() == 0


def test_a_fan_out_ends_in_smaller_batches_so_workers_finish_together() -> None:
    """Each batch is at most the configured size and at least a quarter of it; they shrink
    over the last few, and the last is at most a quarter, so two workers side by side end
    within a quarter batch of each other. Every id is in one batch, in order."""
    ids = list(range(1, 10_001))
    batches = tasks.id_batches(ids, 500)
    sizes = [len(batch) for batch in batches]
    assert [id_ for batch in batches for id_ in batch] == ids
    assert sizes[:17] == [500] * 17
    assert sizes == sorted(sizes, reverse=True)
    assert all(125 <= size <= 500 for size in sizes[:-1])
    assert sizes[-1] <= 125
    assert len(batches) == 25
    assert [len(batch) for batch in tasks.id_batches(ids[:100], 500)] == [100]
    assert tasks.id_batches([], 500) == []


def test_a_batch_size_below_one_is_refused_not_looped_on() -> None:
    """A misconfigured VIRGO_RECOMPUTE_BATCH_SIZE of 0 would take no ids per batch, forever."""
    with pytest.raises(ValueError, match="at least 1"):
        tasks.id_batches([1, 2, 3], 0)


def test_a_redelivered_range_publishes_what_its_killed_run_left(staff: Any) -> None:
    """VX-REL-5: a range task killed after its recompute committed left new generations with
    no stamp and no card; the same task, redelivered, publishes them itself (and says how many)
    instead of returning 0 and leaving them to the reconciler."""
    agent = make_agent(make_owner())
    personas = [make_persona(agent) for _ in range(4)]
    add_review_skill(staff)  # its on-commit fan-out never runs here
    ids = [persona.pk for persona in personas]
    changed = services.settle_persona_batch(ids)  # what the killed run committed
    assert len(changed) == 4
    assert sorted(owed_personas().values_list("pk", flat=True)) == ids
    assert tasks.settle_persona_range(ids[0], ids[-1]) == 4
    assert list(owed_personas()) == []
    for persona in personas:
        persona.refresh_from_db()
        assert (persona.generation, persona.standing) == (2, True)
        assert PublishedCard.objects.get(persona=persona).generation == 2
    assert tasks.settle_persona_range(ids[0], ids[-1]) == 0


def test_a_skill_without_tags_is_refused_before_any_card_breaks(staff: Any) -> None:
    """S9-CARD-1: A2A requires skill tags, so the map refuses a skill without one."""
    with pytest.raises(ValidationError) as raised:
        services.skill_save(
            actor=staff, slug="untagged", name="Untagged", description="x", required_verbs=["claim"]
        )
    assert "tags" in raised.value.message_dict
