"""Personas as ARD catalog entries: identifier, card reference and trust manifest.

An entry names only what the persona's signed card says (VX-DISC-3): its publisher is the
organization domain the card's identity chain proves, else this installation's host; its
attestations are the card's pinned grant and each proven part of that chain. Nothing private
(the prompt, the grant salt, the verb subset) is read into an entry.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db.models import F, QuerySet

from cards.rendering import card_description
from personas.models import Generation, Persona

ENTRY_TYPE = "application/a2a-agent-card+json"
REGISTRY_TYPE = "application/ai-registry+json"
# The URN's namespace segment: what kind of thing of the publisher's this is. The terminal
# segment is the persona's uuid, so a rename never changes the identifier (decision 217).
NAMESPACE = "virgo-persona"
URN_PREFIX = "urn:air:"
# Attestation types: the pinned grant, and one per proven part of the identity chain.
PINNED_GRANT = "pinned-grant"
OWNER_OIDC = "owner-oidc"
ORGANIZATION_PREFIX = "organization-"
# What each metadata key of an entry reads from the current generation's identity chain (the
# card's identity extension); the registry's only `metadata.*` filter keys.
METADATA_PATHS: dict[str, tuple[str, ...]] = {
    "virgo.provider": ("provider",),
    "virgo.owner.verification": ("owner", "verification"),
    "virgo.owner.issuer": ("owner", "issuer"),
    "virgo.organization.domain": ("organization", "domain"),
    "virgo.organization.verification": ("organization", "verification"),
}
# The persona columns an entry needs: never the grant salt or the verb subset. The prompt is
# read only because the card's description falls back to its first sentence.
PERSONA_COLUMNS = (
    "id",
    "uuid",
    "name",
    "description",
    "system_prompt",
    "skills",
    "generation",
    "updated_at",
)


def installation_host() -> str:
    """This installation's host name: the publisher of personas whose owner proved no domain."""
    return (urlsplit(settings.VIRGO_PUBLIC_BASE_URL).hostname or "").lower()


def api_base() -> str:
    """The ARD API base URL (what the catalog's registry entry and each result's source say)."""
    return f"{settings.VIRGO_PUBLIC_BASE_URL}/api/ard/"


def identifier(publisher: str, persona_uuid: object) -> str:
    return f"{URN_PREFIX}{publisher}:{NAMESPACE}:{persona_uuid}"


def parse_identifier(urn: str) -> tuple[str, str] | None:
    """(publisher, persona uuid) of one of our identifiers, or None for any other string. The
    publisher is as written: publisher_is compares it in lower case, and an empty one is no
    publisher's."""
    if not urn.startswith(URN_PREFIX):
        return None
    parts = urn[len(URN_PREFIX) :].split(":")
    if len(parts) != 3 or parts[1] != NAMESPACE:
        return None
    return parts[0], parts[2].lower()


def publisher_of(identity: dict[str, Any] | None) -> str:
    """The proven organization domain the card names, else this installation's host."""
    if identity and identity.get("provider") == "organization":
        domain = identity.get("organization", {}).get("domain")
        if domain:
            return str(domain)
    return installation_host()


@dataclass(frozen=True)
class CurrentGeneration:
    """What an entry needs of a persona's current generation."""

    number: int
    identity: dict[str, Any] | None
    grant_digest: str
    stamp_hash: str


def current_generations(personas: Sequence[Persona]) -> dict[int, CurrentGeneration]:
    """Each persona's current generation, in one query whatever the page size."""
    rows = Generation.objects.filter(
        persona_id__in=[persona.pk for persona in personas], number=F("persona__generation")
    ).values_list("persona_id", "number", "composition__identity", "grant_digest", "stamp_hash")
    return {
        persona_id: CurrentGeneration(number, identity, grant_digest, stamp_hash)
        for persona_id, number, identity, grant_digest, stamp_hash in rows
    }


def entries(personas: QuerySet[Persona] | Sequence[Persona]) -> list[dict[str, Any]]:
    """The catalog entries of these personas, in their order: two queries in all."""
    page = list(personas)
    generations = current_generations(page)
    return [entry(persona, generations.get(persona.pk)) for persona in page]


def entry(persona: Persona, generation: CurrentGeneration | None) -> dict[str, Any]:
    identity = generation.identity if generation else None
    urn = identifier(publisher_of(identity), persona.uuid)
    skills = persona.skills or []
    document: dict[str, Any] = {
        "identifier": urn,
        "displayName": persona.name,
        "type": ENTRY_TYPE,
        "url": persona.card_url,
        "description": card_description(persona.description, persona.system_prompt),
        "tags": sorted({tag for skill in skills for tag in skill.get("tags", ())}),
        "capabilities": [skill["id"] for skill in skills],
        # The card's own version: its generation.
        "version": str(persona.generation),
        "updatedAt": persona.updated_at.isoformat().replace("+00:00", "Z"),
    }
    metadata = _metadata(identity)
    if metadata:
        document["metadata"] = metadata
    document["trustManifest"] = trust_manifest(persona, urn, generation)
    return document


def trust_manifest(
    persona: Persona, urn: str, generation: CurrentGeneration | None
) -> dict[str, Any]:
    """identity is the entry's identifier (ai-catalog requires the two to match, and its
    publisher segment is the proven domain); the attestations point at the signed card that
    carries each claim (decision 218)."""
    attestations: list[dict[str, str]] = []
    provenance: list[dict[str, str]] = []
    if generation is not None and generation.grant_digest:
        attestations.append(
            {
                "type": PINNED_GRANT,
                "uri": persona.card_url,
                "mediaType": ENTRY_TYPE,
                # Exactly the card's pinned-grant grantDigest (keyed HMAC-SHA256, hex).
                "digest": generation.grant_digest,
            }
        )
    identity = generation.identity if generation else None
    for kind in _proven_parts(identity):
        attestations.append(
            {
                "type": kind,
                "uri": persona.card_url,
                "mediaType": ENTRY_TYPE,
            }
        )
    if generation is not None and generation.stamp_hash:
        provenance.append(
            {
                "relation": "derivedFrom",
                "sourceId": f"{urn}:generation:{generation.number}",
                # The card's stampSha256: the owner-private stamp this generation stands on.
                "sourceDigest": "sha256:" + generation.stamp_hash,
            }
        )
    manifest: dict[str, Any] = {"identity": urn, "identityType": "other"}
    if attestations:
        manifest["attestations"] = attestations
    if provenance:
        manifest["provenance"] = provenance
    return manifest


def _proven_parts(identity: dict[str, Any] | None) -> list[str]:
    """An attestation type per part of the chain that was proven, in the card's order."""
    if not identity:
        return []
    kinds = []
    if identity.get("owner", {}).get("verification") == "oidc":
        kinds.append(OWNER_OIDC)
    verification = identity.get("organization", {}).get("verification", "unverified")
    if verification != "unverified":
        kinds.append(ORGANIZATION_PREFIX + verification)
    return kinds


def _metadata(identity: dict[str, Any] | None) -> dict[str, str]:
    if not identity:
        return {}
    metadata = {}
    for key, path in METADATA_PATHS.items():
        value: Any = identity
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, str):
            metadata[key] = value
    return metadata
