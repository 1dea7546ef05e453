"""Agents and personas named on the command line by id, uuid or unambiguous name: the one
resolution (personas.selectors) and the commands that use it."""

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from personas.models import Agent, Persona
from personas.selectors import (
    AmbiguousReference,
    UnknownReference,
    agent_by_reference,
    agents_owned_by,
    persona_by_reference,
    personas_owned_by,
    personas_visible_to,
)
from tests.factories import make_agent, make_owner, make_persona

pytestmark = pytest.mark.django_db


def refusal(*args: str) -> CommandError:
    with pytest.raises(CommandError) as refused:
        call_command(*args, stdout=io.StringIO())
    return refused.value


@pytest.fixture
def alice_persona() -> Persona:
    return make_persona(make_agent(make_owner("alice"), name="main"), name="Reviewer")


@pytest.fixture
def bob_persona() -> Persona:
    return make_persona(make_agent(make_owner("bob"), name="ops"), name="Deployer")


def test_a_persona_is_found_by_id_uuid_or_name_alike(alice_persona: Persona) -> None:
    """VX-OPS-8: the id, the uuid (in any case) and the name name the same persona."""
    every = Persona.objects.all()
    for reference in (
        str(alice_persona.pk),
        str(alice_persona.uuid),
        str(alice_persona.uuid).upper(),
        "Reviewer",
    ):
        assert persona_by_reference(reference, among=every) == alice_persona


def test_an_agent_is_found_by_id_or_name_alike(alice_persona: Persona) -> None:
    """VX-OPS-8: an agent by its id or its name."""
    agent = alice_persona.agent
    for reference in (str(agent.pk), "main"):
        assert agent_by_reference(reference, among=Agent.objects.all()) == agent


def test_an_ambiguous_name_names_the_candidates_ids(alice_persona: Persona) -> None:
    """VX-OPS-8: two personas of one name: the one line lists both ids, and picks neither."""
    twin = make_persona(alice_persona.agent, name="Reviewer")
    with pytest.raises(AmbiguousReference) as refused:
        persona_by_reference("Reviewer", among=Persona.objects.all())
    assert str(refused.value) == (
        f"persona 'Reviewer' is ambiguous: ids {alice_persona.pk}, {twin.pk} answer to it; "
        "give one id"
    )


def test_a_name_that_is_another_records_id_is_ambiguous(alice_persona: Persona) -> None:
    """VX-OPS-8: a persona named "7" beside persona 7 is never silently the one or the other."""
    named = make_persona(alice_persona.agent, name=str(alice_persona.pk))
    with pytest.raises(AmbiguousReference, match=f"ids {alice_persona.pk}, {named.pk} answer"):
        persona_by_reference(str(alice_persona.pk), among=Persona.objects.all())


@pytest.mark.parametrize("reference", ["Nobody", "999999", "00000000-0000-4000-8000-000000000000"])
def test_an_unknown_reference_is_one_line_naming_the_list(
    alice_persona: Persona, reference: str
) -> None:
    """VX-OPS-8: nothing by that id, uuid or name: one line saying where to look."""
    with pytest.raises(UnknownReference) as refused:
        persona_by_reference(reference, among=Persona.objects.all())
    assert str(refused.value) == (
        f"no persona {reference!r} (by id, uuid or name); `virgo persona list` shows them"
    )
    with pytest.raises(UnknownReference, match=r"\(by id or name\); `virgo agent list`"):
        agent_by_reference(reference, among=Agent.objects.all())


def test_another_owners_records_are_unknown_to_an_owner_by_any_name(
    alice_persona: Persona, bob_persona: Persona
) -> None:
    """VX-OPS-8, attacker: within alice's scope bob's persona and agent are unknown by id, uuid
    and name, in the very words of a record that does not exist, so that a probe learns
    nothing; the scopes the owner commands pass are the selectors', not a filter of their own."""
    alice = alice_persona.agent.owner
    for scope in (personas_owned_by(alice), personas_visible_to(alice)):
        for reference in (str(bob_persona.pk), str(bob_persona.uuid), "Deployer"):
            with pytest.raises(UnknownReference) as refused:
                persona_by_reference(reference, among=scope)
            assert str(refused.value).startswith(f"no persona {reference!r} (by id")
    for reference in (str(bob_persona.agent_id), "ops"):
        with pytest.raises(UnknownReference):
            agent_by_reference(reference, among=agents_owned_by(alice))


def test_an_owner_cannot_revoke_or_lead_with_another_owners_persona(
    alice_persona: Persona, bob_persona: Persona
) -> None:
    """VX-OPS-8, attacker: through the commands, alice naming bob's persona (by id, uuid or
    name) or bob's agent is refused as unknown, status 2, and nothing of bob's changes."""
    for reference in (str(bob_persona.pk), str(bob_persona.uuid), "Deployer"):
        refused = refusal(
            "persona", "revoke", reference, "--by", "alice", "--reason-code", "compromised",
            "--reason", "probe",
        )  # fmt: skip
        assert str(refused) == (
            f"no persona {reference!r} (by id, uuid or name); `virgo persona list` shows them"
        )
        assert refused.returncode == 2
        refused = refusal(
            "persona", "add", "--owner", "alice", "--agent", "main", "--name", "Deputy",
            "--address", alice_persona.address.path, "--class", alice_persona.persona_class,
            "--prompt", "p", "--lead", reference,
        )  # fmt: skip
        assert str(refused).startswith(f"--lead: no persona {reference!r}")
        assert refused.returncode == 2
    refused = refusal(
        "persona", "add", "--owner", "alice", "--agent", str(bob_persona.agent_id),
        "--name", "Deputy", "--address", alice_persona.address.path,
        "--class", alice_persona.persona_class, "--prompt", "p",
    )  # fmt: skip
    assert str(refused) == (
        f"--agent: alice has no agent '{bob_persona.agent_id}' (by id or name); "
        "pass --create-agent to create it"
    )
    assert refused.returncode == 2
    bob_persona.refresh_from_db()
    assert not bob_persona.is_revoked
    assert Persona.objects.count() == 2


def test_a_moderator_revokes_any_persona_by_name(bob_persona: Persona) -> None:
    """VX-OPS-8: `--by` a moderator reaches every owner's persona, by its name as by its id."""
    make_owner("root", is_superuser=True)
    out = io.StringIO()
    call_command(
        "persona", "revoke", "Deployer", "--by", "root", "--reason-code", "compromised",
        "--reason", "leaked", stdout=out,
    )  # fmt: skip
    assert f"Revoked persona 'Deployer' ({bob_persona.uuid})" in out.getvalue()


def test_every_command_taking_a_persona_takes_its_id_and_name(alice_persona: Persona) -> None:
    """VX-OPS-8: `launch`, `mcp config`, `stamp show` and `persona export` take the id and
    the name as they take the uuid; an ambiguous one is refused by each, status 2."""
    for reference in (str(alice_persona.pk), "Reviewer", str(alice_persona.uuid)):
        out = io.StringIO()
        call_command("launch", "--persona", reference, "--print-allowlist", stdout=out)
        assert out.getvalue().startswith("mcp__virgo__")
        call_command("mcp", "config", "--persona", reference, stdout=io.StringIO())
        call_command("stamp", "show", reference, stdout=io.StringIO())
    make_persona(alice_persona.agent, name="Reviewer")
    for command in (
        ("launch", "--persona", "Reviewer", "--print-allowlist"),
        ("mcp", "config", "--persona", "Reviewer"),
        ("stamp", "show", "Reviewer"),
        ("persona", "export", "Reviewer", "/nonexistent/never-written.tar.gz"),
    ):
        refused = refusal(*command)
        assert "persona 'Reviewer' is ambiguous: ids " in str(refused)
        assert "\n" not in str(refused) and refused.returncode == 2


def test_commands_taking_an_agent_take_its_name(alice_persona: Persona) -> None:
    """VX-OPS-8: `import-card --agent` and `import --agent` take the agent's name as its id;
    an unknown one is refused, status 2, before the card or archive is read."""
    for command in ("import-card", "import"):
        refused = refusal("persona", command, "/nonexistent", "--agent", "nobody",
                          *(("--address", "x/y", "--class", "coder-deputy")
                            if command == "import-card" else ()))  # fmt: skip
        assert str(refused) == (
            "--agent: no agent 'nobody' (by id or name); `virgo agent list` shows them"
        )
        assert refused.returncode == 2
        refused = refusal("persona", command, "/nonexistent", "--agent", "main",
                          *(("--address", "x/y", "--class", "coder-deputy")
                            if command == "import-card" else ()))  # fmt: skip
        assert not str(refused).startswith("--agent")


def test_a_mistyped_name_is_answered_with_the_closest_of_the_callers_own(
    alice_persona: Persona, bob_persona: Persona
) -> None:
    """VX-OPS-11, VX-OPS-8: a name in the wrong case, or one letter off, gets "did you mean"
    with the name of the caller's own persona; another owner's names are never suggested."""
    alice = alice_persona.agent.owner
    scope = personas_owned_by(alice)
    for typed in (alice_persona.name.upper(), alice_persona.name[:-1]):
        with pytest.raises(UnknownReference) as refused:
            persona_by_reference(typed, among=scope)
        assert f"did you mean {alice_persona.name!r}? `virgo persona list`" in str(refused.value)
    with pytest.raises(UnknownReference) as refused:
        persona_by_reference(bob_persona.name.lower(), among=scope)
    assert bob_persona.name not in str(refused.value)
