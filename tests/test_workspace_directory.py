"""One workspace directory for the installation (runtime.workspace_directory, decision 275): the
first remote call records this machine's; a machine whose directory is another is not ready and
refuses remote calls (VX-REMOTE-2). The two-machine proof is tests/test_two_machines.py."""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import Client

from runtime import workspace_directory
from runtime.checks import check_workspace_directory
from runtime.models import WorkspaceDirectory
from runtime.tools.workspace import workspace_root
from serving import views
from tests.remote_support import granted, rpc
from tests.runtime_support import standing_persona

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def own_home(settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    settings.VIRGO_HOME = str(tmp_path / "home")
    monkeypatch.setattr(views, "_workspaces_claimed", False)
    yield tmp_path / "home"


def marker_file() -> Path:
    return workspace_directory.directory() / workspace_directory.MARKER_FILE


def another_machine(settings: Any, tmp_path: Path) -> None:
    """This process from now on is a machine whose VIRGO_HOME has a workspace directory of its
    own."""
    settings.VIRGO_HOME = str(tmp_path / "other-home")


def test_the_first_claim_records_this_machines_directory() -> None:
    """VX-REMOTE-2: the marker is written owner-private, then recorded; checking it passes."""
    assert workspace_directory.recorded_marker() is None
    workspace_directory.check_workspaces()
    assert not marker_file().exists()
    workspace_directory.claim_workspaces()
    recorded = WorkspaceDirectory.objects.get()
    assert marker_file().read_text() == recorded.marker and len(recorded.marker) == 32
    assert marker_file().stat().st_mode & 0o777 == 0o600
    assert workspace_directory.directory().stat().st_mode & 0o777 == 0o700
    workspace_directory.check_workspaces()
    workspace_directory.claim_workspaces()
    assert WorkspaceDirectory.objects.count() == 1


def test_a_marker_already_in_the_directory_is_the_one_recorded() -> None:
    """A directory that holds a marker (the installation's database rebuilt beside it) keeps it."""
    workspace_directory.directory().mkdir(parents=True)
    marker_file().write_text("f" * 32 + "\n")
    workspace_directory.claim_workspaces()
    assert workspace_directory.recorded_marker() == "f" * 32


@pytest.mark.django_db(transaction=True)
def test_a_machine_with_a_directory_of_its_own_is_refused(
    settings: Any, tmp_path: Path, client: Client
) -> None:
    """VX-REMOTE-2, decision 275: a directory without the recorded marker, or with another, fails
    the check, `check --deploy` (runtime.E002) and /readyz, naming the directory and the fix."""
    workspace_directory.claim_workspaces()
    recorded = workspace_directory.recorded_marker()
    another_machine(settings, tmp_path)
    with pytest.raises(workspace_directory.NotShared) as refused:
        workspace_directory.check_workspaces()
    assert refused.value.reason == (
        f"{workspace_directory.directory()} has no marker, not the installation's ({recorded}): "
        "it is not the workspace directory the other machines share"
    )
    [error] = check_workspace_directory()
    assert error.id == "runtime.E002" and "mount the installation's shared" in error.hint
    with pytest.raises(SystemCheckError, match=r"runtime\.E002"):
        call_command("check", "--deploy", "--tag", "virgo")
    response = client.get("/readyz")
    assert response.status_code == 503
    body = json.loads(response.content)
    assert body["failed"] == ["workspaces"] and body["checks"]["workspaces"] == "failed: NotShared"
    assert str(workspace_directory.directory()) not in response.content.decode()
    workspace_directory.directory().mkdir(parents=True)
    marker_file().write_text("0" * 32)
    with pytest.raises(workspace_directory.NotShared, match=r"holds marker 0{32}, not the"):
        workspace_directory.claim_workspaces()


def test_two_machines_recording_at_once_agree_on_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """A claim that loses the race to record compares with the winner's marker."""
    WorkspaceDirectory.objects.create(pk=1, marker="a" * 32, recorded_at="2026-12-01T00:00Z")
    monkeypatch.setattr(workspace_directory, "recorded_marker", lambda: None)
    with pytest.raises(workspace_directory.NotShared, match=f"installation's \\({'a' * 32}\\)"):
        workspace_directory.claim_workspaces()


def test_a_marker_another_worker_wrote_meanwhile_is_kept_not_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """VX-REMOTE-2: two workers of one machine make their first remote calls at once; the one
    that found no marker finds, when it writes, the other's already there. It keeps and records
    that one: replacing it would leave the directory holding a marker other than the recorded
    one, and every machine refusing every remote call."""
    workspace_directory.directory().mkdir(parents=True)
    marker_file().write_text("b" * 32)
    before_the_other_wrote = iter([True])
    real = workspace_directory._marker_here
    monkeypatch.setattr(
        workspace_directory,
        "_marker_here",
        lambda: None if next(before_the_other_wrote, False) else real(),
    )
    workspace_directory.claim_workspaces()
    assert marker_file().read_text() == "b" * 32 == workspace_directory.recorded_marker()
    assert [path.name for path in workspace_directory.directory().iterdir()] == [
        workspace_directory.MARKER_FILE
    ]


def test_an_empty_marker_another_process_left_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A marker file that appeared empty is not stood in for by a marker no file holds."""
    workspace_directory.directory().mkdir(parents=True)
    marker_file().write_text("")
    with pytest.raises(workspace_directory.NotShared) as refused:
        workspace_directory.claim_workspaces()
    assert refused.value.reason == f"{marker_file()} is empty"
    assert workspace_directory.recorded_marker() is None


def test_a_marker_that_cannot_be_written_is_refused_naming_the_file_and_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A directory on a filesystem that refuses the marker (no hard links, read-only, no
    permission) answers 503 with the reason, never a 500; nothing is recorded or left behind."""

    def refused(source: object, target: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(workspace_directory.os, "link", refused)
    with pytest.raises(workspace_directory.NotShared) as refusal:
        workspace_directory.claim_workspaces()
    assert refusal.value.reason == (
        f"{marker_file()} cannot be written: [Errno 1] Operation not permitted"
    )
    assert workspace_directory.recorded_marker() is None
    assert list(workspace_directory.directory().iterdir()) == []


def test_a_remote_call_on_a_machine_with_its_own_directory_is_refused(
    settings: Any, tmp_path: Path
) -> None:
    """VX-REMOTE-2: rather than answer from files no other machine sees, the endpoint says 503
    with the reason and the fix; the first call of a process on the shared one records it."""
    persona = standing_persona()
    _, tokens = granted(persona)
    listed = rpc(persona, "tools/list", token=tokens["access_token"])
    assert listed.status_code == 200, listed.content
    assert workspace_directory.recorded_marker() == marker_file().read_text()
    another_machine(settings, tmp_path)
    views._workspaces_claimed = False
    refused = rpc(persona, "tools/list", token=tokens["access_token"])
    assert refused.status_code == 503
    assert refused.json()["error"] == "unavailable"
    assert "not the workspace directory the other machines share" in refused.json()["detail"]


def test_the_directory_is_the_one_the_workspace_tools_write_under(settings: Any) -> None:
    """VX-REMOTE-2, decision 275: the marker guards where every persona's workspace lies."""
    root = workspace_root(workspace="core", project=None, persona_uuid="p")
    assert workspace_directory.directory() == Path(settings.VIRGO_HOME) / "workspaces"
    assert root.is_relative_to(workspace_directory.directory())


def test_a_directory_the_tools_made_before_the_first_claim_is_claimed() -> None:
    """A local call made the workspace directory first: the claim writes its marker there."""
    workspace_directory.directory().mkdir(parents=True)
    workspace_directory.claim_workspaces()
    assert marker_file().read_text() == workspace_directory.recorded_marker()


def test_a_machine_with_no_marker_is_refused_without_writing_one(
    settings: Any, tmp_path: Path
) -> None:
    """VX-REMOTE-2: once a directory is recorded, a claim on another machine compares and
    writes nothing there: its directory still has no marker, as the refusal says."""
    workspace_directory.claim_workspaces()
    another_machine(settings, tmp_path)
    with pytest.raises(workspace_directory.NotShared, match=r"has no marker, not the"):
        workspace_directory.claim_workspaces()
    assert not marker_file().exists()


def test_an_unreadable_marker_is_refused_naming_the_file_and_why() -> None:
    """A marker that is not ASCII (Virgo writes 32 hex digits) is not read as some other marker:
    the refusal names the file and the decoding error."""
    workspace_directory.directory().mkdir(parents=True)
    marker_file().write_bytes("é".encode() * 16)
    with pytest.raises(workspace_directory.NotShared) as refused:
        workspace_directory.claim_workspaces()
    assert refused.value.reason == (
        f"{marker_file()} cannot be read: 'ascii' codec can't decode byte 0xc3 in position 0: "
        "ordinal not in range(128)"
    )
    assert workspace_directory.recorded_marker() is None


def test_a_process_claims_its_workspaces_at_its_first_remote_call_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The marker and the record are read at a process's first remote call, not at every call:
    /readyz goes on checking them for the load balancer."""
    claims: list[None] = []
    monkeypatch.setattr(workspace_directory, "claim_workspaces", lambda: claims.append(None))
    views.claim_workspaces_once()
    views.claim_workspaces_once()
    assert claims == [None]
