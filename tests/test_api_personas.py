"""/api/personas/: owners manage their own personas; everyone else's are invisible."""

from typing import Any

import pytest
from rest_framework.test import APIClient

from personas import services
from personas.models import AuditEvent, Generation, Persona, PersonaClass
from tests.factories import (
    DEPLOYER_VERBS,
    REVIEWER_VERBS,
    address,
    make_agent,
    make_owner,
    make_persona,
    run_on_commit,
    standing_verbs,
)
from tests.owner_clients import fresh_rate_limits, token_client  # noqa: F401 (autouse fixture)

pytestmark = pytest.mark.django_db


def url(persona: Persona | None = None) -> str:
    return f"/api/personas/{persona.uuid}/" if persona else "/api/personas/"


def new_persona_body(agent_id: int, **overrides: Any) -> dict[str, Any]:
    address("work/core/reviewer")
    body: dict[str, Any] = {
        "agent": agent_id,
        "name": "Reviewer",
        "description": "Reviews pull requests.",
        "system_prompt": "You review pull requests. Be precise and kind.",
        "verb_subset": standing_verbs("coder-deputy", *REVIEWER_VERBS),
        "queues": ["reviews"],
        "persona_class": "coder-deputy",
        "address": "work/core/reviewer",
    }
    body.update(overrides)
    return body


def snapshot(persona: Persona) -> dict[str, Any]:
    persona.refresh_from_db()
    return {
        "name": persona.name,
        "verb_subset": persona.verb_subset,
        "queues": persona.queues,
        "skills": persona.skills,
        "generation": persona.generation,
        "discoverable": persona.discoverable,
    }


@pytest.fixture
def owner() -> Any:
    return make_owner("ada")


@pytest.fixture
def persona(owner: Any) -> Persona:
    return make_persona(make_agent(owner), name="Reviewer")


@pytest.fixture
def client(owner: Any) -> APIClient:
    return token_client(owner)


# Anonymous and other owners ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "detail"),
    [("get", False), ("post", False), ("get", True), ("put", True), ("patch", True),
     ("delete", True)],
)  # fmt: skip
def test_anonymous_callers_get_401_for_every_persona_endpoint(
    persona: Persona, method: str, detail: bool
) -> None:
    """S9-AUTH-1, S9-AUTH-2: every management endpoint requires authentication."""
    before = snapshot(persona)
    response = getattr(APIClient(), method)(
        url(persona if detail else None), {"name": "Anon"}, format="json"
    )
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert response["Content-Type"] == "application/json"
    assert snapshot(persona) == before


def test_another_owner_does_not_see_the_persona_in_the_list(persona: Persona) -> None:
    """S9-AUTH-2: another owner's list holds only their own personas."""
    mallory = make_owner("mallory")
    theirs = make_persona(make_agent(mallory), name="Mallory's")
    listed = token_client(mallory).get(url()).json()["results"]
    assert [item["uuid"] for item in listed] == [str(theirs.uuid)]


@pytest.mark.parametrize("method", ["get", "put", "patch", "delete"])
def test_another_owner_gets_404_on_the_persona_and_changes_nothing(
    persona: Persona, method: str
) -> None:
    """S9-AUTH-2: another owner's persona is invisible (404, no enumeration) and unchanged."""
    before = snapshot(persona)
    body = new_persona_body(persona.agent_id, name="Hijacked")
    del body["agent"]
    response = getattr(token_client(make_owner("mallory")), method)(
        url(persona), body, format="json"
    )
    assert response.status_code == 404
    assert response.json() == {"detail": "No Persona matches the given query."}
    assert snapshot(persona) == before


def test_another_owner_cannot_create_a_persona_on_someone_elses_agent(owner: Any) -> None:
    """S9-AUTH-2: an agent of another owner is as unknown as one that does not exist."""
    agent = make_agent(owner)
    response = token_client(make_owner("mallory")).post(
        url(), new_persona_body(agent.pk), format="json"
    )
    assert response.status_code == 422
    assert "does not exist" in response.json()["agent"][0]
    assert not Persona.objects.exists()


def test_an_unknown_persona_is_404_in_json(client: APIClient) -> None:
    for missing in ("00000000-0000-0000-0000-000000000000", "not-a-uuid"):
        response = client.get(f"/api/personas/{missing}/")
        assert response.status_code == 404
        assert response["Content-Type"] == "application/json"


# The owner ----------------------------------------------------------------------------------------


def test_an_owner_creates_a_persona_with_derived_skills_and_a_card_url(
    owner: Any, client: APIClient
) -> None:
    """S9-REC-1, S9-REC-2, S9-SKL-1: agent + authored prompt + subset; skills are derived (the
    grant itself waits for the owner's approval, VX-REV-1)."""
    agent = make_agent(owner)
    with run_on_commit():
        response = client.post(url(), new_persona_body(agent.pk), format="json")
    assert response.status_code == 202, response.json()
    assert "work-todos" in response.json()["diff"]["skills_added"]
    persona = Persona.objects.get(uuid=response.json()["persona"])
    with run_on_commit():
        services.proposal_approve(proposal=persona.proposals.get(), actor=owner)
    body = client.get(url(persona)).json()
    assert persona.agent == agent
    assert body["agent"] == agent.pk
    assert body["system_prompt"] == "You review pull requests. Be precise and kind."
    assert [skill["id"] for skill in body["skills"]] == response.json()["diff"]["skills_added"]
    assert body["generation"] == 2
    assert body["discoverable"] is False
    assert body["card_url"].endswith(f"/a/{persona.uuid}/.well-known/agent-card.json")


def test_a_prompt_must_be_authored(owner: Any, client: APIClient) -> None:
    """S9-REC-3: the system prompt is the owner's; a blank one is refused, never generated."""
    agent = make_agent(owner)
    response = client.post(url(), new_persona_body(agent.pk, system_prompt="  "), format="json")
    assert response.status_code == 400
    assert "system_prompt" in response.json()
    body = new_persona_body(agent.pk)
    del body["system_prompt"]
    assert "system_prompt" in client.post(url(), body, format="json").json()
    assert not Persona.objects.exists()


def test_the_owner_reads_lists_and_deletes_their_persona(
    persona: Persona, client: APIClient
) -> None:
    """S9-AUTH-2: the owner has every verb on their own persona."""
    assert client.get(url(persona)).json()["name"] == "Reviewer"
    assert [item["uuid"] for item in client.get(url()).json()["results"]] == [str(persona.uuid)]
    assert client.delete(url(persona)).status_code == 204
    assert not Persona.objects.filter(pk=persona.pk).exists()


def test_a_patch_of_the_subset_recomputes_the_skills(owner: Any, client: APIClient) -> None:
    """S9-SKL-3, S9-SCN-4, S9-SCN-3: adding create_for adds delegate-work (once the owner
    approves the widening); removing it, and then a reviewer verb, drops each skill at once."""
    persona = make_persona(make_agent(owner), persona_class=PersonaClass.PROJECT_LEAD)
    with run_on_commit():
        added = client.patch(
            url(persona), {"verb_subset": [*persona.verb_subset, "create_for"]}, format="json"
        )
    assert added.status_code == 202
    assert added.json()["diff"]["skills_added"] == ["delegate-work"]
    with run_on_commit():
        services.proposal_approve(proposal=persona.proposals.get(), actor=persona.agent.owner)
    approved = client.get(url(persona)).json()
    skills = {skill["id"] for skill in approved["skills"]}
    assert {"work-todos", "delegate-work"} <= skills
    assert approved["generation"] == 2
    with run_on_commit():
        removed = client.patch(url(persona), {"verb_subset": persona.verb_subset}, format="json")
    assert {skill["id"] for skill in removed.json()["skills"]} == skills - {"delegate-work"}
    without_claim = [verb for verb in persona.verb_subset if verb != "claim"]
    with run_on_commit():
        removed = client.patch(url(persona), {"verb_subset": without_claim}, format="json")
    assert {skill["id"] for skill in removed.json()["skills"]} == skills - {
        "delegate-work",
        "work-todos",
    }
    assert removed.json()["generation"] == 4


def test_put_replaces_what_the_persona_is_and_requires_its_scope(
    persona: Persona, client: APIClient
) -> None:
    narrower = [verb for verb in persona.verb_subset if verb not in ("claim", "complete")]
    body = new_persona_body(persona.agent_id, name="Renamed", verb_subset=narrower)
    del body["agent"]
    with run_on_commit():
        response = client.put(url(persona), body, format="json")
    assert response.status_code == 200
    assert response.json()["name"] == "Renamed"
    assert response.json()["verb_subset"] == narrower

    del body["verb_subset"]
    refused = client.put(url(persona), body, format="json")
    assert refused.status_code == 400
    assert "verb_subset" in refused.json()


def test_the_agent_of_a_persona_cannot_be_changed(owner: Any, persona: Persona) -> None:
    other_agent = make_agent(owner)
    response = token_client(owner).patch(url(persona), {"agent": other_agent.pk}, format="json")
    assert response.status_code == 400
    assert "cannot be changed" in response.json()["agent"][0]
    persona.refresh_from_db()
    assert persona.agent_id != other_agent.pk


def test_an_unregistered_address_is_refused_naming_it(persona: Persona, client: APIClient) -> None:
    before = snapshot(persona)
    response = client.patch(url(persona), {"address": "work/core/ghost"}, format="json")
    assert response.status_code == 422
    assert "work/core/ghost" in response.json()["address"][0]
    assert snapshot(persona) == before


def test_the_api_has_no_address_default(owner: Any, client: APIClient) -> None:
    """V1-FAC-3, V1-FAC-2: even on an installation with no persona yet and `root/secretary`
    registered, a create or a replace without an address is refused naming the field, and the
    schema says the address is required; the first-persona suggestion is `virgo persona add`'s
    alone."""
    agent = make_agent(owner)
    address("root/secretary")
    body = new_persona_body(agent.pk, persona_class="secretary")
    del body["address"]
    response = client.post(url(), body, format="json")
    assert response.status_code == 400
    assert set(response.json()) == {"address"}
    assert not Persona.objects.exists()
    persona = make_persona(agent, name="Reviewer")
    before = snapshot(persona)
    del body["agent"]
    replaced = client.put(url(persona), body, format="json")
    assert replaced.status_code == 400 and set(replaced.json()) == {"address"}
    assert snapshot(persona) == before
    schema = client.get("/api/schema/?format=json").json()["components"]["schemas"]
    for name in ("PersonaCreateInput", "PersonaInput"):
        assert "address" in schema[name]["required"], name
        assert "default" not in schema[name]["properties"]["address"], name


def test_unknown_fields_are_refused_naming_them(persona: Persona, client: APIClient) -> None:
    response = client.patch(url(persona), {"nickname": "x"}, format="json")
    assert response.status_code == 400
    assert response.json() == {"nickname": ["unknown field"]}


# Skills are never set by hand -------------------------------------------------------------------


@pytest.mark.parametrize("field", ["skills", "generation", "standing", "uuid", "card_url"])
def test_a_patch_of_a_derived_field_is_refused_naming_it(
    persona: Persona, client: APIClient, field: str
) -> None:
    """S9-SKL-1: skills (and the other derived fields) cannot be set through the API."""
    before = snapshot(persona)
    value: Any = [{"id": "delegate-work", "name": "Delegate work"}] if field == "skills" else 7
    response = client.patch(url(persona), {field: value, "name": "Renamed"}, format="json")
    assert response.status_code == 400
    assert list(response.json()) == [field]
    assert "read-only" in response.json()[field][0]
    assert snapshot(persona) == before


def test_a_create_that_declares_skills_is_refused_and_nothing_is_saved(
    owner: Any, client: APIClient
) -> None:
    """S9-SKL-1: hand-declared skills are a 400 naming the field, never silently dropped."""
    agent = make_agent(owner)
    response = client.post(
        url(), new_persona_body(agent.pk, skills=[{"id": "delegate-work"}]), format="json"
    )
    assert response.status_code == 400
    assert "derived from verb_subset" in response.json()["skills"][0]
    assert not Persona.objects.exists()


# Scope never exceeds the grant ------------------------------------------------------------------


def test_a_create_beyond_the_grant_is_refused_naming_the_values_and_nothing_persists(
    owner: Any, client: APIClient
) -> None:
    """S9-SCN-2, S9-REC-4: out-of-grant verbs and queues are named; no persona, no generation."""
    agent = make_agent(owner, granted_verbs=REVIEWER_VERBS, granted_queues=["reviews"])
    body = new_persona_body(
        agent.pk, verb_subset=[*REVIEWER_VERBS, "trigger_webhook"], queues=["reviews", "deploys"]
    )
    response = client.post(url(), body, format="json")
    assert response.status_code == 422
    errors = response.json()
    assert "trigger_webhook" in errors["verb_subset"][0]
    assert "deploys" in errors["queues"][0]
    assert "claim" not in errors["verb_subset"][0]
    assert not Persona.objects.exists()
    assert not Generation.objects.exists()


def test_an_update_beyond_the_grant_is_refused_and_the_persona_is_unchanged(
    owner: Any, client: APIClient
) -> None:
    """S9-SCN-2: an update exceeding the grant leaves the persona exactly as it was."""
    agent = make_agent(owner, granted_verbs=REVIEWER_VERBS, granted_queues=["reviews"])
    persona = make_persona(agent)
    before = snapshot(persona)
    response = client.patch(
        url(persona), {"verb_subset": ["claim", "create_for"], "name": "Bigger"}, format="json"
    )
    assert response.status_code == 422
    assert "create_for" in response.json()["verb_subset"][0]
    assert snapshot(persona) == before
    assert persona.generations.count() == 1


def test_reviewer_and_deployer_cannot_take_each_others_out_of_grant_scope(owner: Any) -> None:
    """S9-SCN-1: each persona is bounded by its own agent's grant; neither can take the other's
    verbs or queue through an update, and each keeps its own subset, queues and skills."""
    client = token_client(owner)
    review_bot = make_agent(owner, granted_verbs=REVIEWER_VERBS, granted_queues=["reviews"])
    deploy_bot = make_agent(owner, granted_verbs=DEPLOYER_VERBS, granted_queues=["deploys"])
    reviewer = make_persona(review_bot, name="Reviewer", queues=["reviews"])
    deployer = make_persona(
        deploy_bot,
        name="Deployer",
        verb_subset=DEPLOYER_VERBS,
        queues=["deploys"],
        address=address("work/core/deployer"),
    )
    shown = {item["name"]: item for item in client.get(url()).json()["results"]}
    assert shown["Reviewer"]["verb_subset"] == REVIEWER_VERBS
    assert shown["Reviewer"]["queues"] == ["reviews"]
    assert shown["Deployer"]["verb_subset"] == DEPLOYER_VERBS
    assert shown["Deployer"]["queues"] == ["deploys"]
    assert "deploy-releases" not in {s["id"] for s in shown["Reviewer"]["skills"]}
    assert "deploy-releases" in {s["id"] for s in shown["Deployer"]["skills"]}

    before = snapshot(reviewer)
    taking = client.patch(
        url(reviewer), {"verb_subset": DEPLOYER_VERBS, "queues": ["deploys"]}, format="json"
    )
    assert taking.status_code == 422
    assert "register_webhook, trigger_webhook" in taking.json()["verb_subset"][0]
    assert "deploys" in taking.json()["queues"][0]
    assert snapshot(reviewer) == before

    before = snapshot(deployer)
    taking = client.patch(url(deployer), {"queues": ["deploys", "reviews"]}, format="json")
    assert taking.status_code == 422
    assert "reviews" in taking.json()["queues"][0]
    assert snapshot(deployer) == before


# Discoverability --------------------------------------------------------------------------------


def test_the_owner_lists_and_delists_through_the_api_and_each_toggle_is_audited(
    owner: Any, persona: Persona, client: APIClient
) -> None:
    """S9-DISC-1: listing is the owner's explicit, audited choice."""
    assert client.patch(url(persona), {"discoverable": True}, format="json").json()["discoverable"]
    assert not client.patch(url(persona), {"discoverable": False}, format="json").json()[
        "discoverable"
    ]
    events = AuditEvent.objects.filter(kind=AuditEvent.Kind.DISCOVERABILITY).order_by("id")
    assert [(e.actor, e.data["from"], e.data["to"], e.data["via"]) for e in events] == [
        (owner, False, True, "api"),
        (owner, True, False, "api"),
    ]


def test_a_persona_created_discoverable_is_listed_by_its_owner(
    owner: Any, client: APIClient
) -> None:
    """S9-DISC-1: creating with discoverable=true is the owner's explicit choice, audited."""
    agent = make_agent(owner)
    response = client.post(url(), new_persona_body(agent.pk, discoverable=True), format="json")
    assert response.status_code == 202
    assert Persona.objects.get(uuid=response.json()["persona"]).discoverable is True
    assert AuditEvent.objects.get(kind=AuditEvent.Kind.DISCOVERABILITY).actor == owner


def test_a_moderator_may_delist_but_never_list_through_the_api(
    owner: Any, persona: Persona
) -> None:
    """S9-DISC-1: a moderator cannot list a persona for its owner; delisting is allowed."""
    moderator = make_owner("moderator")
    moderator.is_superuser = True
    moderator.save()
    client = token_client(moderator)
    refused = client.patch(url(persona), {"discoverable": True}, format="json")
    assert refused.status_code == 403
    assert not snapshot(persona)["discoverable"]

    token_client(owner).patch(url(persona), {"discoverable": True}, format="json")
    assert client.patch(url(persona), {"discoverable": False}, format="json").status_code == 200
    assert not snapshot(persona)["discoverable"]


def test_a_refused_discoverability_change_undoes_the_rest_of_the_request(
    persona: Persona,
) -> None:
    """S9-DISC-1, S9-AUTH-2: a moderator's edit of someone else's persona changes nothing."""
    moderator = make_owner("moderator")
    moderator.is_superuser = True
    moderator.save()
    before = snapshot(persona)
    response = token_client(moderator).patch(
        url(persona), {"name": "Moderated", "discoverable": False}, format="json"
    )
    assert response.status_code == 403
    assert snapshot(persona) == before


def test_the_list_is_paginated_with_a_capped_page_size(owner: Any, client: APIClient) -> None:
    agent = make_agent(owner)
    for number in range(3):
        make_persona(agent, name=f"P{number}")
    page = client.get(url(), {"page_size": 2}).json()
    assert len(page["results"]) == 2
    assert page["next"]
    rest = client.get(page["next"]).json()
    assert [item["name"] for item in rest["results"]] == ["P2"]


@pytest.mark.parametrize(
    "field, value",
    [
        (
            "provider",
            {"organization": "engines.example.org", "url": "https://engines.example.org/"},
        ),
        ("organization_domain", "engines.example.org"),
        ("identity_issuer", "https://id.example.org/"),
        ("identity_subject", "sub-ada"),
    ],
)
def test_no_persona_write_names_a_provider_or_an_identity(
    owner: Any, persona: Persona, client: APIClient, field: str, value: Any
) -> None:
    """VX-ID-4, VX-ID-1: through the API an owner names no provider and no identity of a
    persona, on create or on change: each is refused naming the field and nothing changes."""
    before = snapshot(persona)
    response = client.patch(url(persona), {field: value}, format="json")
    assert response.status_code == 400
    assert list(response.json()) == [field]
    assert snapshot(persona) == before
    body = new_persona_body(persona.agent_id, name="Impostor", **{field: value})
    response = client.post(url(), body, format="json")
    assert response.status_code == 400
    assert list(response.json()) == [field]
    assert not Persona.objects.filter(name="Impostor").exists()
