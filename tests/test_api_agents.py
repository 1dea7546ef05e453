"""/api/agents/: owners manage their own agents and vended grants; others' are invisible."""

from typing import Any

import pytest
from rest_framework.test import APIClient

from personas.models import Agent, AuditEvent, Persona
from tests.factories import REVIEWER_VERBS, make_agent, make_owner, make_persona, run_on_commit
from tests.owner_clients import fresh_rate_limits, token_client  # noqa: F401 (autouse fixture)

pytestmark = pytest.mark.django_db


def url(agent: Agent | None = None) -> str:
    return f"/api/agents/{agent.pk}/" if agent else "/api/agents/"


def grant_of(agent: Agent) -> tuple[str, list[str], list[str]]:
    agent.refresh_from_db()
    return agent.name, agent.granted_verbs, agent.granted_queues


@pytest.fixture
def owner() -> Any:
    return make_owner("ada")


@pytest.fixture
def agent(owner: Any) -> Agent:
    return make_agent(owner, name="review-bot", granted_verbs=["claim", "complete"])


@pytest.mark.parametrize(
    ("method", "detail"),
    [("get", False), ("post", False), ("get", True), ("put", True), ("patch", True),
     ("delete", True)],
)  # fmt: skip
def test_anonymous_callers_get_401_for_every_agent_endpoint(
    agent: Agent, method: str, detail: bool
) -> None:
    """S9-AUTH-2: agent management requires an authenticated owner."""
    before = grant_of(agent)
    response = getattr(APIClient(), method)(
        url(agent if detail else None), {"name": "anon"}, format="json"
    )
    assert response.status_code == 401
    assert grant_of(agent) == before
    assert Agent.objects.count() == 1


def test_another_owner_does_not_see_the_agent_in_the_list(agent: Agent) -> None:
    """S9-AUTH-2"""
    assert token_client(make_owner("mallory")).get(url()).json()["results"] == []


@pytest.mark.parametrize("method", ["get", "put", "patch", "delete"])
def test_another_owner_gets_404_on_the_agent_and_changes_nothing(agent: Agent, method: str) -> None:
    """S9-AUTH-2: someone else's agent is a 404 and stays as it was."""
    before = grant_of(agent)
    body = {"name": "stolen", "granted_verbs": ["claim"], "granted_queues": ["reviews"]}
    response = getattr(token_client(make_owner("mallory")), method)(url(agent), body, format="json")
    assert response.status_code == 404
    assert grant_of(agent) == before


def test_an_owner_creates_an_agent_owned_by_them(owner: Any) -> None:
    """S9-AUTH-2: the owner is always the caller."""
    response = token_client(owner).post(
        url(),
        {"name": "deploy-bot", "granted_verbs": ["claim"], "granted_queues": ["deploys"]},
        format="json",
    )
    assert response.status_code == 201, response.json()
    created = Agent.objects.get(pk=response.json()["id"])
    assert created.owner == owner
    assert response.json()["owner"] == owner.pk
    assert response["Location"].endswith(url(created))


def test_the_owner_cannot_be_given(owner: Any) -> None:
    response = token_client(owner).post(
        url(),
        {"name": "x", "granted_verbs": [], "granted_queues": [], "owner": make_owner().pk},
        format="json",
    )
    assert response.status_code == 400
    assert "read-only" in response.json()["owner"][0]
    assert not Agent.objects.exists()


def test_unknown_verbs_are_refused_naming_them(owner: Any) -> None:
    response = token_client(owner).post(
        url(),
        {"name": "x", "granted_verbs": ["claim", "launch_missiles"], "granted_queues": []},
        format="json",
    )
    assert response.status_code == 400
    assert "launch_missiles" in response.json()["granted_verbs"]["1"][0]
    assert not Agent.objects.exists()


def test_a_duplicate_agent_name_is_refused(owner: Any, agent: Agent) -> None:
    response = token_client(owner).post(
        url(),
        {"name": agent.name, "granted_verbs": ["claim"], "granted_queues": ["reviews"]},
        format="json",
    )
    assert response.status_code == 422
    assert "already exists" in str(response.json())
    assert Agent.objects.count() == 1


def test_narrowing_the_grant_narrows_the_personas_in_the_same_request(owner: Any) -> None:
    """S9-REC-4: after a narrowed grant no persona stays above it."""
    agent = make_agent(owner)
    persona = make_persona(agent, verb_subset=[*REVIEWER_VERBS, "create_for"])
    with run_on_commit():
        response = token_client(owner).patch(
            url(agent), {"granted_verbs": REVIEWER_VERBS}, format="json"
        )
    assert response.status_code == 200
    assert response.json()["granted_verbs"] == REVIEWER_VERBS
    persona.refresh_from_db()
    assert persona.verb_subset == REVIEWER_VERBS
    assert "delegate-work" not in {skill["id"] for skill in persona.skills}
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.GRANT_NARROWED, actor=owner).exists()


def test_put_requires_the_whole_grant(owner: Any, agent: Agent) -> None:
    response = token_client(owner).put(url(agent), {"name": "renamed"}, format="json")
    assert response.status_code == 400
    assert set(response.json()) == {"granted_verbs", "granted_queues"}
    full = {"name": "renamed", "granted_verbs": ["claim"], "granted_queues": ["reviews"]}
    assert token_client(owner).put(url(agent), full, format="json").status_code == 200
    assert grant_of(agent) == ("renamed", ["claim"], ["reviews"])


def test_deleting_an_agent_deletes_its_personas(owner: Any, agent: Agent) -> None:
    make_persona(agent, verb_subset=["claim"])
    assert token_client(owner).delete(url(agent)).status_code == 204
    assert not Agent.objects.exists()
    assert not Persona.objects.exists()
