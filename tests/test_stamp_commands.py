"""`stamp show|verify|build|diff`, run as management commands in this process."""

import io
import json
import shutil
from pathlib import Path

import pytest
import rfc8785
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import TestCase

from personas import services
from personas.models import Persona
from stamps.models import CapabilityStamp
from stamps.selectors import stamp_diff
from tests.factories import (
    address,
    make_agent,
    make_owner,
    make_persona,
    standing_verbs,
    stop_standing,
    update_persona,
)

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).parent / "fixtures" / "stamps"


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("stamp", *args, stdout=out)
    return out.getvalue()


def run_failing(*args: str) -> tuple[str, str]:
    out = io.StringIO()
    with pytest.raises(CommandError) as raised:
        call_command("stamp", *args, stdout=out)
    return out.getvalue(), str(raised.value)


@pytest.fixture
def persona() -> Persona:
    return make_persona(make_agent(make_owner()), name="Shown")


def test_show_prints_the_stored_stamp(persona: Persona) -> None:
    """V1-STAMP-1: by UUID or unambiguous name; hash, file state and the document."""
    stored = CapabilityStamp.objects.get()
    for reference in (str(persona.uuid), "Shown"):
        output = run("show", reference)
        assert f"persona 'Shown' ({persona.uuid}) generation 1" in output
        assert f"stamp sha256 {stored.stamp_hash}" in output
        assert f"file {stored.path} (matches the stored stamp)" in output
        document = json.loads(output[output.index("{") :])
        assert rfc8785.dumps(document) == stored.data


def test_show_says_why_a_persona_does_not_stand(persona: Persona) -> None:
    """V1-INV-2: the exact missing tool, and a failing exit."""
    stop_standing(persona, "list_peers")
    output, error = run_failing("show", "Shown")
    assert "not standing: missing tool list_peers" in output
    assert "does not stand" in error


def test_show_refuses_an_ambiguous_name(persona: Persona) -> None:
    make_persona(persona.agent, name="Shown")
    _, error = run_failing("show", "Shown")
    assert f"persona 'Shown' is ambiguous: ids {persona.pk}, " in error


def test_verify_accepts_good_files_of_every_version(persona: Persona) -> None:
    """V1-SCH-2, V1-FAC-4: v1, v2 and v3 files are validated; good ones pass."""
    stored = CapabilityStamp.objects.get()
    output = run("verify", str(stored.path), *(str(p) for p in sorted(FIXTURES.iterdir())))
    assert output.count(": OK (") == 5
    assert "INVALID" not in output
    assert "class coder-deputy -> canonical role path work/core/deputy" in output


def test_verify_prints_what_is_wrong_and_fails(persona: Persona, tmp_path: Path) -> None:
    """V1-FAC-4, V1-INV-2: a v3 file missing a tool and not canonical is reported item by item."""
    stored = CapabilityStamp.objects.get()
    document = json.loads(stored.data)
    document["tools"] = [t for t in document["tools"] if t["name"] != "ack_coordination_message"]
    broken = tmp_path / "CAPABILITY-STAMP.json"
    broken.write_text(json.dumps(document, indent=2))
    broken.chmod(0o600)
    good = tmp_path / "good.json"
    shutil.copy(stored.path, good)
    output, error = run_failing("verify", str(broken), str(good))
    assert f"{broken}: INVALID (v3" in output
    assert "  - not standing: missing tool ack_coordination_message" in output
    assert "not in RFC 8785 canonical form" in output
    assert f"{good}: OK (v3" in output
    assert error == "1 of 2 stamp files failed verification"


def test_build_pays_owed_stamps() -> None:
    """V1-STAMP-1: without a worker, `stamp build --all` builds every owed stamp."""
    agent = make_agent(make_owner())
    with TestCase.captureOnCommitCallbacks(execute=False):
        persona = services.persona_create(
            agent=agent,
            actor=agent.owner,
            name="Owed",
            system_prompt="You review.",
            persona_class="coder-deputy",
            address=address("work/core/reviewer"),
            verb_subset=standing_verbs("coder-deputy"),
        )
    persona.refresh_from_db()
    assert persona.standing is None
    output = run("build", "--all")
    assert f"Owed ({persona.uuid}) generation 1: standing, stamp " in output
    persona.refresh_from_db()
    assert persona.standing is True


def test_diff_lists_tools_added_and_removed(persona: Persona) -> None:
    verbs = [v for v in persona.verb_subset if v != "claim"]
    update_persona(persona, verb_subset=verbs)
    update_persona(persona, verb_subset=[*verbs, "register_webhook"])
    output = run("diff", "Shown", "1", "3")
    assert "generation 1 -> 3" in output
    assert "  + register_webhook" in output
    assert "  - claim" in output


def test_the_diff_sees_access_and_scope_changes(persona: Persona) -> None:
    old = json.loads(CapabilityStamp.objects.get().data)
    new = json.loads(CapabilityStamp.objects.get().data)
    tool = next(t for t in new["tools"] if t["name"] == "claim")
    tool["access"] = "confirm"
    tool["scope"]["queues"] = []
    diff = stamp_diff(old, new)
    assert diff.access_changed == [("claim", "allow", "confirm")]
    assert diff.scope_changed == ["claim"]
    assert not diff.added and not diff.removed
