"""`virgo agent list` and `virgo persona list`, run as management commands in this process."""

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from personas import services
from personas.models import Agent, Persona, RevocationReason
from tests.factories import make_agent, make_owner, make_persona

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.fixture
def two_owners() -> tuple[Persona, Persona]:
    """alice's persona and bob's, each on an agent of its own owner's."""
    alice, bob = make_owner("alice"), make_owner("bob")
    return (
        make_persona(make_agent(alice, name="main"), name="Reviewer"),
        make_persona(make_agent(bob, name="main"), name="Deployer"),
    )


def test_agent_list_is_a_table_by_id_with_the_ids_other_commands_take(
    two_owners: tuple[Persona, Persona],
) -> None:
    """VX-OPS-8: one row per agent in id order under its headings; its id names the agent in
    `persona import-card --agent` and the rest."""
    alice_agent, bob_agent = (persona.agent for persona in two_owners)
    lines = run("agent", "list").splitlines()
    assert lines[0].split() == ["ID", "NAME", "OWNER", "PERSONAS"]
    assert [line.split() for line in lines[1:]] == [
        [str(alice_agent.pk), "main", "alice", "1"],
        [str(bob_agent.pk), "main", "bob", "1"],
    ]


def test_persona_list_shows_every_column_a_newcomer_needs(
    two_owners: tuple[Persona, Persona],
) -> None:
    """VX-OPS-8: id, name, agent, owner, address, class, generation, standing, discoverable and
    revoked, in id order; a revoked persona says so."""
    reviewer, deployer = two_owners
    services.persona_revoke(
        persona=deployer,
        actor=deployer.agent.owner,
        reason_code=RevocationReason.SUPERSEDED,
        reason="retired",
        generation=None,
        via="test",
    )
    lines = run("persona", "list").splitlines()
    assert lines[0].split() == [
        "ID", "NAME", "AGENT", "OWNER", "ADDRESS", "CLASS", "GEN", "STANDING", "DISCOVERABLE",
        "REVOKED",
    ]  # fmt: skip
    assert lines[1].split() == [
        str(reviewer.pk), "Reviewer", "main", f"({reviewer.agent_id})", "alice",
        reviewer.address.path, reviewer.persona_class, "1", "yes", "no", "no",
    ]  # fmt: skip
    assert lines[2].split()[-3:] == ["no", "no", "REVOKED"]
    assert len(lines) == 3


def test_persona_list_json_gives_ids_the_other_commands_accept(
    two_owners: tuple[Persona, Persona],
) -> None:
    """VX-OPS-8: `--json` is a list of objects, by id; each one's id and uuid name the same
    persona to `stamp show`."""
    documents = json.loads(run("persona", "list", "--json"))
    assert [document["id"] for document in documents] == [persona.pk for persona in two_owners]
    first = documents[0]
    assert first == {
        "id": two_owners[0].pk,
        "uuid": str(two_owners[0].uuid),
        "name": "Reviewer",
        "agent": {"id": two_owners[0].agent_id, "name": "main"},
        "owner": "alice",
        "address": two_owners[0].address.path,
        "class": two_owners[0].persona_class,
        "generation": 1,
        "standing": True,
        "discoverable": False,
        "revoked": False,
    }
    for reference in (str(first["id"]), first["uuid"], first["name"]):
        assert f"persona 'Reviewer' ({first['uuid']})" in run("stamp", "show", reference)
    agents = json.loads(run("agent", "list", "--json"))
    assert agents[0] == {
        "id": first["agent"]["id"],
        "name": "main",
        "owner": "alice",
        "personas": 1,
    }


def test_an_owner_is_shown_only_their_own(two_owners: tuple[Persona, Persona]) -> None:
    """VX-OPS-8: `--owner` lists that owner's agents and personas, never another owner's."""
    reviewer, _ = two_owners
    personas = json.loads(run("persona", "list", "--owner", "alice", "--json"))
    assert [persona["id"] for persona in personas] == [reviewer.pk]
    agents = json.loads(run("agent", "list", "--owner", "alice", "--json"))
    assert [agent["id"] for agent in agents] == [reviewer.agent_id]
    assert "bob" not in run("persona", "list", "--owner", "alice")
    assert "bob" not in run("agent", "list", "--owner", "alice")


def test_an_empty_list_says_so_in_one_line() -> None:
    """VX-OPS-8: nothing to list is one line (and `[]` for a script), not an empty table."""
    assert run("agent", "list") == "No agents.\n"
    assert run("persona", "list") == "No personas.\n"
    make_owner("carol")
    assert run("persona", "list", "--owner", "carol") == "carol has no personas.\n"
    assert run("agent", "list", "--owner", "carol") == "carol has no agents.\n"
    assert json.loads(run("persona", "list", "--json")) == []


def test_an_unknown_owner_is_one_line_and_status_2() -> None:
    """VX-OPS-8: a mistyped `--owner` is a usage mistake, not an empty list."""
    for command in ("agent", "persona"):
        with pytest.raises(CommandError) as refused:
            run(command, "list", "--owner", "nobody")
        assert str(refused.value) == "--owner: no user 'nobody'; create one first"
        assert refused.value.returncode == 2


def test_a_name_cannot_move_the_readers_cursor() -> None:
    """VX-OPS-8: a name holding control characters (an owner's, or a remote card's) is shown
    escaped in the table and in the JSON, so one row cannot pass for another."""
    owner = make_owner("mallory")
    Agent.objects.filter(pk=make_agent(owner, name="x").pk).update(name="x\x1b[2K\rroot\x9b")
    table = run("agent", "list")
    assert "\x1b" not in table and "\x9b" not in table and "\r" not in table
    assert "x\\x1b[2K\\rroot\\x9b" in table
    listed = run("agent", "list", "--json")
    assert "\x1b" not in listed and "\x9b" not in listed
    assert json.loads(listed)[0]["name"] == "x\x1b[2K\rroot\x9b"
