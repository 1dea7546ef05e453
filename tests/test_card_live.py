"""A real server on loopback, read by the A2A SDK's own card client."""

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver
from a2a.types import AgentCard
from a2a.utils.proto_utils import validate_proto_required_fields
from django.core.cache import cache

from cards.rendering import DISCOVERY_BINDING
from tests.factories import make_agent, make_owner, make_persona

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


async def resolve(base_url: str) -> AgentCard:
    async with httpx.AsyncClient() as client:
        return await A2ACardResolver(httpx_client=client, base_url=base_url).get_agent_card()


def test_the_sdk_card_resolver_fetches_and_parses_a_persona_card(live_server: Any) -> None:
    """S9-CARD-1, S9-WK-1, S9-SCN-7: A2ACardResolver, given the persona's base URL, finds the
    well-known card of exactly that persona and parses it into a complete AgentCard."""
    agent = make_agent(make_owner("ada", organization="engines.example.org"))
    reviewer = make_persona(agent, name="Reviewer", discoverable=True)
    make_persona(agent, name="Deployer", discoverable=True)

    card = asyncio.run(resolve(f"{live_server.url}/a/{reviewer.uuid}"))

    validate_proto_required_fields(card)
    assert card.name == "Reviewer"
    assert [skill.id for skill in card.skills] == [skill["id"] for skill in reviewer.skills]
    assert card.provider.organization == "engines.example.org"
    assert card.supported_interfaces[0].protocol_binding == DISCOVERY_BINDING
    assert card.supported_interfaces[0].url.endswith(f"/a/{reviewer.uuid}/")
    assert not card.capabilities.streaming


def test_a_real_client_revalidates_with_304_and_head(live_server: Any) -> None:
    """Over a real socket: the ETag round trip gives an empty 304, HEAD gives no body."""
    persona = make_persona(make_agent(make_owner()), discoverable=True)
    url = f"{live_server.url}/a/{persona.uuid}/.well-known/agent-card.json"
    with httpx.Client() as client:
        first = client.get(url)
        assert first.status_code == 200
        again = client.get(url, headers={"If-None-Match": first.headers["ETag"]})
        assert again.status_code == 304
        assert again.content == b""
        assert again.headers.get("Content-Length") != "0"
        head = client.head(url)
        assert head.status_code == 200
        assert head.content == b""
        assert head.headers["Content-Length"] == str(len(first.content))
