"""A loud refusal for each of the six global boundaries, and strict scope binding, via handle()."""

import dataclasses
import logging
from hashlib import sha256
from pathlib import Path

import pytest

from personas.catalogue import Boundary
from runtime.models import DecisionRecord, RefusalRecord
from runtime.stamp import load_active_stamp
from stamps.registry import HANDLERS
from tests.runtime_support import call, root_of, standing_persona

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, settings) -> Path:
    settings.VIRGO_HOME = tmp_path / "home"
    return settings.VIRGO_HOME


def assert_loud_denial(result: dict, persona, boundary: Boundary, caplog) -> None:
    assert result["ok"] is False
    assert result["code"] == "boundary_denied"
    assert result["boundary"] == boundary.value
    assert result["reason"]
    assert "result" not in result
    record = RefusalRecord.objects.filter(persona=persona).latest("id")
    assert (record.code, record.boundary, record.tool_name) == (
        "boundary_denied",
        boundary.value,
        result["tool"],
    )
    assert record.stamp_hash == load_active_stamp(persona).stamp_hash
    assert any(
        r.levelno == logging.WARNING and boundary.value in r.getMessage() for r in caplog.records
    )


def assert_held(result: dict, boundary: Boundary, caplog) -> DecisionRecord:
    assert result["ok"] is False
    assert (result["code"], result["status"], result["boundary"]) == (
        "confirmation_required",
        "pending",
        boundary.value,
    )
    assert any(
        r.levelno == logging.WARNING and "held for confirmation" in r.getMessage()
        for r in caplog.records
    )
    return DecisionRecord.objects.get(correlation_id=result["correlation_id"])


@pytest.fixture(autouse=True)
def warnings_captured(caplog) -> None:
    caplog.set_level(logging.WARNING, logger="virgo.runtime")


def test_gb1_a_credential_change_is_held_for_confirmation(caplog) -> None:
    """V1-GB-1, V1-ACC-8: writing credential material waits for the bound human authority."""
    persona = standing_persona()
    result = call(persona, "workspace_write", {"path": "memory/.env", "content": "MODE=dev"})
    record = assert_held(result, Boundary.CREDENTIAL_OR_PERMISSION_CHANGE, caplog)
    assert record.authority_user == persona.agent.owner
    assert not (root_of(persona) / "memory/.env").exists()


def test_gb2_a_destructive_operation_is_held_for_confirmation(caplog) -> None:
    """V1-GB-2, V1-ACC-8: deleting a file waits; the file is still there."""
    persona = standing_persona()
    call(persona, "workspace_write", {"path": "memory/old.md", "content": "keep me"})
    result = call(persona, "workspace_write", {"path": "memory/old.md", "mode": "delete"})
    assert_held(result, Boundary.DESTRUCTIVE, caplog)
    assert (root_of(persona) / "memory/old.md").read_text() == "keep me"


def test_gb3_publication_is_held_for_confirmation_and_its_tool_does_not_run(
    caplog, monkeypatch
) -> None:
    """V1-GB-3, V1-ACC-8: deployment waits for confirmation even when its tool is bound."""
    ran: list[object] = []
    # A recording stand-in with the real tool's declaration shows nothing runs.
    real = HANDLERS.implementation("deploy.trigger_webhook")
    stand_in = dataclasses.replace(real, implementation=lambda call, args: ran.append(call))
    monkeypatch.setitem(HANDLERS._handlers, "deploy.trigger_webhook", stand_in)
    persona = standing_persona(extra=("trigger_webhook",))
    result = call(persona, "trigger_webhook", {"webhook": "prod-deploy"})
    record = assert_held(result, Boundary.EXTERNAL_PUBLICATION, caplog)
    assert record.operation["target"]["webhook"] == "prod-deploy"
    assert ran == []


def test_gb4_secret_credential_values_are_never_read(caplog) -> None:
    """V1-GB-4, V1-ACC-8: a secret file, a link to one and a secret directory are all refused."""
    persona = standing_persona()
    root = root_of(persona)
    (root / "memory").mkdir()
    (root / "memory/.env").write_text("API_TOKEN=s3cr3t")
    (root / "memory/notes.md").symlink_to(root / "memory/.env")
    for tool, path in [
        ("workspace_read", "memory/.env"),
        ("workspace_read", "memory/notes.md"),
        ("workspace_hash", "memory/.env"),
        ("workspace_list", ".ssh"),
    ]:
        result = call(persona, tool, {"path": path})
        assert_loud_denial(result, persona, Boundary.SECRET_CREDENTIAL_VALUES, caplog)
        assert "s3cr3t" not in str(result)
    listing = call(persona, "workspace_list", {"path": "memory"})
    assert listing["result"]["entries"] == []


def test_gb5_lease_fence_and_authority_material_is_never_exported(caplog) -> None:
    """V1-GB-5, V1-ACC-8."""
    persona = standing_persona()
    root = root_of(persona)
    (root / "memory").mkdir()
    (root / "memory/worker.lease").write_text("lease-token-41")
    result = call(persona, "workspace_read", {"path": "memory/worker.lease"})
    assert_loud_denial(result, persona, Boundary.AUTHORITY_MATERIAL_EXPORT, caplog)
    assert "lease-token-41" not in str(result)
    forged = call(persona, "workspace_write", {"path": "memory/worker.fence", "content": "42"})
    assert_loud_denial(forged, persona, Boundary.AUTHORITY_MATERIAL_EXPORT, caplog)


def test_gb6_cross_workspace_project_and_persona_access_is_refused(caplog) -> None:
    """V1-GB-6, V1-ACC-5, V1-ACC-8: strict scope binding, each crossing refused."""
    owner_persona = standing_persona()
    other = standing_persona(owner_persona.agent.owner, agent=owner_persona.agent)
    call(other, "workspace_write", {"path": "QUEUE.md", "content": "other's queue"})
    crossings = [
        {"path": "QUEUE.md", "workspace": "home"},
        {"path": "QUEUE.md", "project": "web"},
        {"path": "QUEUE.md", "persona": str(other.uuid)},
        {"path": f"../{other.uuid}/QUEUE.md"},
        {"path": "/etc/hostname"},
    ]
    for arguments in crossings:
        result = call(owner_persona, "workspace_read", arguments)
        assert_loud_denial(result, owner_persona, Boundary.CROSS_SCOPE, caplog)
        assert "other's queue" not in str(result)
    write = call(owner_persona, "workspace_write", {"path": "QUEUE.md", "persona": str(other.uuid)})
    assert_loud_denial(write, owner_persona, Boundary.CROSS_SCOPE, caplog)
    assert (root_of(other) / "QUEUE.md").read_text() == "other's queue"


def test_gb6_a_symlink_out_of_the_workspace_is_refused(caplog, tmp_path: Path) -> None:
    """V1-GB-6, V1-ACC-5: containment is checked on the resolved path."""
    persona = standing_persona()
    other = standing_persona()
    call(other, "workspace_write", {"path": "FINDINGS.md", "content": "other's findings"})
    (root_of(persona) / "peek.md").symlink_to(root_of(other) / "FINDINGS.md")
    result = call(persona, "workspace_read", {"path": "peek.md"})
    assert_loud_denial(result, persona, Boundary.CROSS_SCOPE, caplog)
    assert "other's findings" not in str(result)


def test_deny_holds_whatever_the_stamp_says(caplog, monkeypatch) -> None:
    """V1-GB-4: a deny boundary is refused even on a tool the stamp grants with confirm. The
    token looks random (VX-SEC-16: `ghp_` and one letter repeated is a doc's placeholder)."""
    ran: list[object] = []
    monkeypatch.setitem(HANDLERS._handlers, "deploy.trigger_webhook", ran.append)
    persona = standing_persona(extra=("trigger_webhook",))
    assert load_active_stamp(persona).tools["trigger_webhook"].access == "confirm"
    result = call(
        persona,
        "trigger_webhook",
        {"webhook": "prod", "payload": {"token": "ghp_" + sha256(b"token").hexdigest()[:36]}},
    )
    assert_loud_denial(result, persona, Boundary.SECRET_CREDENTIAL_VALUES, caplog)
    assert not DecisionRecord.objects.exists()
    assert ran == []
