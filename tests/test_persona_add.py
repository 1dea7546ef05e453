"""`persona add`: the only place that suggests the first persona of an installation."""

import io

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError

from personas import services
from personas.models import GrantProposal, Persona, RegisteredAddress
from stamps.profiles import required_tools
from stamps.storage import stamp_path
from tests.factories import make_agent, make_owner, make_persona

pytestmark = pytest.mark.django_db
# The commands commit for real in the transactional tests, so their stamps are built on commit
# (eager Celery) before they report, exactly as on a terminal.
PROMPT = "You keep my calendar and relay my decisions, nothing more."


def add(*args: str) -> str:
    out = io.StringIO()
    call_command("persona", "add", *args, stdout=out, stderr=out)
    return out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_the_first_persona_is_suggested_as_root_secretary() -> None:
    """V1-FAC-3, VX-REV-1: with no persona yet and no address given, `persona add` suggests the
    secretary at root/secretary with a suggested name and registers that address; its grant of
    every required secretary tool is a proposal the command prints with its review URL, and the
    persona stands only once the owner approves it."""
    owner = make_owner("alice")
    output = add(
        "--owner", "alice", "--agent", "main", "--create-agent", "--prompt", PROMPT,
        "--queues", "inbox",
    )  # fmt: skip
    assert (
        "No persona exists yet: suggesting the first persona 'Secretary' as a secretary at "
        "root/secretary." in output
    )
    persona = Persona.objects.get()
    assert (persona.name, persona.persona_class, persona.address.path) == (
        "Secretary",
        "secretary",
        "root/secretary",
    )
    assert RegisteredAddress.objects.get().registered_by.username == "alice"
    assert persona.system_prompt == PROMPT
    assert (persona.verb_subset, persona.queues, persona.standing) == ([], [], False)
    assert not stamp_path(persona.uuid, 1).exists()
    [proposal] = GrantProposal.objects.filter(persona=persona)
    assert (proposal.status, proposal.via, proposal.proposed_by) == ("pending", "cli", owner)
    assert sorted(proposal.changes["verb_subset"]) == sorted(required_tools("secretary"))
    assert proposal.changes["queues"] == ["inbox"]
    assert f"proposal {proposal.pk}" in output
    assert proposal.review_url in output
    assert "It stands" not in output

    services.proposal_approve(proposal=proposal, actor=owner)
    persona.refresh_from_db()
    assert persona.standing is True
    assert sorted(persona.verb_subset) == sorted(required_tools("secretary"))
    assert stamp_path(persona.uuid, persona.generation).exists()


def test_no_suggestion_once_a_persona_exists() -> None:
    """V1-FAC-3: the suggestion is for an empty installation only."""
    owner = make_owner("alice")
    make_persona(make_agent(owner, name="main"))
    with pytest.raises(CommandError, match="--address is required"):
        add("--owner", "alice", "--agent", "main", "--prompt", PROMPT)
    assert Persona.objects.count() == 1
    assert not RegisteredAddress.objects.filter(path="root/secretary").exists()


@pytest.mark.django_db(transaction=True)
def test_an_explicit_address_is_used_as_given() -> None:
    """V1-FAC-2, V1-FAC-3: a given address wins even on an empty installation, and must be
    registered (or registered on request, by a moderator: address_register's rule)."""
    make_owner("alice", is_superuser=True)
    args = ["--owner", "alice", "--agent", "main", "--create-agent", "--prompt", PROMPT]
    lead = ["--name", "Lead", "--class", "project-lead", "--address", "work/core/lead"]
    with pytest.raises(CommandError, match="'work/core/lead' is not registered"):
        add(*args, *lead)
    output = add(*args, *lead, "--register-address", "--queues", "deploys")
    assert "suggesting" not in output
    assert "Registered address work/core/lead." in output
    persona = Persona.objects.get()
    assert (persona.address.path, persona.queues, persona.standing) == ("work/core/lead", [], False)
    assert persona.proposals.get().changes["queues"] == ["deploys"]
    assert not RegisteredAddress.objects.filter(path="root/secretary").exists()


def test_a_malformed_address_is_refused() -> None:
    """V1-FAC-2: even with --register-address, only canonical addresses are registered."""
    make_owner("alice")
    with pytest.raises(CommandError, match="must have 2 segments"):
        add(
            "--owner", "alice", "--agent", "main", "--create-agent", "--prompt", PROMPT,
            "--name", "X", "--class", "secretary", "--address", "secretary", "--register-address",
        )  # fmt: skip
    assert not RegisteredAddress.objects.exists()


def test_nothing_else_defaults_an_address() -> None:
    """V1-FAC-3: the service that creates personas has no default address either."""
    agent = make_agent(make_owner())
    with pytest.raises(ValidationError) as raised:
        services.persona_create(
            agent=agent,
            actor=agent.owner,
            name="Nowhere",
            system_prompt=PROMPT,
            persona_class="secretary",
        )
    assert raised.value.message_dict == {"address": ["this field is required"]}


def test_the_prompt_is_never_generated() -> None:
    """S9-REC-3: the owner authors the system prompt; the command will not invent one."""
    make_owner("alice")
    with pytest.raises(CommandError, match="--prompt"):
        add("--owner", "alice", "--agent", "main", "--create-agent")
    assert not Persona.objects.exists()


def test_the_agents_grant_still_bounds_the_persona() -> None:
    """S9-SCN-2: an existing agent's grant is not widened by the command."""
    owner = make_owner("alice")
    make_agent(owner, name="narrow", granted_verbs=["list_todos"])
    with pytest.raises(CommandError, match="verb_subset: not in agent 'narrow''s vended grant"):
        add("--owner", "alice", "--agent", "narrow", "--prompt", PROMPT)
    assert not Persona.objects.exists()
    assert not RegisteredAddress.objects.exists()


def test_the_command_binds_only_the_owners_surfaces_and_sets_ask_first_verbs() -> None:
    """VX-SEC-5, VX-SEC-13: `persona add` goes through the same service: a surface the owner
    has not registered is refused naming it; `--ask-first` sets the owner's ask-first verbs."""
    owner = make_owner("alice")
    make_persona(make_agent(owner, name="main"))
    RegisteredAddress.objects.get_or_create(path="work/core/careful")
    common = (
        "--owner", "alice", "--agent", "main", "--prompt", PROMPT, "--class", "coder-deputy",
        "--address", "work/core/careful", "--queues", "reviews",
    )  # fmt: skip
    with pytest.raises(CommandError, match="'teams:chat/nobody' is not one of your human"):
        add(*common, "--name", "Bound", "--surfaces", "teams:chat/nobody")
    add(*common, "--name", "Careful", "--ask-first", "workspace_write")
    persona = Persona.objects.get(name="Careful")
    assert persona.ask_first_verbs == []
    assert persona.proposals.get().changes["ask_first_verbs"] == ["workspace_write"]
    assert not Persona.objects.filter(name="Bound").exists()
