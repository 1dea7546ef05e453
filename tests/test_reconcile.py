"""The reconciler pays every stamp and card the fast path left owed; queueing never fails a change.

A change made without running its on-commit callbacks is exactly a change whose task was lost:
the rows are committed, the task never ran.
"""

import logging
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from cards.models import PublishedCard
from personas import services
from personas.models import Generation, Persona
from settling.reconciliation import owed_personas, reconcile
from stamps.storage import stamp_path
from tests.factories import make_agent, make_owner, make_persona, run_on_commit
from tests.live import celery_publishing_to, free_port

pytestmark = pytest.mark.django_db


def change_losing_its_task(
    persona: Persona, verbs: list[str] | None = None, **changes: Any
) -> Persona:
    if verbs is not None:
        changes["verb_subset"] = verbs
    services.persona_update(persona=persona, actor=persona.agent.owner, **changes)
    persona.refresh_from_db()
    return persona


def without(persona: Persona, *verbs: str) -> list[str]:
    """The persona's verb subset less `verbs`: a narrowing change that still stands."""
    return [verb for verb in persona.verb_subset if verb not in verbs]


def current_generation(persona: Persona) -> Generation:
    return persona.generations.get(number=persona.generation)


def card_generation(persona: Persona) -> int:
    return PublishedCard.objects.get(persona=persona).generation


def test_a_change_whose_task_was_lost_is_owed_until_the_reconciler_builds_it() -> None:
    """S9-SKL-3, V1-STAMP-1: the owed stamp and card are built from the committed marker."""
    persona = make_persona(make_agent(make_owner()))
    assert list(owed_personas()) == []

    persona = change_losing_its_task(persona, without(persona, "complete"))
    assert persona.generation == 2
    assert current_generation(persona).standing is None
    assert card_generation(persona) == 1
    assert list(owed_personas()) == [persona]

    out = StringIO()
    call_command("reconcile", stdout=out)
    assert "1 personas owed work: 1 done, 0 failed" in out.getvalue()
    persona.refresh_from_db()
    generation = current_generation(persona)
    assert generation.standing is not None
    assert persona.standing == generation.standing
    assert card_generation(persona) == 2
    assert list(owed_personas()) == []


def test_reconciling_twice_does_nothing_the_second_time() -> None:
    persona = make_persona(make_agent(make_owner()))
    change_losing_its_task(persona, without(persona, "claim", "complete"))
    assert len(reconcile(grace=timedelta(0)).owed) == 1
    generation = current_generation(Persona.objects.get(pk=persona.pk))
    stamp_before = getattr(generation, "stamp", None)

    again = reconcile(grace=timedelta(0))
    assert again.owed == []
    generation.refresh_from_db()
    assert getattr(generation, "stamp", None) == stamp_before
    assert Generation.objects.filter(persona=persona).count() == 2


def test_only_the_current_generation_is_owed_a_stamp() -> None:
    """A generation superseded before its stamp was built is never the one a runtime reads."""
    persona = make_persona(make_agent(make_owner()))
    change_losing_its_task(persona, without(persona, "claim", "complete"))
    persona = change_losing_its_task(persona, without(persona, "claim", "complete", "list_todos"))
    reconcile(grace=timedelta(0))
    superseded = persona.generations.get(number=2)
    assert superseded.standing is None
    assert current_generation(persona).standing is not None
    assert card_generation(persona) == 3
    assert list(owed_personas()) == []


def test_the_grace_period_leaves_young_generations_to_their_task() -> None:
    persona = make_persona(make_agent(make_owner()))
    change_losing_its_task(persona, without(persona, "claim", "complete"))
    assert reconcile(grace=timedelta(hours=1)).owed == []
    assert list(owed_personas()) == [persona]
    assert reconcile(grace=timedelta(0)).owed == [persona.pk]


def test_every_owed_persona_is_built_across_batches() -> None:
    agent = make_agent(make_owner())
    personas = [make_persona(agent) for _ in range(5)]
    for persona in personas:
        change_losing_its_task(persona, without(persona, "claim", "complete"))
    report = reconcile(grace=timedelta(0), batch_size=2)
    assert report.owed == [persona.pk for persona in personas]
    assert report.done == 5
    assert all(card_generation(persona) == 2 for persona in personas)


def test_one_persona_that_cannot_be_built_stops_no_other(caplog: pytest.LogCaptureFixture) -> None:
    agent = make_agent(make_owner())
    broken, healthy = make_persona(agent), make_persona(agent)
    assert broken.standing
    for persona in (broken, healthy):
        # A change that keeps the persona standing, so that its stamp file is written.
        change_losing_its_task(persona, description="Reviews, more carefully.")
    # A file where the generation's directory must go: building its stamp raises OSError.
    blocker = Path(stamp_path(broken.uuid, 2)).parent
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("not a directory")

    with pytest.raises(CommandError, match=f"ids {broken.pk} "):
        call_command("reconcile", stdout=StringIO())
    assert card_generation(healthy) == 2
    assert card_generation(broken) == 1
    assert f"publishing persona {broken.pk} failed" in caplog.text
    assert list(owed_personas()) == [broken]

    blocker.unlink()
    assert reconcile(grace=timedelta(0)).done == 1
    assert list(owed_personas()) == []


def test_the_dry_run_lists_what_is_owed_and_builds_nothing() -> None:
    persona = make_persona(make_agent(make_owner()))
    persona = change_losing_its_task(persona, without(persona, "claim", "complete"))
    out = StringIO()
    call_command("reconcile", "--dry-run", stdout=out)
    assert f"owed: {persona.uuid} {persona.name!r} generation 2" in out.getvalue()
    assert "1 personas owed work" in out.getvalue()
    assert list(owed_personas()) == [persona]


@pytest.mark.parametrize("option", [["--grace", "-1"], ["--batch-size", "0"]])
def test_the_command_refuses_nonsense_options(option: list[str]) -> None:
    with pytest.raises(CommandError):
        call_command("reconcile", *option, stdout=StringIO())


def test_a_broker_that_is_down_costs_a_warning_never_the_change(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The change commits and the request goes on; the task is left to the reconciler."""
    persona = make_persona(make_agent(make_owner()))
    nobody_listens = f"redis://127.0.0.1:{free_port()}/0"
    with (
        caplog.at_level(logging.WARNING, logger="virgo.queueing"),
        celery_publishing_to(nobody_listens),
        run_on_commit() as callbacks,
    ):
        services.persona_update(
            persona=persona,
            actor=persona.agent.owner,
            verb_subset=without(persona, "claim", "complete"),
        )
    assert len(callbacks) == 1
    assert "could not queue personas.tasks.settle_persona" in caplog.text
    persona.refresh_from_db()
    assert persona.generation == 2
    assert list(owed_personas()) == [persona]
    reconcile(grace=timedelta(0))
    assert card_generation(persona) == 2
