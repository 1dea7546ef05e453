"""The migrations that introduce human surfaces keep what existing installations bound."""

from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("personas", "0004_skill_map_revision"), ("channel", "0001_initial")]


def migrate(targets: list[tuple[str, str]]) -> Any:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return MigrationExecutor(connection).loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_bindings_in_use_are_registered_to_their_only_owner() -> None:
    """VX-SEC-5: upgrading registers each binding to the one owner whose personas (or whose
    confirmation surface) use it; a binding two owners use (in any case) goes to neither, and
    persona mailboxes are never registered."""
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    old = migrate(BEFORE)
    try:
        user = old.get_model("auth", "User")
        ada, eve = (user.objects.create(username=name) for name in ("ada", "eve"))
        address = old.get_model("personas", "RegisteredAddress").objects.create(
            path="root/secretary"
        )
        agent_model = old.get_model("personas", "Agent")
        persona_model = old.get_model("personas", "Persona")
        for owner, bindings in (
            (ada, ["teams:chat/ops", "teams:chat/shared", "virgo:persona/x"]),
            (eve, ["Teams:Chat/Shared", "teams:chat/eve"]),
        ):
            agent = agent_model.objects.create(owner=owner, name=f"{owner.username}-bot")
            persona_model.objects.create(
                agent=agent,
                name="Secretary",
                system_prompt="Keep the owner informed.",
                persona_class="secretary",
                address=address,
                human_surface_bindings=bindings,
            )
        authority = old.get_model("channel", "AuthoritySurface")
        authority.objects.create(user=ada, binding="teams:user/ada", principal="aad:ada")
        authority.objects.create(user=eve, binding="teams:chat/ops", principal="aad:eve")
    finally:
        new = migrate(leaves)
    registered = sorted(
        new.get_model("personas", "HumanSurface").objects.values_list("binding", "owner__username")
    )
    assert registered == [
        ("teams:chat/eve", "eve"),
        ("teams:chat/ops", "ada"),
        ("teams:user/ada", "ada"),
    ]
    assert new.get_model("channel", "AuthoritySurface").objects.count() == 2
