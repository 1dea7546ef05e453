"""Real Celery processes on the PostgreSQL test database and a Redis of each test's own.

The test process queues tasks on that Redis as the web processes do; `celery -A virgo worker`
and `celery -A virgo beat` run as separate processes. Nothing is mocked: Redis is stopped for
real, and a worker is killed with SIGKILL in the middle of writing a stamp.
"""

import json
import logging
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection, transaction

from cards.models import PublishedCard
from personas import services
from personas.models import Generation, Persona, PersonaClass
from personas.services import skill_map_revision
from settling.reconciliation import owed_personas
from stamps.models import CapabilityStamp
from stamps.storage import stamp_path
from tests.card_lock_support import a_backend_waits_to_publish_cards, card_row_held
from tests.factories import make_agent, make_owner, make_persona, standing_verbs
from tests.live import DEADLINE_SECONDS, CeleryProcesses, celery_publishing_to, wait_until
from tests.owner_clients import token_client

pytestmark = [
    pytest.mark.live,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("live_postgres"),
]

LEAD = PersonaClass.PROJECT_LEAD


def lead_persona() -> Persona:
    """A project lead that stands, without create_for (so without the delegate-work skill)."""
    persona = make_persona(make_agent(make_owner()), persona_class=LEAD)
    assert persona.standing
    assert "create_for" not in persona.verb_subset
    return persona


def with_create_for(persona: Persona) -> list[str]:
    return standing_verbs(LEAD, *persona.verb_subset, "create_for")


def built(persona: Persona, number: int) -> bool:
    """The generation's stamp is stored and standing, and its card is the one published."""
    generation = Generation.objects.get(persona=persona, number=number)
    card = PublishedCard.objects.filter(persona=persona).first()
    return generation.standing is True and card is not None and card.generation == number


def assert_stamp_file_is_the_stored_stamp(persona: Persona, number: int) -> None:
    stored = CapabilityStamp.objects.get(generation__persona=persona, generation_number=number)
    path = stamp_path(persona.uuid, number)
    assert path.read_bytes() == bytes(stored.body)
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_a_verb_subset_change_reaches_a_new_standing_stamp_through_the_worker(
    celery_processes: CeleryProcesses,
) -> None:
    """S9-SCN-4, S9-SKL-3, V1-STAMP-1: the worker builds generation 2's stamp and card."""
    persona = lead_persona()
    celery_processes.worker()
    with celery_publishing_to(celery_processes.broker.url):
        services.persona_update(
            persona=persona, actor=persona.agent.owner, verb_subset=with_create_for(persona)
        )

    wait_until(lambda: built(persona, 2), what="the worker to build generation 2")
    persona.refresh_from_db()
    assert persona.generation == 2
    assert persona.standing is True
    assert "delegate-work" in [skill["id"] for skill in persona.skills]
    card = json.loads(bytes(PublishedCard.objects.get(persona=persona).body))
    assert "delegate-work" in [skill["id"] for skill in card["skills"]]
    assert_stamp_file_is_the_stored_stamp(persona, 2)


def test_a_change_made_while_redis_is_down_is_kept_and_built_once_it_returns(
    celery_processes: CeleryProcesses, caplog: pytest.LogCaptureFixture
) -> None:
    """The API answers 200 without Redis; beat's reconciler builds the stamp after it returns."""
    persona = lead_persona()
    redis = celery_processes.broker
    # Beat sends the sweep every second; the worker that runs it reconciles even the youngest.
    celery_processes.worker(VIRGO_RECONCILE_GRACE_SECONDS="0")
    celery_processes.beat(VIRGO_RECONCILE_INTERVAL_SECONDS="1")
    redis.stop()

    with (
        caplog.at_level(logging.WARNING, logger="virgo.queueing"),
        celery_publishing_to(redis.url),
    ):
        # A narrowing write, made at once (a widening one would wait for the owner: VX-REV-1).
        assert "complete" in persona.verb_subset
        response = token_client(persona.agent.owner).patch(
            f"/api/personas/{persona.uuid}/",
            {"verb_subset": [verb for verb in persona.verb_subset if verb != "complete"]},
            format="json",
        )
    assert response.status_code == 200, response.content
    assert response.json()["generation"] == 2
    assert "could not queue personas.tasks.settle_persona" in caplog.text
    persona.refresh_from_db()
    assert persona.generation == 2
    assert list(owed_personas()) == [persona]

    redis.start()
    wait_until(lambda: built(persona, 2), what="beat's reconciler to build generation 2")
    assert_stamp_file_is_the_stored_stamp(persona, 2)
    assert list(owed_personas()) == []


@contextmanager
def stamp_row_held_open(generation: Generation) -> Iterator[None]:
    """Insert generation's stamp row in another connection and keep that transaction open.

    A builder that gets as far as storing its own row waits on this one: after its stamp file is
    written, before its transaction commits. That is the moment a worker is killed below.
    """
    inserted = threading.Event()
    release = threading.Event()
    failure: list[BaseException] = []

    def hold() -> None:
        try:
            with transaction.atomic():
                CapabilityStamp.objects.create(
                    generation=generation,
                    persona_uuid=generation.persona.uuid,
                    generation_number=generation.number,
                    stamp_hash="0" * 64,
                    body=b"{}",
                )
                inserted.set()
                release.wait(DEADLINE_SECONDS)
                transaction.set_rollback(True)
        except BaseException as exc:
            failure.append(exc)
            inserted.set()
        finally:
            connection.close()

    thread = threading.Thread(target=hold)
    thread.start()
    inserted.wait(DEADLINE_SECONDS)
    assert not failure, failure
    try:
        yield
    finally:
        release.set()
        thread.join(DEADLINE_SECONDS)


def a_backend_waits_to_store_a_stamp() -> bool:
    table = CapabilityStamp._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND query LIKE %s",
            [f'INSERT INTO "{table}"%'],
        )
        (waiting,) = cursor.fetchone()
    return waiting > 0


def test_a_worker_killed_mid_build_leaves_no_half_written_stamp(
    celery_processes: CeleryProcesses,
) -> None:
    """V1-STAMP-2: SIGKILL after the file, before the commit; the reconciler completes it."""
    persona = lead_persona()
    with celery_publishing_to(celery_processes.broker.url):
        services.persona_update(
            persona=persona, actor=persona.agent.owner, verb_subset=with_create_for(persona)
        )
    generation = Generation.objects.get(persona=persona, number=2)
    path = stamp_path(persona.uuid, 2)

    with stamp_row_held_open(generation):
        worker = celery_processes.worker()
        wait_until(a_backend_waits_to_store_a_stamp, what="the worker to reach its stamp's row")
        worker.kill()

    # Whatever the worker left is either nothing or the complete file, never a part of one.
    left: dict[str, Any] = {p.name: p.read_bytes() for p in path.parent.iterdir()}
    assert set(left) <= {path.name}
    generation.refresh_from_db()
    assert generation.standing is None
    assert list(owed_personas()) == [persona]

    call_command("reconcile", stdout=StringIO())
    assert built(persona, 2)
    assert_stamp_file_is_the_stored_stamp(persona, 2)
    if left:
        assert left[path.name] == Path(path).read_bytes()


def test_a_fan_out_whose_worker_was_killed_half_way_resumes_by_itself(
    celery_processes: CeleryProcesses,
) -> None:
    """VX-REL-5: a map change fans out in ranges; the worker process running the last is
    SIGKILLed after that range's recompute and stamps committed, before its cards. The task is
    redelivered (acks_late, reject on worker lost) and finishes the range itself: every persona
    reaches its new card with no reconciler running (there is no beat)."""
    agent = make_agent(make_owner())
    personas = [make_persona(agent) for _ in range(6)]
    staff = make_owner("staff")
    staff.is_superuser = True
    staff.save()
    worker = celery_processes.worker(pool="prefork", VIRGO_RECOMPUTE_BATCH_SIZE="3")

    with card_row_held(personas[-1]):
        with celery_publishing_to(celery_processes.broker.url):
            services.skill_save(
                actor=staff,
                slug="review-code",
                name="Review code",
                description="Claims and completes reviews.",
                required_verbs=["claim", "complete"],
                tags=["review"],
            )
        wait_until(a_backend_waits_to_publish_cards, what="the last range to publish its cards")
        assert all(built(persona, 2) for persona in personas[:-1])
        assert not Persona.objects.filter(skill_map_revision__lt=skill_map_revision()).exists()
        [child] = worker.children()
        os.kill(child, signal.SIGKILL)
        wait_until(
            lambda: "WorkerLostError" in worker.log.read_text(errors="replace"),
            what="the worker to notice its pool process died",
        )

    wait_until(
        lambda: all(built(persona, 2) for persona in personas),
        what="the redelivered range to publish the cards its killed run left",
    )
    assert list(owed_personas()) == []
    for persona in personas:
        assert_stamp_file_is_the_stored_stamp(persona, 2)
