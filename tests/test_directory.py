"""GET /api/directory/: authenticated, advertised personas only, keyset pages, per-user limit."""

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from personas.models import Persona, PersonaClass
from personas.services import persona_set_discoverable
from tests.factories import REVIEWER_VERBS, make_agent, make_owner, make_persona, standing_verbs

pytestmark = pytest.mark.django_db

URL = "/api/directory/"


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def owner() -> Any:
    return make_owner("ada")


@pytest.fixture
def agent(owner: Any) -> Any:
    return make_agent(owner)


@pytest.fixture
def reader() -> Any:
    return make_owner("reader")


def session_client(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def token_client(user: Any) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def listed_ids(client: Client, url: str = URL) -> list[str]:
    response = client.get(url)
    assert response.status_code == 200, response.content
    return [entry["id"] for entry in json.loads(response.content)["results"]]


def walk(client: Client, url: str) -> tuple[list[str], int]:
    """Every id over every page, following the next links; and how many pages it took."""
    ids: list[str] = []
    pages = 0
    next_url: str | None = url
    while next_url:
        response = client.get(next_url)
        assert response.status_code == 200, response.content
        page = json.loads(response.content)
        ids += [entry["id"] for entry in page["results"]]
        next_url = page["next"]
        pages += 1
    return ids, pages


def test_anonymous_callers_are_refused(agent: Any) -> None:
    """S9-AUTH-3: the directory requires authentication; the refusal is JSON."""
    make_persona(agent, discoverable=True)
    response = Client().get(URL)
    assert response.status_code in (401, 403)
    assert response["Content-Type"] == "application/json"
    assert json.loads(response.content)["code"] == "not_authenticated"


def test_a_bad_token_is_refused(agent: Any) -> None:
    """S9-AUTH-3"""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert client.get(URL).status_code in (401, 403)


@pytest.mark.parametrize("sign_in", [session_client, token_client])
def test_it_lists_only_advertised_personas(sign_in: Any, agent: Any, reader: Any) -> None:
    """S9-DISC-1, S9-SCN-9, S9-AUTH-3: listed and standing personas appear; an unlisted one,
    or one whose generation does not stand, does not (session and token alike)."""
    listed = make_persona(agent, name="Listed", discoverable=True)
    unlisted = make_persona(agent, name="Unlisted", discoverable=False)
    failing = make_persona(agent, name="Failing", discoverable=True)
    Persona.objects.filter(pk=failing.pk).update(standing=False)
    ids = listed_ids(sign_in(reader))
    assert ids == [str(listed.uuid)]
    assert str(unlisted.uuid) not in ids


def test_an_unlisted_persona_is_absent_even_for_its_owner_whose_card_still_resolves(
    agent: Any, owner: Any
) -> None:
    """S9-SCN-9, S9-DISC-1: the directory is the owner's explicit choice; not listing keeps the
    persona out of it, while its well-known card still resolves for the owner."""
    unlisted = make_persona(agent, name="Unlisted", discoverable=False)
    client = session_client(owner)
    assert str(unlisted.uuid) not in listed_ids(client)
    card = client.get(f"/a/{unlisted.uuid}/.well-known/agent-card.json")
    assert card.status_code == 200
    assert json.loads(card.content)["name"] == "Unlisted"


def test_listing_and_delisting_is_the_owners_switch(agent: Any, owner: Any, reader: Any) -> None:
    """S9-DISC-1: a persona enters the directory when its owner lists it, and leaves when
    they delist it."""
    persona = make_persona(agent, discoverable=False)
    client = session_client(reader)
    assert listed_ids(client) == []
    persona_set_discoverable(persona=persona, actor=owner, discoverable=True, via="test")
    assert listed_ids(client) == [str(persona.uuid)]
    persona_set_discoverable(persona=persona, actor=owner, discoverable=False, via="test")
    assert listed_ids(client) == []


def test_an_entry_carries_id_name_description_skills_and_card_url(
    agent: Any, reader: Any, settings: Any
) -> None:
    """S9-DISC-1, S9-SKL-2: the derived skills (id and name), and the card URL built from
    VIRGO_PUBLIC_BASE_URL."""
    settings.VIRGO_PUBLIC_BASE_URL = "https://virgo.example.org"
    persona = make_persona(
        agent,
        name="Reviewer",
        description="",
        system_prompt="You review pull requests. Nothing else.",
        persona_class=PersonaClass.PROJECT_LEAD,
        verb_subset=standing_verbs(PersonaClass.PROJECT_LEAD, *REVIEWER_VERBS, "create_for"),
        discoverable=True,
    )
    [entry] = json.loads(session_client(reader).get(URL).content)["results"]
    assert {"id": "delegate-work", "name": "Delegate work"} in entry["skills"]
    assert entry == {
        "id": str(persona.uuid),
        "name": "Reviewer",
        "description": "You review pull requests.",
        "skills": [{"id": skill["id"], "name": skill["name"]} for skill in persona.skills],
        "card_url": f"https://virgo.example.org/a/{persona.uuid}/.well-known/agent-card.json",
    }


def test_keyset_pages_walk_every_persona_once_in_order(
    agent: Any, reader: Any, settings: Any
) -> None:
    """S9-DISC-1: the directory is bounded: cursor pages of the configured size."""
    settings.VIRGO_DIRECTORY_PAGE_SIZE = 2
    personas = [make_persona(agent, discoverable=True) for _ in range(5)]
    ids, pages = walk(session_client(reader), URL)
    assert ids == [str(p.uuid) for p in sorted(personas, key=lambda p: p.pk)]
    assert pages == 3


def test_page_size_is_bounded(agent: Any, reader: Any, settings: Any) -> None:
    """VX-OPS-6: a page size past the maximum, or one that is not a whole number, is a 400
    naming page_size, never quietly replaced by another size."""
    settings.VIRGO_DIRECTORY_PAGE_SIZE = 2
    settings.VIRGO_DIRECTORY_MAX_PAGE_SIZE = 3
    for _ in range(5):
        make_persona(agent, discoverable=True)
    client = session_client(reader)
    assert len(listed_ids(client, URL + "?page_size=3")) == 3
    assert len(listed_ids(client, URL + "?page_size=1")) == 1
    assert len(listed_ids(client)) == 2
    for bad in ("4", "nonsense", "0"):
        response = client.get(URL + "?page_size=" + bad)
        assert response.status_code == 400, bad
        assert response.json() == {"page_size": ["must be one whole number from 1 to 3"]}


def test_an_invalid_cursor_is_a_json_404(reader: Any) -> None:
    response = session_client(reader).get(URL + "?cursor=%21not-base64%21")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"


@pytest.mark.parametrize("sign_in", [session_client, token_client])
def test_a_page_costs_the_same_few_queries_at_any_size(
    sign_in: Any, agent: Any, reader: Any, django_assert_max_num_queries: Any
) -> None:
    """No N+1: authentication plus one query for the page, for 2 personas as for 30."""
    client = sign_in(reader)
    for _ in range(2):
        make_persona(agent, discoverable=True)
    with django_assert_max_num_queries(3):
        assert len(listed_ids(client)) == 2
    for _ in range(28):
        make_persona(agent, discoverable=True)
    with django_assert_max_num_queries(3):
        assert len(listed_ids(client)) == 30


def test_it_is_rate_limited_per_principal(agent: Any, reader: Any, settings: Any) -> None:
    """S9-RL-2: past VIRGO_DIRECTORY_RATE_LIMIT a user gets 429 with Retry-After, from any
    address; another user is unaffected."""
    settings.VIRGO_DIRECTORY_RATE_LIMIT = "3/m"
    client = session_client(reader)
    for _ in range(3):
        assert client.get(URL).status_code == 200
    limited = client.get(URL, REMOTE_ADDR="203.0.113.9")
    assert limited.status_code == 429
    assert 1 <= int(limited["Retry-After"]) <= 60
    assert json.loads(limited.content) == {
        "detail": "Too many directory requests; slow down.",
        "code": "rate_limited",
    }
    assert session_client(make_owner("other")).get(URL).status_code == 200
