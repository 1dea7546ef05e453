"""handle(): the one entry point; what the stamp grants runs, everything else is refused loudly."""

import logging
from pathlib import Path

import pytest

from runtime.handler import handle
from runtime.models import DecisionRecord, RefusalRecord
from runtime.stamp import load_active_stamp
from runtime.workspace import READ_MAX_LENGTH
from stamps.registry import HANDLERS
from stamps.storage import stamp_path
from tests.factories import update_persona
from tests.runtime_support import call, standing_persona
from tests.stored_stamps import store_as_stamp

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, settings) -> Path:
    settings.VIRGO_HOME = tmp_path / "home"
    return settings.VIRGO_HOME


def test_ordinary_workspace_work_runs_with_no_prompt_and_no_record() -> None:
    """V1-POL-1, V1-ACC-3, V1-STD-1, V1-STD-2: default-allow recoverable work in scope."""
    persona = standing_persona()
    written = call(persona, "workspace_write", {"path": "QUEUE.md", "content": "- [ ] review\n"})
    assert written["ok"] is True, written
    appended = call(
        persona,
        "workspace_write",
        {"path": "memory/2026/notes.md", "content": "learned x\n", "mode": "append"},
    )
    assert appended["ok"] is True
    listing = call(persona, "workspace_list")
    assert [e["name"] for e in listing["result"]["entries"]] == ["QUEUE.md", "memory"]
    assert call(persona, "workspace_stat", {"path": "QUEUE.md"})["result"]["mutable"] is True
    digest = call(persona, "workspace_hash", {"path": "QUEUE.md"})["result"]["sha256"]
    assert digest == written["result"]["sha256"]
    read = call(persona, "workspace_read", {"path": "QUEUE.md"})
    assert read["result"]["content"] == "- [ ] review\n"
    assert not DecisionRecord.objects.exists()
    assert not RefusalRecord.objects.exists()


def test_a_large_file_is_read_in_ranges_through_the_handler() -> None:
    """V1-WS-2, V1-ACC-4: offset/length with next_offset, total_size, done; nothing is lost."""
    persona = standing_persona()
    text = "".join(f"finding {i:06d}: all good\n" for i in range(30000))
    assert len(text) > 2 * READ_MAX_LENGTH
    assert call(persona, "workspace_write", {"path": "FINDINGS.md", "content": ""})["ok"]
    call(persona, "workspace_write", {"path": "FINDINGS.md", "content": text[:900000]})
    call(
        persona,
        "workspace_write",
        {"path": "FINDINGS.md", "content": text[900000:], "mode": "append"},
    )
    offset, pages = 0, []
    while True:
        page = call(
            persona,
            "workspace_read",
            {"path": "FINDINGS.md", "offset": offset, "length": READ_MAX_LENGTH},
        )["result"]
        pages.append(page["content"])
        assert page["total_size"] == len(text)
        offset = page["next_offset"]
        if page["done"]:
            break
    assert len(pages) >= 3
    assert "".join(pages) == text


def test_a_tool_outside_the_stamp_is_refused_naming_tool_and_persona(caplog) -> None:
    """V1-CONS-2: the handler authorizes only tools[]; the refusal is loud."""
    persona = standing_persona()
    caplog.set_level(logging.WARNING, logger="virgo.runtime")
    for tool in ("trigger_webhook", "no_such_tool"):
        result = call(persona, tool, {"webhook": "prod"})
        assert result["ok"] is False
        assert result["code"] == "not_granted"
        assert result["reason"] == f"tool {tool} is not granted to persona {persona.uuid}"
    assert RefusalRecord.objects.filter(persona=persona, code="not_granted").count() == 2
    assert any("not_granted" in r.getMessage() for r in caplog.records)


def test_a_granted_tool_without_an_implementation_is_refused_never_faked(monkeypatch) -> None:
    """V1-FAC-7: an unbound handler action never answers with a made-up success."""
    persona = standing_persona()
    monkeypatch.setitem(HANDLERS._handlers, "identity.list_peers", None)
    result = call(persona, "list_peers")
    assert (result["ok"], result["code"]) == (False, "not_implemented")
    assert RefusalRecord.objects.get(persona=persona).handler_action == "identity.list_peers"


def test_nonsense_arguments_and_correlation_ids_are_refused() -> None:
    persona = standing_persona()
    assert call(persona, "workspace_read", {"path": "QUEUE.md", "offset": "x"})["code"] == (
        "invalid_arguments"
    )
    assert call(persona, "workspace_read", ["QUEUE.md"])["code"] == "invalid_arguments"
    assert handle(persona, "workspace_list", {}, "")["code"] == "invalid_correlation_id"
    assert handle(persona, "workspace_list", {}, "x" * 201)["code"] == "invalid_correlation_id"


def test_writes_outside_the_mutable_paths_are_refused_through_the_handler() -> None:
    """V1-STD-2, V1-WS-1: only the binding's mutable paths take writes."""
    persona = standing_persona()
    for path in ("README.md", "worktrees/web/app.py", "notes/QUEUE.md"):
        result = call(persona, "workspace_write", {"path": path, "content": "x"})
        assert (result["ok"], result["code"]) == (False, "not_mutable"), path
    assert call(persona, "workspace_write", {"path": "worktrees/core/a.py", "content": "x"})["ok"]


def test_a_scope_wide_persona_has_no_project_worktree() -> None:
    """V1-WS-1: the worktree overlay belongs to project classes only."""
    persona = standing_persona(persona_class="team-coordinator")
    result = call(persona, "workspace_write", {"path": "worktrees/core/a.py", "content": "x"})
    assert result["code"] == "not_mutable"
    stamp = load_active_stamp(persona)
    root = stamp.workspace_for(stamp.tools["workspace_write"]).root
    assert root.parts[-3:] == ("work", "_scope", str(persona.uuid))


@pytest.mark.parametrize("damage", ["altered", "malformed"])
def test_an_altered_or_malformed_stamp_stops_every_call(damage: str) -> None:
    """V1-BOOT-1, VX-OPS-4: the handler never works from a stamp it cannot verify; the first
    refusal quarantines the persona, so every later call is refused saying why."""
    persona = standing_persona()
    path = stamp_path(persona.uuid, persona.generation)
    if damage == "altered":
        path.write_bytes(path.read_bytes().replace(b'"allow"', b'"allow" ', 1))
    else:
        store_as_stamp(persona, b"{not json")
    for _ in range(2):
        result = call(persona, "workspace_list")
        assert (result["ok"], result["code"]) == (False, "stamp_unavailable")
        assert damage in result["reason"]
    assert "quarantined by the runtime's load" in result["reason"]


def test_a_lost_stamp_file_is_rewritten_and_the_call_runs() -> None:
    """V1-STAMP-1, VX-OPS-4: a missing file is repaired from the stored stamp, not refused."""
    persona = standing_persona()
    path = stamp_path(persona.uuid, persona.generation)
    data = path.read_bytes()
    path.unlink()
    assert call(persona, "workspace_list")["ok"]
    assert path.read_bytes() == data


def test_a_persona_that_does_not_stand_gets_nothing() -> None:
    """V1-INV-2: a persona missing a required tool is not standing and nothing runs for it."""
    persona = standing_persona()
    persona = update_persona(persona, verb_subset=["workspace_list", "workspace_read"])
    assert persona.standing is False
    result = call(persona, "workspace_list")
    assert result["code"] == "stamp_unavailable"
    assert "not standing" in result["reason"]
