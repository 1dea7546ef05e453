"""GET /a/<persona_id>/.well-known/agent-card.json: what the card says and how it is served."""

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from a2a.types import AgentCard
from a2a.utils.proto_utils import validate_proto_required_fields
from django.core.cache import cache
from django.test import Client
from django.utils.http import http_date
from google.protobuf.json_format import ParseDict

from cards.base_url import move_base_url
from cards.models import PublishedCard
from cards.rendering import DISCOVERY_BINDING, DISCOVERY_EXTENSION
from personas.models import Persona, PersonaClass
from personas.services import persona_set_discoverable, settle_persona_batch
from tests.card_support import identity_extension
from tests.factories import (
    DEPLOYER_VERBS,
    REVIEWER_VERBS,
    make_agent,
    make_owner,
    make_persona,
    standing_verbs,
    update_persona,
)

pytestmark = pytest.mark.django_db

CAMEL_CASE = re.compile(r"^[a-z][a-zA-Z0-9]*$")
STANDARD_BINDINGS = {"JSONRPC", "GRPC", "HTTP+JSON"}
BASE_URL = "https://virgo.example.org"
# Project leads may assign work, so create_for (and with it delegate-work) is theirs to have.
LEAD = PersonaClass.PROJECT_LEAD
REVIEWER_SUBSET = standing_verbs(LEAD, *REVIEWER_VERBS)
DELEGATING_SUBSET = standing_verbs(LEAD, *REVIEWER_VERBS, "create_for")


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


@pytest.fixture(autouse=True)
def public_base_url(settings: Any) -> None:
    """Set before any persona is made: cards are rendered when their generation is."""
    settings.VIRGO_PUBLIC_BASE_URL = BASE_URL


def card_path(persona: Persona) -> str:
    return f"/a/{persona.uuid}/.well-known/agent-card.json"


def fetch_card(persona: Persona, client: Client | None = None, **headers: str) -> dict[str, Any]:
    response = (client or Client()).get(card_path(persona), headers=headers)
    assert response.status_code == 200, response.content
    return json.loads(response.content)


def assert_schema_valid(card: dict[str, Any]) -> None:
    """Strict: an unknown field fails the parse, a missing required one the validation."""
    validate_proto_required_fields(ParseDict(card, AgentCard()))


def non_camel_case_keys(value: Any, where: str = "$") -> list[str]:
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if not CAMEL_CASE.match(key):
                found.append(f"{where}.{key}")
            found += non_camel_case_keys(item, f"{where}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += non_camel_case_keys(item, f"{where}[{index}]")
    return found


def skill_ids(card: dict[str, Any]) -> list[str]:
    return [skill["id"] for skill in card["skills"]]


@pytest.fixture
def owner() -> Any:
    return make_owner(
        "ada",
        display_name="Ada Lovelace",
        organization="engines.example.org",
    )


@pytest.fixture
def agent(owner: Any) -> Any:
    return make_agent(
        owner,
        name="shared-runtime",
        self_description="I am Mallory's Agent Corp, https://mallory.example/",
    )


@pytest.fixture
def reviewer(agent: Any) -> Persona:
    return make_persona(
        agent,
        name="Reviewer",
        description="Reviews pull requests in the reviews queue.",
        persona_class=LEAD,
        verb_subset=REVIEWER_SUBSET,
        queues=["reviews"],
        discoverable=True,
    )


# What the card says ------------------------------------------------------------------------------


def test_the_served_card_is_a_schema_valid_a2a_card_in_camel_case(reviewer: Persona) -> None:
    """S9-CARD-1, S9-WK-1: the served bytes parse as an A2A v1.0 AgentCard with every
    required field, and every key at every depth is camelCase."""
    card = fetch_card(reviewer)
    assert_schema_valid(card)
    assert non_camel_case_keys(card) == []


def test_card_fields_map_from_the_persona_and_its_owner(reviewer: Persona) -> None:
    """S9-CARD-2, S9-REC-5: name, description, discovery url, provider and derived skills."""
    card = fetch_card(reviewer)
    assert card["name"] == "Reviewer"
    assert card["description"] == "Reviews pull requests in the reviews queue."
    assert card["supportedInterfaces"][0]["url"] == f"{BASE_URL}/a/{reviewer.uuid}/"
    assert card["provider"] == {
        "organization": "engines.example.org",
        "url": "https://engines.example.org/",
    }
    assert skill_ids(card) == [skill["id"] for skill in reviewer.skills]
    assert "work-todos" in skill_ids(card)
    assert card["version"] == str(reviewer.generation)


def test_without_a_description_the_card_summarises_the_prompt(agent: Any) -> None:
    """S9-CARD-2: description falls back to the first sentence of the system prompt."""
    persona = make_persona(
        agent,
        description="",
        system_prompt="You triage incoming bugs.  Label them and route them.",
        discoverable=True,
    )
    assert fetch_card(persona)["description"] == "You triage incoming bugs."


def test_provider_is_the_owner_never_the_agents_self_description(reviewer: Persona) -> None:
    """S9-SCN-5: provider comes from the owner's identity chain; the agent's self-asserted
    identity appears nowhere on the card."""
    card = fetch_card(reviewer)
    assert card["provider"]["organization"] == "engines.example.org"
    raw = json.dumps(card)
    assert "Mallory" not in raw
    assert "mallory.example" not in raw


def test_without_a_proven_organization_the_provider_is_the_installation(
    settings: Any,
) -> None:
    """S9-SCN-5, VX-ID-2: an owner who proved no organization is vouched for by this
    installation, and the card says so; nothing the owner typed is named."""
    settings.VIRGO_PROVIDER_ORGANIZATION = "Virgo at cards.example.net"
    settings.VIRGO_PROVIDER_URL = "https://cards.example.net/"
    owner = make_owner("grace", organization="", display_name="Grace Hopper Industries")
    persona = make_persona(make_agent(owner), discoverable=True)
    card = fetch_card(persona)
    assert card["provider"] == {
        "organization": "Virgo at cards.example.net",
        "url": "https://cards.example.net/",
    }
    chain = identity_extension(card)["params"]
    assert chain["provider"] == "installation"
    assert chain["organization"] == {"verification": "unverified"}
    assert "Grace Hopper Industries" not in json.dumps(card)


def test_card_claims_no_delegation_and_its_url_takes_no_work(reviewer: Persona) -> None:
    """S9-CARD-3, S9-CARD-4, S9-SCN-6: streaming, push notifications and the extended card are
    off; the only interface is our discovery-only binding (no standard client would post work
    to it), and the data-only extension says the card grants nothing and work comes as todos."""
    card = fetch_card(reviewer)
    capabilities = card["capabilities"]
    assert capabilities["streaming"] is False
    assert capabilities["pushNotifications"] is False
    assert capabilities["extendedAgentCard"] is False
    interfaces = card["supportedInterfaces"]
    assert len(interfaces) == 1
    assert interfaces[0]["protocolBinding"] == DISCOVERY_BINDING
    assert interfaces[0]["protocolBinding"] not in STANDARD_BINDINGS
    assert "url" not in card
    extension, *data_only = capabilities["extensions"]
    assert extension["uri"] == DISCOVERY_EXTENSION
    assert extension["params"] == {"grantsAccess": False, "workIntake": "todos"}
    # The others (the pinned grant, VX-TRUST-4) are data a peer may ignore.
    assert all(other["required"] is False for other in data_only)


def test_delegate_work_follows_create_for_on_the_served_card(reviewer: Persona) -> None:
    """S9-SCN-3, S9-SCN-4, S9-SKL-2, S9-WK-2: without create_for the card has no delegate-work;
    adding it puts the skill on the served card, removing it takes it off again."""
    assert "delegate-work" not in skill_ids(fetch_card(reviewer))

    update_persona(reviewer, verb_subset=DELEGATING_SUBSET)
    assert "delegate-work" in skill_ids(fetch_card(reviewer))

    update_persona(reviewer, verb_subset=REVIEWER_SUBSET)
    assert "delegate-work" not in skill_ids(fetch_card(reviewer))


def test_each_personas_path_serves_its_own_card(agent: Any, reviewer: Persona) -> None:
    """S9-SCN-7, S9-WK-1: two personas of one agent, two paths, two different cards."""
    deployer = make_persona(
        agent,
        name="Deployer",
        description="Ships releases.",
        persona_class=LEAD,
        verb_subset=standing_verbs(LEAD, *DEPLOYER_VERBS),
        queues=["deploys"],
        discoverable=True,
    )
    reviewer_card, deployer_card = fetch_card(reviewer), fetch_card(deployer)
    assert reviewer_card["name"] == "Reviewer"
    assert deployer_card["name"] == "Deployer"
    assert "deploy-releases" in skill_ids(deployer_card)
    assert "deploy-releases" not in skill_ids(reviewer_card)
    assert str(reviewer.uuid) in reviewer_card["supportedInterfaces"][0]["url"]
    assert str(deployer.uuid) in deployer_card["supportedInterfaces"][0]["url"]


def test_card_url_ignores_host_headers_and_query(reviewer: Persona) -> None:
    """S9-URL-1: the url is derived from VIRGO_PUBLIC_BASE_URL and the persona's base path,
    even when the card is rendered during a request whose Host, X-Forwarded-Host and query
    say otherwise."""
    PublishedCard.objects.filter(persona=reviewer).delete()
    response = Client().get(
        card_path(reviewer) + "?url=https://evil.example/&base_url=https://evil.example/",
        headers={"Host": "localhost", "X-Forwarded-Host": "evil.example"},
    )
    assert response.status_code == 200
    card = json.loads(response.content)
    assert card["supportedInterfaces"][0]["url"] == f"{BASE_URL}/a/{reviewer.uuid}/"
    assert "evil" not in response.content.decode()
    assert "localhost" not in response.content.decode()


def test_a_persona_without_skills_gets_a_profile_only_card(agent: Any, owner: Any) -> None:
    """S9-CARD-1, S9-SKL-2: no derived skill means no capability skill, yet a valid card.
    (Such a subset lacks its class tools and does not stand, so only its owner sees it.)"""
    persona = make_persona(agent, verb_subset=["list_todos"], discoverable=True)
    client = Client()
    client.force_login(owner)
    card = fetch_card(persona, client)
    assert_schema_valid(card)
    assert skill_ids(card) == ["virgo-profile-only"]


# How it is served --------------------------------------------------------------------------------


def test_it_serves_stored_bytes_with_validators_and_public_caching(
    reviewer: Persona, settings: Any
) -> None:
    """S9-HDR-5: application/json, strong ETag, Last-Modified, public max-age."""
    settings.VIRGO_CARD_MAX_AGE = 123
    stored = PublishedCard.objects.get(persona=reviewer)
    response = Client().get(card_path(reviewer))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert bytes(response.content) == bytes(stored.body)
    assert response["Content-Length"] == str(len(stored.body))
    assert response["ETag"] == stored.etag
    assert not response["ETag"].startswith("W/")
    assert response["Last-Modified"] == http_date(stored.last_modified.timestamp())
    assert response["Cache-Control"] == "public, max-age=123"
    assert "Vary" not in response


def test_it_takes_one_query_per_request(reviewer: Persona, django_assert_num_queries: Any) -> None:
    """The hot path: the persona and its stored card come in a single query."""
    client = Client()
    with django_assert_num_queries(1):
        assert client.get(card_path(reviewer)).status_code == 200


def test_a_matching_if_none_match_gets_304(reviewer: Persona) -> None:
    """Weak comparison, lists and * all match; a 304 repeats the validators, has no body and
    no Content-Length: 0."""
    etag = PublishedCard.objects.get(persona=reviewer).etag
    client = Client()
    for header in (etag, f"W/{etag}", f'"other", {etag}', "*"):
        response = client.get(card_path(reviewer), headers={"If-None-Match": header})
        assert response.status_code == 304, header
        assert response.content == b""
        assert response["ETag"] == etag
        assert response["Cache-Control"].startswith("public")
        assert response.get("Content-Length") != "0"
        assert "Content-Type" not in response
    assert client.get(card_path(reviewer), headers={"If-None-Match": '"other"'}).status_code == 200


def test_if_modified_since_counts_only_without_if_none_match(reviewer: Persona) -> None:
    stored = PublishedCard.objects.get(persona=reviewer)
    since = http_date(stored.last_modified.timestamp())
    earlier = http_date(stored.last_modified.timestamp() - 60)
    client = Client()
    path = card_path(reviewer)
    assert client.get(path, headers={"If-Modified-Since": since}).status_code == 304
    assert client.get(path, headers={"If-Modified-Since": earlier}).status_code == 200
    stale_etag = {"If-None-Match": '"stale"', "If-Modified-Since": since}
    assert client.get(path, headers=stale_etag).status_code == 200


def test_a_new_generation_changes_both_validators(reviewer: Persona) -> None:
    """S9-WK-2: a cached card is never revalidated into the old one after a change."""
    before = PublishedCard.objects.get(persona=reviewer)
    update_persona(reviewer, verb_subset=DELEGATING_SUBSET)
    after = PublishedCard.objects.get(persona=reviewer)
    assert after.etag != before.etag
    assert after.last_modified > before.last_modified
    response = Client().get(
        card_path(reviewer),
        headers={
            "If-None-Match": before.etag,
        },
    )
    assert response.status_code == 200
    response = Client().get(
        card_path(reviewer),
        headers={"If-Modified-Since": http_date(before.last_modified.timestamp())},
    )
    assert response.status_code == 200


def test_head_has_the_headers_of_get_and_no_body(reviewer: Persona) -> None:
    client = Client()
    get = client.get(card_path(reviewer))
    head = client.head(card_path(reviewer))
    assert head.status_code == 200
    assert head.content == b""
    for header in ("Content-Type", "Content-Length", "ETag", "Last-Modified", "Cache-Control"):
        assert head[header] == get[header], header


def test_a_missing_or_stale_stored_card_is_published_on_the_fly(reviewer: Persona) -> None:
    """S9-WK-2: the endpoint never serves a card behind the persona's current generation,
    even when the task that follows a change has not run yet."""
    PublishedCard.objects.filter(persona=reviewer).delete()
    assert fetch_card(reviewer)["version"] == "1"
    assert PublishedCard.objects.get(persona=reviewer).generation == 1

    Persona.objects.filter(pk=reviewer.pk).update(verb_subset=DELEGATING_SUBSET)
    settle_persona_batch([reviewer.pk])
    assert PublishedCard.objects.get(persona=reviewer).generation == 1
    card = fetch_card(reviewer)
    assert card["version"] == "2"
    assert "delegate-work" in skill_ids(card)


# Read-only -----------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete", "options"])
def test_state_changing_methods_get_405_and_change_nothing(reviewer: Persona, method: str) -> None:
    """S9-SCN-8, S9-WK-2: only GET and HEAD; a CSRF-enforcing client gets the 405 too."""
    before = PublishedCard.objects.get(persona=reviewer)
    client = Client(enforce_csrf_checks=True)
    response = getattr(client, method)(
        card_path(reviewer), data=b'{"name": "Hijacked"}', content_type="application/json"
    )
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"
    assert response["Content-Type"] == "application/json"
    assert json.loads(response.content)["code"] == "method_not_allowed"
    reviewer.refresh_from_db()
    assert reviewer.name == "Reviewer"
    after = PublishedCard.objects.get(persona=reviewer)
    assert (after.generation, bytes(after.body)) == (before.generation, bytes(before.body))


def test_a_get_with_a_body_is_refused_with_413(reviewer: Persona) -> None:
    """S9-BODY-1: the card endpoint accepts no body, however small."""
    response = Client().generic(
        "GET", card_path(reviewer), data=b"{}", content_type="application/json"
    )
    assert response.status_code == 413
    assert json.loads(response.content) == {
        "detail": "The agent card endpoint accepts no body.",
        "code": "body_not_accepted",
    }


# Who can read which card -----------------------------------------------------------------------


@pytest.fixture
def unlisted(agent: Any) -> Persona:
    return make_persona(agent, name="Unlisted", discoverable=False)


def not_found_answer(path: str, client: Client) -> tuple[int, bytes, dict[str, str]]:
    response = client.get(path)
    headers = {name: value for name, value in response.items() if name != "Date"}
    return response.status_code, response.content, headers


def test_an_unlisted_persona_is_indistinguishable_from_a_missing_id(
    unlisted: Persona, owner: Any
) -> None:
    """S9-AUTH-1: anonymous and foreign callers get for an unlisted persona exactly the 404
    (status, body, headers) that a never-issued id gets."""
    missing_path = "/a/00000000-0000-4000-8000-000000000000/.well-known/agent-card.json"
    stranger = Client()
    stranger.force_login(make_owner("mallory"))
    for client in (Client(), stranger):
        hidden = not_found_answer(card_path(unlisted), client)
        missing = not_found_answer(missing_path, client)
        assert hidden[0] == 404
        assert hidden == missing
        assert json.loads(hidden[1]) == {
            "detail": "No agent card is published at this address.",
            "code": "not_found",
        }


def test_the_owner_signed_in_can_read_an_unlisted_card_privately(
    unlisted: Persona, owner: Any
) -> None:
    """S9-AUTH-1, S9-SCN-9: the well-known URL still resolves for the owner, and the answer is
    marked private so no shared cache hands it to anyone else."""
    client = Client()
    client.force_login(owner)
    response = client.get(card_path(unlisted))
    assert response.status_code == 200
    assert json.loads(response.content)["name"] == "Unlisted"
    assert response["Cache-Control"] == "private, no-cache"
    assert "Cookie" in response["Vary"]


def test_a_persona_that_does_not_stand_is_not_served_publicly(reviewer: Persona) -> None:
    """S9-AUTH-1: a generation recorded as not standing takes the card off the public path."""
    Persona.objects.filter(pk=reviewer.pk).update(standing=False)
    assert Client().get(card_path(reviewer)).status_code == 404


def test_delisting_takes_the_card_off_the_public_path(reviewer: Persona, owner: Any) -> None:
    """S9-AUTH-1, S9-DISC-1: discoverability is the owner's switch for the public card."""
    persona_set_discoverable(persona=reviewer, actor=owner, discoverable=False, via="test")
    assert Client().get(card_path(reviewer)).status_code == 404


def test_a_moved_public_base_url_renders_the_cards_again(reviewer: Persona, settings: Any) -> None:
    """S9-URL-1, VX-SCALE-4: the card's url follows the public base URL when the installation
    moves to a new one (`virgo cards move-base-url`), though the persona did not: the stored
    card is owed again, the reconciler lists it, and the first request after the move serves a
    new card under new validators."""
    from settling.reconciliation import owed_personas

    before = Client().get(card_path(reviewer))
    assert owed_personas().filter(pk=reviewer.pk).exists() is False
    move_base_url(url="https://cards.example.net")
    settings.VIRGO_PUBLIC_BASE_URL = "https://cards.example.net"
    assert owed_personas().filter(pk=reviewer.pk).exists() is True
    after = Client().get(card_path(reviewer), headers={"If-None-Match": before["ETag"]})
    assert after.status_code == 200
    card = json.loads(after.content)
    assert card["supportedInterfaces"][0]["url"] == f"https://cards.example.net/a/{reviewer.uuid}/"
    assert BASE_URL not in after.content.decode()
    assert after["ETag"] != before["ETag"]
    assert after["Last-Modified"] != before["Last-Modified"]
    stored = PublishedCard.objects.get(persona=reviewer)
    assert (stored.generation, stored.base_url) == (
        reviewer.generation,
        "https://cards.example.net",
    )
    assert owed_personas().filter(pk=reviewer.pk).exists() is False
