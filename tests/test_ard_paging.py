"""The ARD registry's page tokens (cards.ard.paging): signed, bound to their query, stable
across processes and releases, and short enough to send back (VX-DISC-2, decision 220)."""

from typing import Any

import pytest
from django.core import signing
from rest_framework.test import APIClient

from cards.ard import paging
from tests.factories import make_agent, make_owner, make_persona
from tests.owner_clients import fresh_rate_limits, token_client  # noqa: F401 (autouse fixture)

pytestmark = pytest.mark.django_db

SEARCH, AGENTS = "/api/ard/search", "/api/ard/agents"
NOT_ISSUED = "pageToken: was not issued by this registry"
ANOTHER_QUERY = "pageToken: belongs to another query"
# A query whose digest is pinned below: mixed case, a repeated word, a non-ASCII one, and keys
# that JSON would write in another order unless sorted.
PINNED_SEARCH = {
    "query": {
        "text": "Quokka café QUOKKA",
        "filter": {
            "type": "application/a2a-agent-card+json",
            "publisher": ["ada-labs.example", "b.example"],
        },
    },
    "pageSize": 1,
}
PINNED_SEARCH_DIGEST = "55399252c0303b4d6bba431498813ac6"
PINNED_LIST = {"filter": "displayName = 'café'", "orderBy": "displayName", "pageSize": "1"}
PINNED_LIST_DIGEST = "55e01043c80eeee44d0f613e93da7a6d"


@pytest.fixture
def client() -> APIClient:
    return token_client(make_owner("reader"))


@pytest.fixture
def cafes() -> None:
    """Two entries every pinned query finds, so that its first page of one has a token."""
    ada = make_agent(make_owner("ada", organization="ada-labs.example"))
    for number in range(2):
        make_persona(ada, name=f"Quokka café {number}", discoverable=True)


def search(client: APIClient, body: dict[str, Any]) -> Any:
    return client.post(SEARCH, body, format="json")


def payload(token: str) -> Any:
    return signing.loads(token, salt=paging.SALT)


def test_a_page_tokens_query_digest_is_pinned(client: APIClient, cafes: None) -> None:
    """VX-DISC-2: a page token names its query by a digest, and a token issued before a restart
    or an upgrade must still be read by the next process or release (a client may be mid-walk
    through the pages). So the digest is a fixed function of the query, never of a process or
    a library's defaults: JSON with sorted keys, no spaces, ASCII escapes, the first 32 hex
    digits of its SHA-256, over the words as read (lower case, once each) and the filters. A
    change to any of that refuses every token in flight: the digests of two known queries are
    pinned here so that such a change is made on purpose."""
    token = search(client, PINNED_SEARCH).json()["pageToken"]
    assert payload(token)["q"] == PINNED_SEARCH_DIGEST
    listed = client.get(AGENTS, PINNED_LIST).json()
    assert [item["displayName"] for item in listed["items"]] == ["Quokka café 0"]
    assert payload(listed["pageToken"])["q"] == PINNED_LIST_DIGEST
    # And such a token is read back: the next page is the other entry.
    following = client.get(AGENTS, {**PINNED_LIST, "pageToken": listed["pageToken"]}).json()
    assert [item["displayName"] for item in following["items"]] == ["Quokka café 1"]


def test_a_tampered_or_foreign_token_is_refused_saying_which(
    client: APIClient, cafes: None
) -> None:
    """VX-DISC-2: a token whose signature fails was not issued here; one signed here for another
    query belongs to that query. Each is a 400 saying so."""
    token = search(client, PINNED_SEARCH).json()["pageToken"]
    tampered = token[:-2] + ("AA" if token[-2:] != "AA" else "BB")
    other = {**PINNED_SEARCH, "query": {"text": "quokka"}}
    for body, message in [
        ({**PINNED_SEARCH, "pageToken": tampered}, NOT_ISSUED),
        ({**PINNED_SEARCH, "pageToken": "not-a-token"}, NOT_ISSUED),
        ({**other, "pageToken": token}, ANOTHER_QUERY),
    ]:
        answer = search(client, body)
        assert answer.status_code == 400
        assert answer.json() == {
            "errorCode": "INVALID_ARGUMENT",
            "message": message,
            "field": "pageToken",
        }
    listed = client.get(AGENTS, PINNED_LIST).json()["pageToken"]
    for query in ({**PINNED_LIST, "orderBy": "displayName DESC"}, {**PINNED_LIST, "filter": ""}):
        answer = client.get(AGENTS, {**query, "pageToken": listed})
        assert answer.status_code == 400
        assert answer.json()["message"] == ANOTHER_QUERY


@pytest.mark.parametrize("after", [[1], [1, 2, 3], [1, "2"], [1, 2.0], None, "after", {}])
def test_a_signed_token_with_a_position_no_page_leaves_is_refused(
    client: APIClient, cafes: None, after: Any
) -> None:
    """VX-DISC-2: a page ends at a (sort key, persona key) pair; a token signed with this
    installation's key and bound to the query but holding anything else (a token of another
    shape, as another release might have issued) is a 400, never a 500."""
    token = search(client, PINNED_SEARCH).json()["pageToken"]
    forged = signing.dumps({**payload(token), "after": after}, salt=paging.SALT, compress=True)
    answer = search(client, {**PINNED_SEARCH, "pageToken": forged})
    assert answer.status_code == 400
    assert answer.json()["message"] == NOT_ISSUED


def test_a_token_holding_a_long_non_ascii_name_fits_the_token_bound(client: APIClient) -> None:
    """VX-DISC-2: listed by displayName, a token holds the last name of its page. A name is up
    to 120 characters, and JSON writes each CJK one as six (\\uXXXX): uncompressed, the token
    would pass the 1024 characters a pageToken may have (cards.ard.requests), and the next
    page could not be asked for. Compressed, it fits, and the walk reaches every entry."""
    agent = make_agent(make_owner("ada"))
    made = [
        "".join(chr(0x4E00 + (start + 7919 * n) % 20000) for n in range(120)) for start in (1, 2)
    ]
    for name in made:
        make_persona(agent, name=name, discoverable=True)
    query = {"orderBy": "displayName", "pageSize": "1"}
    first = client.get(AGENTS, query).json()
    assert len(first["pageToken"]) <= paging.MAX_TOKEN_LENGTH
    second = client.get(AGENTS, {**query, "pageToken": first["pageToken"]})
    assert second.status_code == 200, second.content
    walked = [item["displayName"] for item in (*first["items"], *second.json()["items"])]
    assert walked == sorted(made)
