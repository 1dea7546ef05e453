"""VX-OPS-6: the API enforces exactly what its OpenAPI schema states, and the schema states what
the API enforces. Each schemathesis finding of issue 13 is one test here.

400 names the field of a request that breaks a rule the schema states; 422 names the field of a
well-formed request the domain refuses (virgo/api.py).
"""

import json
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from personas.models import Agent, HumanSurface, Persona
from tests.factories import (
    REVIEWER_VERBS,
    address,
    make_agent,
    make_owner,
    make_persona,
    standing_verbs,
)
from tests.owner_clients import fresh_rate_limits, token_client  # noqa: F401 (autouse fixture)

pytestmark = pytest.mark.django_db

LISTS = ("/api/agents/", "/api/personas/", "/api/surfaces/", "/api/directory/")


@pytest.fixture
def owner() -> Any:
    return make_owner("ada")


@pytest.fixture
def client(owner: Any) -> APIClient:
    return token_client(owner)


def schema(client: APIClient) -> dict[str, Any]:
    response = client.get("/api/schema/?format=json")
    assert response.status_code == 200
    return json.loads(response.content)


def persona_body(of: Agent, **overrides: Any) -> dict[str, Any]:
    address("work/core/reviewer")
    return {
        "agent": of.pk,
        "name": "Reviewer",
        "system_prompt": "You review pull requests.",
        "verb_subset": standing_verbs("coder-deputy", *REVIEWER_VERBS),
        "queues": ["reviews"],
        "persona_class": "coder-deputy",
        "address": "work/core/reviewer",
        **overrides,
    }


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize("page_size", ["null", "1.1", "", "0", "-1", "101", "x"])
def test_a_page_size_the_schema_does_not_allow_is_a_400_naming_it(
    client: APIClient, path: str, page_size: str
) -> None:
    """VX-OPS-6: `page_size=null` or `1.1` was silently ignored (200 with the default size);
    now every value outside the schema's integer 1..100 is refused, naming page_size."""
    response = client.get(path, {"page_size": page_size})
    assert response.status_code == 400, response.content
    assert response.json() == {"page_size": ["must be one whole number from 1 to 100"]}


@pytest.mark.parametrize("path", LISTS)
def test_the_schema_states_the_page_size_bounds(client: APIClient, path: str) -> None:
    """VX-OPS-6: and the schema says so; the largest allowed size is served."""
    (parameter,) = [
        p for p in schema(client)["paths"][path]["get"]["parameters"] if p["name"] == "page_size"
    ]
    assert parameter["schema"] == {"type": "integer", "minimum": 1, "maximum": 100}
    assert client.get(path, {"page_size": "100"}).status_code == 200
    assert client.get(path, {"page_size": ["1", "2"]}).status_code == 400


@pytest.mark.parametrize("name", [0, 1.5, True, None, ["x"], {"x": 1}])
def test_a_number_is_not_an_agent_name(client: APIClient, name: object) -> None:
    """VX-OPS-6: `"name": 0` created an agent named "0" (201)."""
    response = client.post(
        "/api/agents/", {"name": name, "granted_verbs": [], "granted_queues": []}, format="json"
    )
    assert response.status_code == 400
    assert list(response.json()) == ["name"]
    assert not Agent.objects.exists()


def test_numbers_are_not_queue_names_or_bindings_or_persona_names(
    client: APIClient, owner: Any
) -> None:
    """VX-OPS-6: `granted_queues: [0]` was stored as ["0"]; a surface binding 0 registered "0"."""
    queues = client.post(
        "/api/agents/", {"name": "a", "granted_verbs": [], "granted_queues": [0]}, format="json"
    )
    assert queues.status_code == 400
    assert queues.json() == {"granted_queues": {"0": ["Not a valid string."]}}
    binding = client.post("/api/surfaces/", {"binding": 0}, format="json")
    assert binding.status_code == 400 and list(binding.json()) == ["binding"]
    assert not HumanSurface.objects.exists()
    agent = make_agent(owner)
    for field, value in (("name", 7), ("system_prompt", 7), ("queues", [7]), ("address", 7)):
        response = client.post("/api/personas/", persona_body(agent, **{field: value}), "json")
        assert response.status_code == 400, field
        assert list(response.json()) == [field]
    assert not Persona.objects.exists()


@pytest.mark.parametrize(
    ("value", "status"),
    [("", 400), ("not-a-uuid", 400), (7, 400), ("6f1c1b8e-3f5e-4a0e-9a57-2b7c6d8e9f01", 422)],
)
def test_owning_lead_must_be_a_uuid_of_a_lead_of_yours(
    client: APIClient, owner: Any, value: object, status: int
) -> None:
    """VX-OPS-6: `owning_lead: ""` was taken as null (201). Now what is not a uuid is a 400;
    a uuid of no persona of the caller's is a 422; both name owning_lead."""
    agent = make_agent(owner)
    response = client.post("/api/personas/", persona_body(agent, owning_lead=value), "json")
    assert response.status_code == status
    assert list(response.json()) == ["owning_lead"]
    assert not Persona.objects.exists()


@pytest.mark.parametrize("spelling", [str, float, lambda pk: True])
def test_agent_is_an_integer_id(client: APIClient, owner: Any, spelling: Any) -> None:
    """VX-OPS-6: the schema says integer; the id as a string or a float, and true (agent 1),
    each named the agent."""
    agent = make_agent(owner)
    response = client.post("/api/personas/", persona_body(agent, agent=spelling(agent.pk)), "json")
    assert response.status_code == 400
    assert list(response.json()) == ["agent"]


@pytest.mark.parametrize("value", ["true", "yes", 1, "on", None])
def test_discoverable_is_a_json_boolean(client: APIClient, owner: Any, value: object) -> None:
    """VX-OPS-6: "yes", 1 and "on" made a persona discoverable."""
    persona = make_persona(make_agent(owner))
    response = client.patch(f"/api/personas/{persona.uuid}/", {"discoverable": value}, "json")
    assert response.status_code == 400
    assert list(response.json()) == ["discoverable"]
    persona.refresh_from_db()
    assert persona.discoverable is False


def test_blank_strings_are_refused_where_the_schema_says_so_and_only_there(
    client: APIClient, owner: Any
) -> None:
    """VX-OPS-6: blank strings were refused where the schema allowed them (token username and
    password, names, queues). Now every string the API refuses blank has minLength 1 and a
    pattern asking for a visible character in the schema, and a field the schema lets be blank
    takes "" (description, self_description, label, graph_namespace)."""
    components = schema(client)["components"]["schemas"]
    token = components["TokenInput"]["properties"]
    assert token["username"]["minLength"] == 1 and token["username"]["pattern"]
    assert token["password"]["minLength"] == 1
    agent_input = components["AgentInput"]["properties"]
    assert agent_input["name"]["minLength"] == 1
    assert agent_input["granted_queues"]["items"]["minLength"] == 1
    assert "minLength" not in agent_input["self_description"]
    for body in ({"username": "", "password": "x"}, {"username": "ada", "password": ""}):
        assert APIClient().post("/api/auth/token/", body, format="json").status_code == 400
    blank_name = client.post(
        "/api/agents/", {"name": " \t", "granted_verbs": [], "granted_queues": []}, "json"
    )
    assert blank_name.status_code == 400 and list(blank_name.json()) == ["name"]
    agent = make_agent(owner)
    created = client.post(
        "/api/personas/", persona_body(agent, description="", graph_namespace=""), "json"
    )
    assert created.status_code == 202, created.content
    assert client.post("/api/surfaces/", {"binding": "teams:x", "label": ""}, "json").status_code
    assert client.patch(f"/api/agents/{agent.pk}/", {"self_description": ""}, "json").json()


def test_lengths_are_those_of_the_value_sent(client: APIClient) -> None:
    """VX-OPS-6: a name of 121 characters, two of them spaces, passed the schema's maxLength
    120 by being trimmed first. Nothing is trimmed now: the value stored is the value sent."""
    padded = " " + "n" * 119 + " "
    response = client.post(
        "/api/agents/", {"name": padded, "granted_verbs": [], "granted_queues": []}, "json"
    )
    assert response.status_code == 400 and list(response.json()) == ["name"]
    kept = client.post(
        "/api/agents/", {"name": " spaced ", "granted_verbs": [], "granted_queues": []}, "json"
    )
    assert kept.status_code == 201 and kept.json()["name"] == " spaced "


def test_lists_state_and_enforce_unique_items_and_their_choices(
    client: APIClient, owner: Any
) -> None:
    """VX-OPS-6: the schema says uniqueItems and the verb enum; a repeated queue and an
    unknown verb are 400s naming the field, not refusals of the domain."""
    agent_input = schema(client)["components"]["schemas"]["AgentInput"]["properties"]
    assert agent_input["granted_queues"]["uniqueItems"] is True
    assert agent_input["granted_verbs"]["uniqueItems"] is True
    repeated = client.post(
        "/api/agents/", {"name": "a", "granted_verbs": [], "granted_queues": ["q", "q"]}, "json"
    )
    assert repeated.status_code == 400 and list(repeated.json()) == ["granted_queues"]
    unknown = client.post(
        "/api/agents/", {"name": "a", "granted_verbs": ["fly"], "granted_queues": []}, "json"
    )
    assert unknown.status_code == 400 and list(unknown.json()) == ["granted_verbs"]


def test_nul_characters_are_stated_and_refused(client: APIClient) -> None:
    """VX-OPS-6: DRF refused a NUL in any string though the schema allowed it; the schema's
    pattern now excludes it."""
    label = schema(client)["components"]["schemas"]["SurfaceInput"]["properties"]["label"]
    assert label["oneOf"] == [
        {"type": "string", "default": "", "pattern": "^[^\\u0000]+$", "maxLength": 200},
        {"type": "string", "maxLength": 0},
    ]
    response = client.post("/api/surfaces/", {"binding": "teams:x", "label": "a\x00b"}, "json")
    assert response.status_code == 400 and list(response.json()) == ["label"]


def test_well_formed_refusals_of_the_domain_are_422_naming_the_field(
    client: APIClient, owner: Any
) -> None:
    """VX-OPS-6: a request that follows the schema is never a 400; what only the domain can
    refuse (another owner's agent, a verb outside the grant, an unregistered address) is a 422,
    and the schema documents it."""
    stranger = make_agent(make_owner("mallory"))
    agent = make_agent(owner, granted_verbs=["claim"], granted_queues=["reviews"])
    cases = {
        "agent": persona_body(stranger),
        "verb_subset": persona_body(agent, verb_subset=["claim", "create_for"]),
        "address": persona_body(agent, verb_subset=["claim"], address="work/core/nobody"),
    }
    for field, body in cases.items():
        response = client.post("/api/personas/", body, "json")
        assert response.status_code == 422, field
        assert field in response.json(), field
    assert "422" in schema(client)["paths"]["/api/personas/"]["post"]["responses"]
    assert not Persona.objects.exists()


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
@pytest.mark.parametrize("method", ["QUERY", "TRACE", "POST", "PROPFIND"])
def test_an_undeclared_method_on_a_probe_is_a_json_405(path: str, method: str) -> None:
    """VX-OPS-6: `QUERY /healthz` was answered with the 403 HTML page of Django's CSRF check;
    now any method but GET and HEAD is a JSON 405 with `Allow`."""
    response = Client().generic(method, path)
    assert response.status_code == 405
    assert response["Content-Type"] == "application/json"
    assert response["Allow"] == "GET, HEAD"
    assert response.json()["code"] == "method_not_allowed"


@pytest.mark.parametrize("path", ["/api/directory/", "/api/personas/", "/api/agents/"])
def test_an_anonymous_caller_gets_401_with_a_challenge_everywhere(path: str) -> None:
    """VX-OPS-6: an anonymous `/api/directory/` was a 403 without WWW-Authenticate while
    `/api/personas/` was a 401 with it; every authenticated endpoint now answers alike."""
    response = Client().get(path)
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Token"
    assert response["Content-Type"] == "application/json"


def test_the_directory_schema_names_the_token_first() -> None:
    """VX-OPS-6: the schema lists the token scheme first on every operation, as the API now
    tries it first."""
    owner = make_owner("grace")
    document = schema(token_client(owner))
    for item in document["paths"].values():
        for operation in item.values():
            security = operation.get("security", [])
            if {"tokenAuth": []} in security:
                assert security[0] == {"tokenAuth": []}
