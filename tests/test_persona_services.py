import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from cards.models import PublishedCard
from personas import services
from personas.models import AuditEvent, Generation, Persona, PersonaClass
from tests.factories import (
    DEPLOYER_VERBS,
    REVIEWER_VERBS,
    make_agent,
    make_owner,
    make_persona,
    update_persona,
)

pytestmark = pytest.mark.django_db


def skill_ids(persona: Persona) -> list[str]:
    return [skill["id"] for skill in persona.skills]


def test_it_rejects_a_verb_subset_outside_the_grant_and_persists_nothing() -> None:
    """S9-SCN-2, S9-REC-4: an out-of-grant subset is rejected, naming the verbs; nothing saved."""
    owner = make_owner()
    agent = make_agent(owner, granted_verbs=REVIEWER_VERBS, granted_queues=["reviews"])
    with pytest.raises(ValidationError) as raised:
        make_persona(agent, verb_subset=[*REVIEWER_VERBS, "trigger_webhook"], queues=["deploys"])
    assert "trigger_webhook" in str(raised.value.message_dict["verb_subset"])
    assert "deploys" in str(raised.value.message_dict["queues"])
    assert not Persona.objects.exists()
    assert not Generation.objects.exists()


def test_it_rejects_an_update_outside_the_grant_and_keeps_the_persona() -> None:
    """S9-SCN-2: an update that exceeds the grant leaves the persona exactly as it was."""
    owner = make_owner()
    agent = make_agent(owner, granted_verbs=DEPLOYER_VERBS, granted_queues=["reviews"])
    persona = make_persona(agent)
    with pytest.raises(ValidationError):
        update_persona(persona, verb_subset=[*REVIEWER_VERBS, "create_for"])
    persona.refresh_from_db()
    assert persona.verb_subset == REVIEWER_VERBS
    assert persona.generation == 1


def test_skills_follow_the_subset_and_each_change_opens_a_generation() -> None:
    """S9-SCN-3, S9-SCN-4, S9-SKL-1, S9-SKL-3: create_for adds delegate-work; removing drops it."""
    owner = make_owner()
    persona = make_persona(make_agent(owner), persona_class=PersonaClass.PROJECT_LEAD)
    assert "delegate-work" not in skill_ids(persona)
    assert "work-todos" in skill_ids(persona)
    reviewer = list(persona.verb_subset)

    persona = update_persona(persona, verb_subset=[*reviewer, "create_for"])
    assert "delegate-work" in skill_ids(persona)
    assert persona.generation == 2

    persona = update_persona(persona, verb_subset=[v for v in reviewer if v != "claim"])
    assert "delegate-work" not in skill_ids(persona) and "work-todos" not in skill_ids(persona)
    assert persona.generation == 3
    assert list(persona.generations.values_list("number", flat=True)) == [3, 2, 1]
    assert PublishedCard.objects.get(persona=persona).generation == 3


def test_an_unchanged_update_keeps_the_generation() -> None:
    persona = make_persona(make_agent(make_owner()))
    persona = update_persona(persona, verb_subset=list(persona.verb_subset))
    assert persona.generation == 1


def test_narrowing_the_grant_narrows_personas_and_records_it() -> None:
    """S9-REC-4: a narrowed grant never leaves a persona above it."""
    owner = make_owner()
    agent = make_agent(owner)
    persona = make_persona(agent, verb_subset=[*REVIEWER_VERBS, "create_for"])
    services.agent_update(
        agent=agent, actor=owner, granted_verbs=REVIEWER_VERBS, granted_queues=["reviews"]
    )
    persona.refresh_from_db()
    assert persona.verb_subset == REVIEWER_VERBS
    assert "delegate-work" not in skill_ids(persona)
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.GRANT_NARROWED)
    assert event.data["removed_verbs"] == ["create_for"]


def test_only_the_owner_changes_a_persona() -> None:
    """S9-AUTH-2: another owner cannot update someone else's persona."""
    persona = make_persona(make_agent(make_owner()))
    with pytest.raises(PermissionDenied):
        services.persona_update(persona=persona, actor=make_owner(), name="Hijacked")


def test_a_moderator_may_delist_but_never_list() -> None:
    """S9-DISC-1: listing is the owner's explicit choice; a moderator may only delist."""
    owner = make_owner()
    persona = make_persona(make_agent(owner))
    moderator = make_owner("moderator")
    moderator.is_superuser = True
    moderator.save()
    with pytest.raises(PermissionDenied):
        services.persona_set_discoverable(
            persona=persona, actor=moderator, discoverable=True, via="test"
        )
    services.persona_set_discoverable(persona=persona, actor=owner, discoverable=True, via="test")
    services.persona_set_discoverable(
        persona=persona, actor=moderator, discoverable=False, via="test"
    )
    events = AuditEvent.objects.filter(kind=AuditEvent.Kind.DISCOVERABILITY).order_by("id")
    assert [(e.actor, e.data["from"], e.data["to"]) for e in events] == [
        (owner, False, True),
        (moderator, True, False),
    ]
