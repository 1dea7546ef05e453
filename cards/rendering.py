"""Build the A2A v1.0 Agent Card of a persona from the persona alone (SPEC-0009)."""

import re
from typing import Any

from django.conf import settings

from cards import card_model

# A binding of ours: no standard A2A client (JSONRPC, GRPC, HTTP+JSON) can mistake the
# interface URL for a work-intake channel. Work arrives as todos (ADR-0010).
DISCOVERY_BINDING = "https://virgo.dev/a2a/bindings/discovery-only/v1"
DISCOVERY_EXTENSION = "https://virgo.dev/a2a/extensions/discovery-only/v1"
# Data only (VX-TRUST-4): what a peer stores to tell, on its next fetch, that the grant changed.
PINNED_GRANT_EXTENSION = "https://virgo.dev/a2a/extensions/pinned-grant/v1"
GRANT_DIGEST_ALGORITHM = "hmac-sha256"
# Data only (VX-ID-3): the owner's identity chain and how each part of it was proven.
IDENTITY_EXTENSION = "https://virgo.dev/a2a/extensions/identity-chain/v1"
# What a digest stored before grant definitions were named covers: the tools and their access.
# Later ones name their own (stamps.grant.GRANT_DEFINITION), stored with the digest.
FIRST_GRANT_DEFINITION = "virgo-grant/1"
PROTOCOL_VERSION = "1.0"
MEDIA_TYPES = ["text/plain", "application/json"]
SUMMARY_LIMIT = 280
UNDESCRIBED = "A draft persona: its owner has not described it yet."

# A2A requires at least one skill; a persona whose subset derives none gets this one, which
# names no verb and claims no capability.
PROFILE_ONLY_SKILL = {
    "id": "virgo-profile-only",
    "name": "Profile only",
    "description": "This persona advertises no skill: its verb subset derives none.",
    "tags": ["profile-only"],
}


def summarize_prompt(system_prompt: str) -> str:
    """The first sentence of the prompt, whitespace collapsed, cut at a word boundary."""
    text = " ".join(system_prompt.split())
    first = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
    if len(first) <= SUMMARY_LIMIT:
        return first
    return first[: SUMMARY_LIMIT - 1].rsplit(" ", 1)[0] + "…"


def card_description(description: str, system_prompt: str) -> str:
    """What the card and the directory say about a persona: its own words, else its prompt's.

    A draft (a persona made from an A2A card with no description) has neither yet. A2A requires
    a description, and every generation's card is published (a draft's is shown only to its
    owner, as a preview), so a draft's card says that it has none (VX-GRANT-4).
    """
    return description or summarize_prompt(system_prompt) or UNDESCRIBED


def pinned_grant(
    *, generation: int, stamp_hash: str, grant_digest: str, grant_definition: str
) -> dict[str, Any]:
    """The card extension that pins a generation's grant; it names no tool (the stamp stays
    owner-private): the generation, its stamp's SHA-256, the keyed digest of its grant
    (stamps.grant.digest) and which definition of the grant that digest covers."""
    return {
        "uri": PINNED_GRANT_EXTENSION,
        "description": (
            "Pins the grant behind this card: a changed grantDigest means what the persona may "
            "reach or do changed (virgo-grant/3: its tools, their access, conditions and scope, "
            "its queues, human-surface bindings, workspace, writable paths, graph namespace, "
            "role and who confirms its calls; virgo-grant/2: the same but the role; "
            "virgo-grant/1: its tools and their access only); a changed stampSha256 means "
            "anything it is changed."
        ),
        "required": False,
        "params": {
            "generation": generation,
            "stampSha256": stamp_hash,
            "grantDigest": grant_digest,
            "grantDigestAlgorithm": GRANT_DIGEST_ALGORITHM,
            "grantDefinition": grant_definition,
        },
    }


def identity_chain(identity: dict[str, Any]) -> dict[str, Any]:
    """The card extension carrying the owner's identity chain, as the composition holds it
    (personas.services.derivation.provider_and_identity): signed with the card, so a peer who
    verifies the signature knows this installation vouches for each part and how it was proven."""
    return {
        "uri": IDENTITY_EXTENSION,
        "description": (
            "The owning human's identity chain. provider says whom the card's provider names: "
            "the owner's organization (its domain proven by dns-txt, https-well-known or operator "
            "approval) or this installation. owner names the OpenID Connect issuer and subject "
            "only when a verified ID token proved them (oidc); unverified means nothing was "
            "proven and nothing is named. verifiedAt is since when the proof has held."
        ),
        "required": False,
        "params": identity,
    }


def build_card(
    composition: dict[str, Any],
    *,
    generation: int,
    system_prompt: str,
    pin: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The card of one generation, from its composition. Keys are A2A camelCase.

    `pin` is the pinned-grant extension (pinned_grant), once the generation's stamp is built;
    `status` the generation's place in the revocation status list
    (cards.status_list.status_extension).
    """
    persona_id = composition["persona"]
    provider = composition["provider"]
    extensions = [
        {
            "uri": DISCOVERY_EXTENSION,
            "description": (
                "Discovery only: this card grants nothing, and its URL accepts no "
                "work. Work reaches this persona as todos in its queues."
            ),
            "required": False,
            "params": {"grantsAccess": False, "workIntake": "todos"},
        }
    ]
    if "identity" in composition:
        extensions.append(identity_chain(composition["identity"]))
    if pin is not None:
        extensions.append(pin)
    if status is not None:
        extensions.append(status)
    return {
        "name": composition["name"],
        "description": card_description(composition["description"], system_prompt),
        "supportedInterfaces": [
            {
                "url": f"{settings.VIRGO_PUBLIC_BASE_URL}/a/{persona_id}/",
                "protocolBinding": DISCOVERY_BINDING,
                "protocolVersion": PROTOCOL_VERSION,
            }
        ],
        "provider": {
            "organization": provider["organization"],
            "url": provider["url"] or settings.VIRGO_PUBLIC_BASE_URL + "/",
        },
        "version": str(generation),
        "capabilities": {
            "streaming": False,
            "pushNotifications": False,
            "extendedAgentCard": False,
            "extensions": extensions,
        },
        "defaultInputModes": MEDIA_TYPES,
        "defaultOutputModes": MEDIA_TYPES,
        "skills": list(composition["skills"]) or [PROFILE_ONLY_SKILL],
    }


def validate_card(card: dict[str, Any]) -> None:
    """Raise CardOutsideModel unless the A2A SDK would accept the card as a complete v1.0
    AgentCard (its model as a compiled schema, cards.card_model)."""
    if not card_model.is_complete_card(card):
        raise card_model.CardOutsideModel("; ".join(card_model.schema_errors(card)))
