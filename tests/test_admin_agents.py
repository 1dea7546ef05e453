"""The agent admin: owners manage their own agents' vended grants; others' are invisible."""

import re
from typing import Any

import pytest
from django.test import Client

from personas.catalogue import VERBS
from personas.models import Agent, AuditEvent, Persona
from tests.factories import REVIEWER_VERBS, make_agent, make_owner, make_persona, run_on_commit
from tests.owner_clients import form_data, fresh_rate_limits  # noqa: F401 (autouse fixture)

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/personas/agent/"
ADD = "/admin/personas/agent/add/"


def change_url(agent: Agent) -> str:
    return f"/admin/personas/agent/{agent.pk}/change/"


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def saving(page: Any) -> dict[str, Any]:
    return {**form_data(page, "agent_form"), "_save": "Save"}


def grant_of(agent: Agent) -> tuple[str, list[str], list[str]]:
    agent.refresh_from_db()
    return agent.name, agent.granted_verbs, agent.granted_queues


@pytest.fixture
def owner() -> Any:
    return make_owner("ada")


@pytest.fixture
def agent(owner: Any) -> Agent:
    return make_agent(
        owner, name="ada-bot", granted_verbs=[*REVIEWER_VERBS, "create_for"], granted_queues=["q"]
    )


@pytest.mark.parametrize("page", ["", "add/", "{pk}/change/", "{pk}/delete/", "{pk}/history/"])
def test_anonymous_visitors_are_sent_to_the_login_page(agent: Agent, page: str) -> None:
    """S9-AUTH-2"""
    response = Client().get(CHANGELIST + page.format(pk=agent.pk))
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_another_owner_neither_sees_nor_changes_the_agent(owner: Any, agent: Agent) -> None:
    """S9-AUTH-2: someone else's agent is absent from the list and "does not exist"."""
    mallory = signed_in(make_owner("mallory"))
    assert "ada-bot" not in mallory.get(CHANGELIST).content.decode()
    for page in ("change", "delete", "history"):
        response = mallory.get(f"{CHANGELIST}{agent.pk}/{page}/")
        assert response.status_code == 302
        assert response["Location"] == "/admin/"
    data = saving(signed_in(owner).get(change_url(agent)))
    data["name"] = "stolen"
    before = grant_of(agent)
    mallory.post(change_url(agent), data)
    mallory.post(f"{CHANGELIST}{agent.pk}/delete/", {"post": "yes"})
    mallory.post(
        CHANGELIST, {"action": "delete_selected", "_selected_action": [agent.pk], "post": "yes"}
    )
    assert grant_of(agent) == before


def test_a_moderator_reads_but_does_not_change_anothers_agent(owner: Any, agent: Agent) -> None:
    """S9-AUTH-2"""
    moderator = make_owner("moderator")
    moderator.is_superuser = True
    moderator.save()
    client = signed_in(moderator)
    page = client.get(change_url(agent))
    assert page.status_code == 200
    assert 'name="granted_verbs"' not in page.content.decode()
    data = saving(signed_in(owner).get(change_url(agent)))
    assert client.post(change_url(agent), data).status_code == 403


def test_the_grant_is_a_checkbox_list_of_the_whole_catalogue(owner: Any, agent: Agent) -> None:
    html = signed_in(owner).get(change_url(agent)).content.decode()
    offered = re.findall(r'<input type="checkbox" name="granted_verbs" value="([^"]+)"', html)
    assert sorted(offered) == sorted(verb.name for verb in VERBS)
    checked = re.findall(r'name="granted_verbs" value="([^"]+)"[^>]* checked', html)
    assert sorted(checked) == sorted([*REVIEWER_VERBS, "create_for"])


def test_the_owner_adds_an_agent_owned_by_them(owner: Any) -> None:
    client = signed_in(owner)
    data = saving(client.get(ADD))
    data.update(name="deploy-bot", granted_verbs=["claim", "trigger_webhook"], granted_queues="d")
    response = client.post(ADD, data)
    assert response.status_code == 302
    agent = Agent.objects.get(name="deploy-bot")
    assert (agent.owner, agent.granted_verbs, agent.granted_queues) == (
        owner,
        ["claim", "trigger_webhook"],
        ["d"],
    )


def test_service_errors_land_on_their_field_and_nothing_is_saved(owner: Any) -> None:
    """The service's refusal of a repeated queue is shown on granted_queues."""
    client = signed_in(owner)
    data = saving(client.get(ADD))
    data.update(name="twice", granted_verbs=["claim"], granted_queues="reviews\nreviews")
    response = client.post(ADD, data)
    assert response.status_code == 200
    assert "granted_queues" in response.context["adminform"].form.errors
    assert not Agent.objects.exists()


def test_a_duplicate_name_is_refused(owner: Any, agent: Agent) -> None:
    client = signed_in(owner)
    data = saving(client.get(ADD))
    data.update(name="ada-bot", granted_verbs=["claim"], granted_queues="q")
    response = client.post(ADD, data)
    assert response.status_code == 200
    assert "already exists" in str(response.context["adminform"].form.errors)
    assert Agent.objects.count() == 1


def test_narrowing_the_grant_in_the_admin_narrows_its_personas(owner: Any, agent: Agent) -> None:
    """S9-REC-4: a persona never stays above its agent's grant."""
    persona = make_persona(agent, verb_subset=[*REVIEWER_VERBS, "create_for"], queues=["q"])
    client = signed_in(owner)
    data = saving(client.get(change_url(agent)))
    data["granted_verbs"] = REVIEWER_VERBS
    with run_on_commit():
        assert client.post(change_url(agent), data).status_code == 302
    persona.refresh_from_db()
    assert persona.verb_subset == REVIEWER_VERBS
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.GRANT_NARROWED, actor=owner).exists()


def test_the_owner_deletes_an_agent_and_its_personas(owner: Any, agent: Agent) -> None:
    make_persona(agent, verb_subset=REVIEWER_VERBS, queues=["q"])
    client = signed_in(owner)
    delete = f"{CHANGELIST}{agent.pk}/delete/"
    assert client.get(delete).status_code == 200
    assert client.post(delete, {"post": "yes"}).status_code == 302
    assert not Agent.objects.exists()
    assert not Persona.objects.exists()


def test_the_owner_deletes_agents_with_the_bulk_action(owner: Any, agent: Agent) -> None:
    second = make_agent(owner, name="second")
    action = {
        "action": "delete_selected",
        "_selected_action": [agent.pk, second.pk],
        "post": "yes",
    }
    signed_in(owner).post(CHANGELIST, action)
    assert not Agent.objects.exists()
