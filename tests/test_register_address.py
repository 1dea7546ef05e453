"""`--register-address` on `virgo persona add` and `virgo persona import-card`: an address that is
not registered yet is registered with the persona, in its transaction, as address_register allows
(a moderator), or refused in one line naming the fix; a persona not made leaves nothing behind."""

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from personas.models import AuditEvent, Generation, GrantProposal, Persona, RegisteredAddress
from stamps.profiles import required_tools
from tests.factories import REVIEWER_VERBS, make_agent, make_owner

# Real commits: a registration the command rolls back must be gone from the database itself,
# not only from a test's savepoint.
pytestmark = pytest.mark.django_db(transaction=True)

CARD = Path(__file__).parent / "fixtures" / "cards" / "v1.json"
CLASS = "coder-deputy"
NEW = "work/core/imported"
PROMPT = "You review pull requests and say what you found, nothing more."


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, settings: Any) -> Iterator[None]:
    settings.VIRGO_HOME = tmp_path / "home"
    yield


def written() -> tuple[int, int, int, int, int]:
    return (
        RegisteredAddress.objects.count(),
        Persona.objects.count(),
        Generation.objects.count(),
        GrantProposal.objects.count(),
        AuditEvent.objects.count(),
    )


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("persona", *args, stdout=out, stderr=out)
    return out.getvalue()


def import_card(agent_id: int, *extra: str) -> str:
    return run(
        "import-card", str(CARD), "--agent", str(agent_id), "--address", NEW, "--class", CLASS,
        *extra,
    )  # fmt: skip


def deputy_agent(*, moderator: bool) -> Any:
    owner = make_owner(is_superuser=moderator)
    return make_agent(owner, granted_verbs=[*required_tools(CLASS), *REVIEWER_VERBS])


def test_import_card_registers_the_address_with_the_draft() -> None:
    """VX-OPS-8: `import-card --register-address` to a new address makes the draft there and
    registers the address to the owner who made it (a moderator, as address_register allows)."""
    agent = deputy_agent(moderator=True)
    output = import_card(agent.pk, "--register-address")
    registered = RegisteredAddress.objects.get(path=NEW)
    assert registered.registered_by == agent.owner
    assert Persona.objects.get().address == registered
    assert f"Registered address {NEW}." in output
    assert "Drafted persona 'Release Helper'" in output


def test_import_card_without_the_flag_names_it_and_writes_nothing() -> None:
    """VX-OPS-8: without `--register-address` an unregistered address is one line naming the
    flag as the fix, and nothing is written."""
    agent = deputy_agent(moderator=True)
    before = written()
    with pytest.raises(CommandError) as refused:
        import_card(agent.pk)
    assert str(refused.value) == (
        f"address: {NEW!r} is not registered; pass --register-address to register it with the "
        "persona"
    )
    assert written() == before


def test_a_failure_after_the_registration_leaves_no_address() -> None:
    """VX-OPS-8: the registration is undone with the draft it was for: a class whose required
    tools the agent lacks is refused after the address was registered, and no address, persona,
    generation, proposal or audit event is left."""
    agent = make_agent(make_owner(is_superuser=True), granted_verbs=REVIEWER_VERBS)
    before = written()
    with pytest.raises(CommandError, match="grant lacks the required tools"):
        import_card(agent.pk, "--register-address")
    assert written() == before
    assert not RegisteredAddress.objects.filter(path=NEW).exists()


def test_persona_add_with_a_verb_outside_the_grant_leaves_no_address() -> None:
    """VX-OPS-8: `persona add --register-address` with a verb subset the agent's grant does not
    hold is refused naming the field, and the address it would have registered is not."""
    owner = make_owner("moderator", is_superuser=True)
    make_agent(owner, name="narrow", granted_verbs=["list_todos"])
    before = written()
    with pytest.raises(CommandError, match="verb_subset: not in agent 'narrow''s vended grant"):
        run(
            "add", "--owner", "moderator", "--agent", "narrow", "--name", "Lead",
            "--class", "project-lead", "--address", "work/core/lead", "--register-address",
            "--prompt", PROMPT, "--verbs", "list_todos,trigger_webhook",
        )  # fmt: skip
    assert written() == before
    assert not RegisteredAddress.objects.filter(path="work/core/lead").exists()


@pytest.mark.parametrize("command", ["import-card", "add"])
def test_an_owner_who_may_not_register_is_told_so_and_who_may(command: str) -> None:
    """VX-OPS-8: `--register-address` does not widen who registers addresses: an ordinary owner
    is refused as address_register refuses, in one line saying who may and what to do, and
    nothing is written."""
    agent = deputy_agent(moderator=False)
    username = agent.owner.get_username()
    before = written()
    with pytest.raises(CommandError) as refused:
        if command == "import-card":
            import_card(agent.pk, "--register-address")
        else:
            run(
                "add", "--owner", username, "--agent", str(agent.pk), "--name", "Deputy",
                "--class", CLASS, "--address", NEW, "--register-address", "--prompt", PROMPT,
            )  # fmt: skip
    assert str(refused.value) == (
        f"--register-address: only moderators may register addresses and {username} is not "
        f"one; a moderator registers {NEW!r} (admin: Registered addresses), then run this again "
        "without --register-address"
    )
    assert written() == before
