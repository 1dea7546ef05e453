"""A persona as an ARD catalog entry (cards.ard.entries), in full: every key and value a client
reads, for a persona whose owner proved an identity and an organization and for one whose
owner proved neither (VX-DISC-3)."""

from typing import Any
from urllib.parse import urlsplit

import pytest
from django.conf import settings as django_settings
from rest_framework.test import APIClient

from personas.models import Generation, Persona
from tests.factories import make_agent, make_owner, make_persona
from tests.owner_clients import fresh_rate_limits, token_client  # noqa: F401 (autouse fixture)

pytestmark = pytest.mark.django_db

AGENTS = "/api/ard/agents"
A2A = "application/a2a-agent-card+json"
HOST = urlsplit(django_settings.VIRGO_PUBLIC_BASE_URL).hostname
SKILLS = [
    {"id": "b-skill", "name": "B", "description": "b", "tags": ["zeta", "alpha"]},
    {"id": "a-skill", "name": "A", "description": "a", "tags": ["alpha"]},
]


@pytest.fixture
def client() -> APIClient:
    return token_client(make_owner("reader"))


def listed(client: APIClient) -> dict[str, dict[str, Any]]:
    response = client.get(AGENTS)
    assert response.status_code == 200, response.content
    return {item["displayName"]: item for item in response.json()["items"]}


def current(persona: Persona) -> Generation:
    return Generation.objects.get(persona=persona, number=persona.generation)


def test_an_entry_of_a_proven_owner_and_organization_in_full(client: APIClient) -> None:
    """VX-DISC-3: the identifier under the proven domain; tags once each, sorted; capabilities
    in the card's order; the version is the generation; updatedAt in UTC with a Z; metadata
    from the identity chain; a trust manifest whose attestations are the pinned grant and each
    proven part of the chain, and whose provenance is the stamp this generation stands on."""
    ada = make_agent(make_owner("ada", organization="ada-labs.example"))
    keeper = make_persona(
        ada, name="Quokka Keeper", description="Feeds every quokka.", discoverable=True
    )
    Persona.objects.filter(pk=keeper.pk).update(
        skills=SKILLS, updated_at="2026-01-02T03:04:05.000006Z"
    )
    generation = current(keeper)
    urn = f"urn:air:ada-labs.example:virgo-persona:{keeper.uuid}"
    card = {"uri": keeper.card_url, "mediaType": A2A}
    assert listed(client)["Quokka Keeper"] == {
        "identifier": urn,
        "displayName": "Quokka Keeper",
        "type": A2A,
        "url": keeper.card_url,
        "description": "Feeds every quokka.",
        "tags": ["alpha", "zeta"],
        "capabilities": ["b-skill", "a-skill"],
        "version": str(keeper.generation),
        "updatedAt": "2026-01-02T03:04:05.000006Z",
        "metadata": {
            "virgo.provider": "organization",
            "virgo.owner.verification": "oidc",
            "virgo.owner.issuer": "https://id.example.org/",
            "virgo.organization.domain": "ada-labs.example",
            "virgo.organization.verification": "operator",
        },
        "trustManifest": {
            "identity": urn,
            "identityType": "other",
            "attestations": [
                {"type": "pinned-grant", **card, "digest": generation.grant_digest},
                {"type": "owner-oidc", **card},
                {"type": "organization-operator", **card},
            ],
            "provenance": [
                {
                    "relation": "derivedFrom",
                    "sourceId": f"{urn}:generation:{keeper.generation}",
                    "sourceDigest": "sha256:" + generation.stamp_hash,
                }
            ],
        },
    }


def test_an_entry_of_an_unproven_owner_in_full(client: APIClient) -> None:
    """VX-DISC-3: no proven domain, so the installation publishes it; no proven part of the
    chain, so the pinned grant is its only attestation; the description falls back to the
    prompt's first sentence, as on the card."""
    grace = make_agent(make_owner("grace", organization="", oidc=False))
    captain = make_persona(
        grace,
        name="Release Captain",
        system_prompt="You ship releases. Nothing else.",
        discoverable=True,
    )
    Persona.objects.filter(pk=captain.pk).update(skills=[], updated_at="2026-07-01T00:00:00Z")
    generation = current(captain)
    urn = f"urn:air:{HOST}:virgo-persona:{captain.uuid}"
    assert listed(client)["Release Captain"] == {
        "identifier": urn,
        "displayName": "Release Captain",
        "type": A2A,
        "url": captain.card_url,
        "description": "You ship releases.",
        "tags": [],
        "capabilities": [],
        "version": str(captain.generation),
        "updatedAt": "2026-07-01T00:00:00Z",
        "metadata": {
            "virgo.provider": "installation",
            "virgo.owner.verification": "unverified",
            "virgo.organization.verification": "unverified",
        },
        "trustManifest": {
            "identity": urn,
            "identityType": "other",
            "attestations": [
                {
                    "type": "pinned-grant",
                    "uri": captain.card_url,
                    "mediaType": A2A,
                    "digest": generation.grant_digest,
                }
            ],
            "provenance": [
                {
                    "relation": "derivedFrom",
                    "sourceId": f"{urn}:generation:{captain.generation}",
                    "sourceDigest": "sha256:" + generation.stamp_hash,
                }
            ],
        },
    }
