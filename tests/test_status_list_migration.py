"""The migration that brings the revocation status list to an installation with generations."""

from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

BEFORE = [("personas", "0014_purged_persona_keeps_its_tombstone")]


def migrate(targets: list[tuple[str, str]]) -> Any:
    MigrationExecutor(connection).migrate(targets)
    return MigrationExecutor(connection).loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_every_existing_generation_gets_an_index_and_the_revoked_ones_their_bit() -> None:
    """VX-TRUST-7: upgrading gives each generation an index, oldest first, and sets the bit of
    every generation already revoked, by itself or with its whole persona, so the first card
    published afterwards names a bit that tells the truth."""
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    old = migrate(BEFORE)
    try:
        owner = old.get_model("auth", "User").objects.create(username="ada")
        address = old.get_model("personas", "RegisteredAddress").objects.create(path="work/x")
        agent = old.get_model("personas", "Agent").objects.create(owner=owner, name="bot")
        persona_model = old.get_model("personas", "Persona")
        generation_model = old.get_model("personas", "Generation")
        now = timezone.now()

        def persona(name: str, **fields: Any) -> Any:
            return persona_model.objects.create(
                agent=agent,
                name=name,
                system_prompt="p",
                persona_class="secretary",
                address=address,
                **fields,
            )

        def generation(of: Any, number: int, **fields: Any) -> Any:
            return generation_model.objects.create(
                persona=of, number=number, composition={}, base_composition_hash="0" * 64, **fields
            )

        kept = persona("Kept", generation=2)
        first = generation(kept, 1, revoked_at=now, revocation_reason="superseded")
        second = generation(kept, 2)
        gone = persona("Gone", revoked_at=now, revocation_reason="compromised", standing=False)
        only = generation(gone, 1)
    finally:
        new = migrate(leaves)
    entries = new.get_model("personas", "StatusListEntry").objects.order_by("pk")
    assert [(e.generation_id, e.revoked_at is not None) for e in entries] == [
        (first.pk, True),
        (second.pk, False),
        (only.pk, True),
    ]
    assert new.get_model("personas", "StatusListVersion").objects.filter(pk=1).exists()
