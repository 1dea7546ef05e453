"""The pinned grant: a data-only card extension a peer stores to see that the grant changed.

A peer that kept a card's `grantDigest` can tell, on its next fetch, whether the persona's tools
or their access changed (a "rug pull"), without the card ever naming a tool: the stamp stays
owner-private.
"""

import hashlib
import hmac
import json
from importlib import import_module
from typing import Any

import pytest
from a2a.types import AgentCard
from a2a.utils.proto_utils import validate_proto_required_fields
from django.core.cache import cache
from django.db import DatabaseError, connection, transaction
from google.protobuf.json_format import ParseDict

from cards.models import PublishedCard
from cards.publishing import _pin, publish_card
from cards.rendering import FIRST_GRANT_DEFINITION, GRANT_DIGEST_ALGORITHM, PINNED_GRANT_EXTENSION
from personas.models import Generation, Persona
from personas.services import persona_update
from settling.publication import publish_generation
from settling.reconciliation import owed_personas
from stamps.grant import GRANT_DEFINITION, digest, grant_of
from stamps.models import CapabilityStamp
from stamps.storage import stamp_path
from tests.factories import make_agent, make_owner, make_persona, update_persona
from tests.grant_support import fetch_card, params, pin_of

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> Any:
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def persona() -> Persona:
    return make_persona(make_agent(make_owner()), discoverable=True)


def stamp_tools(persona: Persona) -> list[dict[str, Any]]:
    document = json.loads(stamp_path(persona.uuid, persona.generation).read_bytes())
    return document["tools"]


def test_the_card_pins_generation_stamp_and_grant(persona: Persona) -> None:
    """VX-TRUST-4: the extension is data only (not required) and carries the generation, the
    SHA-256 of its stamp file's bytes and the grant digest, and the card stays a schema-valid
    A2A card (a strict parse: an unknown field would fail it)."""
    card = fetch_card(persona)
    pin = pin_of(card)
    assert pin["required"] is False
    generation = Generation.objects.get(persona=persona, number=persona.generation)
    data = stamp_path(persona.uuid, persona.generation).read_bytes()
    assert pin["params"] == {
        "generation": persona.generation,
        "stampSha256": hashlib.sha256(data).hexdigest(),
        "grantDigest": generation.grant_digest,
        "grantDigestAlgorithm": GRANT_DIGEST_ALGORITHM,
        "grantDefinition": GRANT_DEFINITION,
    }
    assert len(generation.grant_digest) == 64
    validate_proto_required_fields(ParseDict(card, AgentCard()))


def test_the_digest_changes_when_a_tool_is_added_or_removed(persona: Persona) -> None:
    """VX-TRUST-4: adding a tool and removing it again each change the digest."""
    before = params(persona)["grantDigest"]
    widened = update_persona(persona, verb_subset=[*persona.verb_subset, "register_webhook"])
    after_add = params(widened)["grantDigest"]
    assert after_add != before
    narrowed = update_persona(
        widened, verb_subset=[verb for verb in widened.verb_subset if verb != "register_webhook"]
    )
    assert params(narrowed)["grantDigest"] not in (after_add, "")
    # The same tools with the same access as at first: the same digest (it names the grant,
    # not the generation).
    assert params(narrowed)["grantDigest"] == before


def test_the_digest_changes_when_access_changes(persona: Persona) -> None:
    """VX-TRUST-4: a tool going from allow to confirm, and back from confirm to allow, changes
    the digest though the tool list is the same."""
    allowed = params(persona)["grantDigest"]
    asking = update_persona(persona, ask_first_verbs=["complete"])
    assert {t["name"]: t["access"] for t in stamp_tools(asking)}["complete"] == "confirm"
    confirm = params(asking)["grantDigest"]
    assert confirm != allowed
    back = update_persona(asking, ask_first_verbs=[])
    assert {t["name"]: t["access"] for t in stamp_tools(back)}["complete"] == "allow"
    assert params(back)["grantDigest"] == allowed != confirm


def test_prompt_and_description_leave_the_digest_alone(persona: Persona) -> None:
    """VX-TRUST-4: a new prompt or description is a new generation with a new stamp, so the
    generation and stamp hash move, but the grant digest does not."""
    before = params(persona)
    changed = update_persona(
        persona, system_prompt="You review carefully. Nothing else.", description="Reviews."
    )
    after = params(changed)
    assert after["generation"] == before["generation"] + 1
    assert after["stampSha256"] != before["stampSha256"]
    assert after["grantDigest"] == before["grantDigest"]


def test_the_extension_names_no_tool_and_the_digest_is_keyed(persona: Persona) -> None:
    """VX-TRUST-4: no tool name (nor handler action) of the stamp appears in the extension; the
    digest is not the bare hash of the pairs, and two personas with the very same grant get
    different digests, so no table of likely grants finds the tool list."""
    pin = json.dumps(pin_of(fetch_card(persona)))
    tools = stamp_tools(persona)
    for tool in tools:
        assert tool["name"] not in pin
        assert tool["handler_action"] not in pin
    pairs = sorted([tool["name"], tool["access"]] for tool in tools)
    digest = params(persona)["grantDigest"]
    for bare in (json.dumps(pairs), json.dumps({"grant": pairs, "v": 1})):
        assert hashlib.sha256(bare.encode()).hexdigest() != digest
    twin = make_persona(persona.agent, verb_subset=persona.verb_subset, discoverable=True)
    assert sorted([t["name"], t["access"]] for t in stamp_tools(twin)) == pairs
    assert params(twin)["grantDigest"] != digest
    # The salt itself is never on the card, in the API or the admin's editable fields.
    assert persona.grant_salt not in json.dumps(fetch_card(persona))
    assert Persona._meta.get_field("grant_salt").editable is False


def test_a_card_rendered_before_its_stamp_is_pinned_once_the_stamp_is_built(
    persona: Persona, django_capture_on_commit_callbacks: Any
) -> None:
    """VX-TRUST-4: a request that arrives before the stamp is built gets the new generation's
    card without a pin (there is no stamp to pin yet); once the stamp is built the card is owed
    again and published with its pin, by the task or the reconciler."""
    owner = persona.agent.owner
    with django_capture_on_commit_callbacks(execute=False):
        persona_update(persona=persona, actor=owner, description="Before its stamp.")
    persona.refresh_from_db()
    assert persona.standing is None
    early = fetch_card(persona)
    assert early["version"] == str(persona.generation)
    assert [
        e for e in early["capabilities"]["extensions"] if e["uri"] == PINNED_GRANT_EXTENSION
    ] == []
    assert PublishedCard.objects.get(persona=persona).pinned is False
    assert persona in owed_personas()  # its stamp is owed
    publish_generation(persona.pk)
    persona.refresh_from_db()
    assert persona.standing is True
    card = PublishedCard.objects.get(persona=persona)
    assert card.pinned is True
    assert persona not in owed_personas()
    assert pin_of(fetch_card(persona))["params"]["generation"] == persona.generation


def test_an_unpinned_card_of_a_standing_persona_is_owed_and_republished(persona: Persona) -> None:
    """VX-TRUST-4: cards stored before the pin existed (an upgrade) are owed until re-rendered:
    the reconciler finds them, and the endpoint renders the pinned card on its own."""
    PublishedCard.objects.filter(persona=persona).update(pinned=False)
    assert persona in owed_personas()
    assert pin_of(fetch_card(persona))["params"]["generation"] == persona.generation
    assert PublishedCard.objects.get(persona=persona).pinned is True
    assert persona not in owed_personas()
    persona.refresh_from_db()
    # Rendering again changes nothing once pinned.
    etag = PublishedCard.objects.get(persona=persona).etag
    assert publish_card(persona).etag == etag


def test_the_stamps_app_digests_the_whole_grant_and_stores_its_definition(
    persona: Persona,
) -> None:
    """VX-GRANT-3: a generation stamped now carries the digest of its whole grant (stamps.grant)
    and the name of the definition it covers, set together."""
    stored = CapabilityStamp.objects.get(generation__persona=persona)
    document = json.loads(stored.data)
    generation = stored.generation
    assert generation.grant_digest == digest(grant_of(document), salt=persona.grant_salt)
    assert generation.grant_definition == GRANT_DEFINITION


def test_a_digest_of_the_first_definition_is_named_as_such(persona: Persona) -> None:
    """VX-GRANT-3: generations stamped before definitions were named keep the digest migration
    stamps 0004 gave them (their tools and access only), and their card says so, so a peer does
    not read it as covering the scope."""
    migration = import_module("stamps.migrations.0004_grant_digests")
    stored = CapabilityStamp.objects.get(generation__persona=persona)
    pairs = sorted([t["name"], t["access"]] for t in json.loads(stored.data)["tools"])
    message = json.dumps({"grant": pairs, "v": 1}, separators=(",", ":")).encode()
    expected = hmac.new(bytes.fromhex(persona.grant_salt), message, hashlib.sha256).hexdigest()
    assert migration._digest(stored.data, persona.grant_salt) == expected
    old = Generation(number=1, stamp_hash=stored.stamp_hash, grant_digest=expected)
    pin = _pin(old)
    assert pin is not None
    assert pin["params"]["grantDefinition"] == FIRST_GRANT_DEFINITION
    assert pin["params"]["grantDigest"] == expected


def test_the_database_refuses_to_repoint_a_set_digest(persona: Persona) -> None:
    """VX-TRUST-4: like the stamp hash beside it, the digest is set once, in the database too
    (the triggers made again by migration stamps 0004)."""
    generation = Generation.objects.get(persona=persona, number=persona.generation)
    with (
        pytest.raises(DatabaseError, match="set once"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(
            "UPDATE personas_generation SET grant_digest = %s WHERE id = %s",
            ["0" * 64, generation.pk],
        )
    # ... and the triggers of migration stamps 0003 still hold after the table was remade.
    with (
        pytest.raises(DatabaseError, match="immutable"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(
            "UPDATE personas_generation SET number = number + 10 WHERE id = %s", [generation.pk]
        )
