"""The recompute fan-out settles and publishes a batch at once, with per-persona outcomes.

A verb->skill map change reaches every persona through settle_persona_range: skills, a new
generation, its stamp and its card, for the whole batch in a few queries. The outcome of each
persona must be what the one-at-a-time path gives: its own stamp or its own reasons, its own
card, standing recorded only on the generation that is current.
"""

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cards.models import PublishedCard
from cards.publishing import render_card, unsigned_card
from personas import services
from personas.models import Persona, PersonaClass
from settling import tasks
from stamps.models import CapabilityStamp
from stamps.services import build_current_stamps
from stamps.storage import stamp_path
from tests.factories import (
    REVIEWER_VERBS,
    make_agent,
    make_owner,
    make_persona,
    run_on_commit,
    standing_verbs,
)
from virgo.canonical import sha256_hex

pytestmark = pytest.mark.django_db

LEAD = PersonaClass.PROJECT_LEAD


@pytest.fixture
def staff() -> Any:
    return get_user_model().objects.create_superuser("map-admin", None, "x" * 20)


def fleet(count: int, agent: Any) -> list[Persona]:
    return [
        make_persona(
            agent,
            persona_class=LEAD,
            verb_subset=standing_verbs(LEAD, *REVIEWER_VERBS),
            discoverable=True,
        )
        for _ in range(count)
    ]


def add_triage_skill(staff: Any, slug: str) -> None:
    """A skill every fleet persona derives; its fan-out is queued, and run only on commit."""
    services.skill_save(
        actor=staff,
        slug=slug,
        name="Triage todos",
        description="Claims and lists todos.",
        required_verbs=["list_todos", "claim"],
        tags=["todos"],
    )


def change_the_map(staff: Any, slug: str) -> None:
    with run_on_commit():
        add_triage_skill(staff, slug)


def test_a_map_change_gives_each_persona_its_own_stamp_card_and_standing(staff: Any) -> None:
    """S9-SKL-3, S9-SCN-4, V1-STAMP-1, V1-STAMP-2, V1-INV-2: after the fan-out every persona has
    a new generation with the new skill; those that stand have their own stamp (file and row,
    same hash) and those that do not are recorded with their reasons; every card is current."""
    agent = make_agent(make_owner())
    standing = fleet(3, agent)
    lacking = make_persona(agent, persona_class=LEAD, verb_subset=[*REVIEWER_VERBS])
    change_the_map(staff, "triage-todos")

    for persona in [*standing, lacking]:
        persona.refresh_from_db()
        assert persona.generation == 2
        assert "triage-todos" in [skill["id"] for skill in persona.skills]
        generation = persona.generations.get(number=2)
        card = PublishedCard.objects.get(persona=persona)
        assert card.generation == 2
        assert unsigned_card(bytes(card.body)) == render_card(persona)
    for persona in standing:
        generation = persona.generations.get(number=2)
        stamp = CapabilityStamp.objects.get(generation=generation)
        assert persona.standing is True
        assert generation.stamp_hash == stamp.stamp_hash == sha256_hex(stamp.path.read_bytes())
        assert generation.composition_hash
    assert lacking.standing is False
    reasons = lacking.generations.get(number=2).not_standing_reasons
    assert any("missing tool" in reason for reason in reasons)
    assert not CapabilityStamp.objects.filter(persona_uuid=lacking.uuid).exists()


def test_a_batch_costs_the_same_queries_whatever_its_size(staff: Any) -> None:
    """No per-persona round trips: settling and publishing 8 personas takes the queries 2 do."""
    counts = []
    for size, slug in ((2, "first-map-change"), (8, "second-map-change")):
        agent = make_agent(make_owner())
        personas = fleet(size, agent)
        add_triage_skill(staff, slug)
        ids = sorted(persona.pk for persona in personas)
        with CaptureQueriesContext(connection) as captured:
            assert tasks.settle_persona_range(ids[0], ids[-1]) == size
        counts.append(len(captured.captured_queries))
        for persona in personas:
            persona.refresh_from_db()
            assert persona.standing is True
            assert PublishedCard.objects.get(persona=persona).generation == persona.generation
    assert counts[0] == counts[1]


def test_a_persona_moved_on_keeps_the_standing_of_its_own_generation(staff: Any) -> None:
    """A batch records standing on a persona only while the stamped generation is its current
    one, as the single path does."""
    agent = make_agent(make_owner())
    [persona] = fleet(1, agent)
    add_triage_skill(staff, "moved-on")
    settled = services.settle_persona_batch([persona.pk])
    assert [p.pk for p in settled] == [persona.pk]
    Persona.objects.filter(pk=persona.pk).update(generation=3, standing=None)
    [outcome] = build_current_stamps(personas=settled)
    assert outcome.generation.number == 2
    assert outcome.standing
    persona.refresh_from_db()
    assert persona.standing is None


@pytest.mark.live
def test_an_older_generation_is_never_taken_for_a_persona_s_current_one(
    staff: Any, live_postgres: None
) -> None:
    """S9-SKL-3: the batch asks for generations by the numbers its personas are at, so one
    persona's older generation comes back when it carries another's current number; it is no
    answer for its own persona wherever the table returns it. Here that older row was rewritten
    (it now lies after the current one) and the table is read in heap order: taken for the
    current generation, its composition would differ from the persona's and open a needless
    third generation."""
    agent = make_agent(make_owner())
    [moved_on] = fleet(1, agent)
    change_the_map(staff, "moved-on")
    [still_first] = fleet(1, agent)
    moved_on.refresh_from_db()
    assert (moved_on.generation, still_first.generation) == (2, 1)
    first = moved_on.generations.get(number=1)
    with connection.cursor() as cursor:
        for plan in ("enable_indexscan", "enable_indexonlyscan", "enable_bitmapscan"):
            cursor.execute(f"SET {plan} = off")
        # A rewritten row lands wherever its page has room, which may be before the current
        # one: rewritten until the heap returns it last (this transaction's old versions stay).
        for _ in range(20):
            cursor.execute(
                "UPDATE personas_generation SET number = number WHERE id = %s", [first.pk]
            )
            cursor.execute(
                "SELECT number FROM personas_generation WHERE persona_id = %s", [moved_on.pk]
            )
            if [number for (number,) in cursor.fetchall()] == [2, 1]:
                break
        else:
            raise AssertionError("the older generation never came back after the current one")
    assert services.settle_persona_batch([moved_on.pk, still_first.pk]) == []
    moved_on.refresh_from_db()
    assert moved_on.generation == 2
    assert not moved_on.generations.filter(number=3).exists()


def test_the_fan_out_writes_each_persona_and_generation_row_once(staff: Any) -> None:
    """S9-SKL-3, V1-STAMP-2 (decision 251): a batch stamps its new generations before saving
    them, so each is inserted with its outcome and never updated, and each persona is written
    in one statement with its standing; the cards are written once too. What is counted is the
    statements per table."""
    agent = make_agent(make_owner())
    personas = fleet(3, agent)
    add_triage_skill(staff, "written-once")
    ids = sorted(persona.pk for persona in personas)
    with CaptureQueriesContext(connection) as captured:
        assert tasks.settle_persona_range(ids[0], ids[-1]) == 3
    # executemany (SQLite) is logged as "N times: UPDATE ...", one statement.
    statements = [query["sql"].split(" times: ")[-1] for query in captured.captured_queries]
    writes = [
        sql.split(" (")[0].split(" SET ")[0]
        for sql in statements
        if sql.startswith(("UPDATE", "INSERT"))
    ]
    assert writes.count('UPDATE "personas_persona"') == 1
    assert not [write for write in writes if write.startswith('UPDATE "personas_generation"')]
    assert writes.count('INSERT INTO "personas_generation"') == 1
    assert writes.count('INSERT INTO "stamps_capabilitystamp"') == 1
    assert writes.count('UPDATE "cards_publishedcard"') == 1
    for persona in personas:
        persona.refresh_from_db()
        generation = persona.generations.get(number=2)
        assert persona.standing is generation.standing is True
        assert (
            generation.stamp_hash == CapabilityStamp.objects.get(generation=generation).stamp_hash
        )
        assert PublishedCard.objects.get(persona=persona).pinned


def test_a_file_in_the_way_fails_only_its_own_generation_in_the_fan_out(staff: Any) -> None:
    """V1-STAMP-2, V1-INV-2: stamped before they are saved, the fan-out's generations keep
    the batch rule: a foreign file at one generation's path stays as it was, that generation
    is inserted not standing with the reason, its card is published unpinned, the rest stand."""
    agent = make_agent(make_owner())
    personas = fleet(3, agent)
    planted = stamp_path(personas[1].uuid, 2)
    planted.parent.mkdir(parents=True)
    planted.write_bytes(b'{"planted": true}')
    change_the_map(staff, "file-in-the-way")
    standing = []
    for persona in personas:
        persona.refresh_from_db()
        assert persona.generation == 2
        assert PublishedCard.objects.get(persona=persona).generation == 2
        standing.append(persona.standing)
    assert standing == [True, False, True]
    refused = personas[1].generations.get(number=2)
    assert refused.standing is False
    assert "a stamp file is never rewritten" in refused.not_standing_reasons[0]
    assert planted.read_bytes() == b'{"planted": true}'
    assert not CapabilityStamp.objects.filter(generation=refused).exists()
    assert not PublishedCard.objects.get(persona=personas[1]).pinned
