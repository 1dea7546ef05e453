"""The verb->skill map in the admin: moderators edit it, other staff only read it."""

from typing import Any

import pytest
from django.test import Client

from personas.models import AuditEvent, Persona, Skill
from tests.factories import REVIEWER_VERBS, make_agent, make_owner, make_persona, run_on_commit
from tests.owner_clients import form_data, fresh_rate_limits  # noqa: F401 (autouse fixture)

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/personas/skill/"
ADD = "/admin/personas/skill/add/"


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def saving(page: Any) -> dict[str, Any]:
    return {**form_data(page, "skill_form"), "_save": "Save"}


def skill_ids(persona: Persona) -> set[str]:
    persona.refresh_from_db()
    return {skill["id"] for skill in persona.skills}


@pytest.fixture
def moderator() -> Any:
    user = make_owner("moderator")
    user.is_superuser = True
    user.save()
    return user


@pytest.fixture
def skill() -> Skill:
    return Skill.objects.get(slug="delegate-work")


def change_url(skill: Skill) -> str:
    return f"{CHANGELIST}{skill.pk}/change/"


def test_anonymous_visitors_are_sent_to_the_login_page(skill: Skill) -> None:
    """S9-AUTH-1"""
    for url in (CHANGELIST, ADD, change_url(skill)):
        response = Client().get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/admin/login/")


def test_owners_read_the_map_but_cannot_change_it(skill: Skill, moderator: Any) -> None:
    """S9-SKL-2: the authoritative map is editable by moderators only."""
    owner = signed_in(make_owner("ada"))
    assert "delegate-work" in owner.get(CHANGELIST).content.decode()
    page = owner.get(change_url(skill))
    assert page.status_code == 200
    assert 'name="required_verbs"' not in page.content.decode()
    assert owner.get(ADD).status_code == 403
    data = saving(signed_in(moderator).get(change_url(skill)))
    data["required_verbs"] = ["claim"]
    assert owner.post(change_url(skill), data).status_code == 403
    assert owner.post(f"{CHANGELIST}{skill.pk}/delete/", {"post": "yes"}).status_code == 403
    skill.refresh_from_db()
    assert skill.required_verbs == ["create_for"]


def test_a_moderators_change_to_the_map_recomputes_every_persona(
    skill: Skill, moderator: Any
) -> None:
    """S9-SKL-2, S9-SKL-3: a skill whose required verb is absent is not advertised; changing
    the map recomputes the personas it affects through the service's fan-out."""
    persona = make_persona(make_agent(make_owner("ada")), verb_subset=REVIEWER_VERBS)
    assert "delegate-work" not in skill_ids(persona)
    client = signed_in(moderator)
    data = saving(client.get(change_url(skill)))
    assert "slug" not in data
    data["required_verbs"] = ["claim"]
    with run_on_commit():
        assert client.post(change_url(skill), data).status_code == 302
    skill.refresh_from_db()
    assert skill.required_verbs == ["claim"]
    assert "delegate-work" in skill_ids(persona)
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.SKILL_MAP_CHANGED)
    assert (event.actor, event.data) == (moderator, {"skill": "delegate-work", "change": "saved"})


def test_a_moderator_adds_and_deletes_a_skill(moderator: Any) -> None:
    """S9-SKL-2, S9-SKL-3"""
    persona = make_persona(make_agent(make_owner("ada")), verb_subset=REVIEWER_VERBS)
    client = signed_in(moderator)
    data = saving(client.get(ADD))
    data.update(
        slug="close-todos",
        name="Close todos",
        description="Completes claimed todos.",
        required_verbs=["complete"],
        tags="todos",
    )
    with run_on_commit():
        assert client.post(ADD, data).status_code == 302
    assert "close-todos" in skill_ids(persona)
    created = Skill.objects.get(slug="close-todos")
    with run_on_commit():
        client.post(f"{CHANGELIST}{created.pk}/delete/", {"post": "yes"})
    assert not Skill.objects.filter(slug="close-todos").exists()
    assert "close-todos" not in skill_ids(persona)


def test_adding_an_existing_slug_is_refused_and_changes_nothing(
    skill: Skill, moderator: Any
) -> None:
    client = signed_in(moderator)
    data = saving(client.get(ADD))
    data.update(slug="delegate-work", name="Taken", description="x", required_verbs=["claim"])
    response = client.post(ADD, data)
    assert response.status_code == 200
    assert "slug" in response.context["adminform"].form.errors
    skill.refresh_from_db()
    assert (skill.name, skill.required_verbs) == ("Delegate work", ["create_for"])
    assert not AuditEvent.objects.exists()


def test_a_skill_needs_at_least_one_verb(moderator: Any) -> None:
    client = signed_in(moderator)
    data = saving(client.get(ADD))
    data.update(slug="nothing", name="Nothing", description="x")
    response = client.post(ADD, data)
    assert response.status_code == 200
    assert "required_verbs" in response.context["adminform"].form.errors
    assert not Skill.objects.filter(slug="nothing").exists()
