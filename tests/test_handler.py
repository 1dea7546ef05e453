"""handle(): the one entry point; what the stamp grants runs, everything else is refused loudly."""

import errno
import hashlib
import logging
from pathlib import Path

import pytest

from runtime.handler import handle
from runtime.models import DecisionRecord, RefusalRecord
from runtime.stamp import load_active_stamp
from runtime.tools.workspace import READ_MAX_LENGTH
from stamps.registry import HANDLERS
from stamps.storage import stamp_path
from tests.factories import stop_standing
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
    assert result["reason"] == (
        "tool list_peers (identity.list_peers) has no bound implementation in this runtime"
    )
    assert RefusalRecord.objects.get(persona=persona).handler_action == "identity.list_peers"


def test_nonsense_arguments_and_correlation_ids_are_refused() -> None:
    """Refused, and recorded under the stamp the call was judged by."""
    persona = standing_persona()
    assert call(persona, "workspace_read", {"path": "QUEUE.md", "offset": "x"})["code"] == (
        "invalid_arguments"
    )
    refusal = RefusalRecord.objects.get(persona=persona)
    assert refusal.stamp_hash == load_active_stamp(persona).stamp_hash
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
    # The workspace's own refusal: no boundary crossed, so no classifier rule is named either.
    assert {
        (r.code, r.boundary, r.rule) for r in RefusalRecord.objects.filter(persona=persona)
    } == {("not_mutable", "", "")}


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
    persona = stop_standing(persona, "workspace_write")
    assert persona.standing is False
    result = call(persona, "workspace_list")
    assert result["code"] == "stamp_unavailable"
    assert "not standing" in result["reason"]


# What a caller, the records and the log are told -----------------------------------------------


def test_a_refusal_is_one_result_one_record_and_one_log_line_saying_the_same(caplog) -> None:
    """V1-ACC-8, V1-CONS-2, VX-SEC-7: a denied call answers with code, boundary and reason; its
    refusal record holds the tool, action, rule, the operation as recorded and the stamp it was
    judged under; the WARNING line names tool, persona, code, boundary and correlation id."""
    persona = standing_persona()
    caplog.set_level(logging.WARNING, logger="virgo.runtime")
    path = "../../etc/passwd"
    result = handle(persona, "workspace_read", {"path": path}, "refusal-1")
    reason = f"path {path!r} leads outside the persona's workspace"
    assert result == {
        "ok": False,
        "code": "boundary_denied",
        "boundary": "cross-scope-access",
        "reason": reason,
        "tool": "workspace_read",
        "correlation_id": "refusal-1",
    }
    record = RefusalRecord.objects.get(persona=persona)
    assert (record.tool_name, record.handler_action, record.code, record.boundary) == (
        "workspace_read",
        "workspace.read",
        "boundary_denied",
        "cross-scope-access",
    )
    assert (record.rule, record.reason, record.correlation_id) == (
        "path-escape",
        reason,
        "refusal-1",
    )
    assert record.stamp_hash == load_active_stamp(persona).stamp_hash
    assert record.operation["target"]["path"] == path
    assert record.operation["tool"] == "workspace_read"
    assert [r.getMessage() for r in caplog.records if r.name == "virgo.runtime"] == [
        f"refused tool=workspace_read persona={persona.uuid} code=boundary_denied "
        f"boundary=cross-scope-access correlation=refusal-1: {reason}"
    ]


def test_refusals_before_and_without_a_verdict_say_what_was_wrong(caplog) -> None:
    """V1-CONS-2: a bad correlation id is refused before the stamp is read, naming the rule; a
    tool the stamp lacks is recorded under the stamp that lacks it; names too long for a record
    are cut to its columns, never refused unrecorded."""
    persona = standing_persona()
    caplog.set_level(logging.WARNING, logger="virgo.runtime")
    rule = "correlation id must be 1-200 safe chars"
    for bad in ("", "x" * 250, "two words"):
        assert handle(persona, "workspace_list", {}, bad) == {
            "ok": False,
            "code": "invalid_correlation_id",
            "boundary": None,
            "reason": rule,
            "tool": "workspace_list",
            "correlation_id": bad,
        }
    assert handle(persona, "workspace_list", {}, 7)["correlation_id"] == "7"  # type: ignore[arg-type]
    cut = RefusalRecord.objects.get(
        code="invalid_correlation_id", reason=rule, correlation_id="x" * 200
    )
    assert (cut.stamp_hash, cut.handler_action, cut.boundary, cut.rule, cut.operation) == (
        "",
        "",
        "",
        "",
        None,
    )
    assert (
        f"refused tool=workspace_list persona={persona.uuid} code=invalid_correlation_id "
        f"boundary=- correlation=: {rule}" in [r.getMessage() for r in caplog.records]
    )
    name = "t" * 150
    refused = handle(persona, name, {}, "long-name")
    assert (refused["code"], refused["tool"]) == ("not_granted", name)
    record = RefusalRecord.objects.get(correlation_id="long-name")
    assert record.tool_name == name[:100]
    assert record.stamp_hash == load_active_stamp(persona).stamp_hash


def test_what_runs_answers_with_its_tool_correlation_and_result_and_a_failure_likewise() -> None:
    """V1-CONS-2, V1-WS-2: a call that ran is `ok` with tool, correlation id and the tool's result;
    a failure of the work itself (a missing file) says so in the same shape and is no refusal."""
    persona = standing_persona()
    written = handle(persona, "workspace_write", {"path": "QUEUE.md", "content": "x"}, "ran-1")
    assert set(written) == {"ok", "tool", "correlation_id", "result"}
    assert (written["ok"], written["tool"], written["correlation_id"]) == (
        True,
        "workspace_write",
        "ran-1",
    )
    assert written["result"]["sha256"] == hashlib.sha256(b"x").hexdigest()
    assert handle(persona, "workspace_read", {"path": "memory/none.md"}, "ran-2") == {
        "ok": False,
        "code": "not_found",
        "boundary": None,
        "reason": "'memory/none.md' does not exist",
        "tool": "workspace_read",
        "correlation_id": "ran-2",
    }
    assert not RefusalRecord.objects.exists()


@pytest.mark.parametrize(
    ("error", "code", "name", "retryable", "says"),
    [
        (OSError(errno.ENOSPC, "No space left on device"), "no_space", "ENOSPC", True, None),
        (OSError(errno.EIO, "Input/output error"), "io_error", "EIO", True, None),
        (OSError(errno.EXDEV, "Invalid cross-device link"), "os_error", "EXDEV", False, None),
        (OSError("no errno"), "os_error", "EUNKNOWN", False, "EUNKNOWN (EUNKNOWN)"),
    ],
    ids=["no-space", "io", "unlisted", "no-errno"],
)
def test_an_os_error_says_its_kind_and_whether_to_retry(
    monkeypatch, error: OSError, code: str, name: str, retryable: bool, says: str | None
) -> None:
    """VX-SEC-11: whatever errno the disk raises, handle() answers with the kind (`os_error` for
    one it does not name), the errno's name (`EUNKNOWN` without one), whether the same call may
    succeed later (a full disk, an I/O error: yes), the persona's own path and never the
    server's; and records it."""
    persona = standing_persona()

    def failing(tool_call):
        error.filename = "/srv/virgo/home/personas/secret/QUEUE.md"
        raise error

    monkeypatch.setitem(HANDLERS._handlers, "workspace.read", failing)
    result = handle(persona, "workspace_read", {"path": "QUEUE.md"}, "os-1")
    detail = says or f"{error.strerror} ({name})"
    assert result == {
        "ok": False,
        "code": code,
        "boundary": None,
        "reason": f"the file system refused workspace_read on 'QUEUE.md': {detail}",
        "tool": "workspace_read",
        "correlation_id": "os-1",
        "errno": name,
        "retryable": retryable,
    }
    assert RefusalRecord.objects.get(persona=persona).code == code


def test_an_os_error_while_the_call_is_read_is_a_recorded_result_too() -> None:
    """VX-SEC-11: the disk can refuse before the tool runs (the workspace root, made when the
    call's path is looked at, is a file): a structured, recorded result naming no server path,
    never an exception out of handle()."""
    persona = standing_persona()
    stamp = load_active_stamp(persona)
    root = stamp.workspace_for(stamp.tools["workspace_read"]).root
    root.parent.mkdir(parents=True, exist_ok=True)
    root.write_text("not a directory")
    result = handle(persona, "workspace_read", {"path": "QUEUE.md"}, "root-1")
    assert result == {
        "ok": False,
        "code": "os_error",
        "boundary": None,
        "reason": "the file system refused workspace_read: File exists (EEXIST)",
        "tool": "workspace_read",
        "correlation_id": "root-1",
        "errno": "EEXIST",
        "retryable": False,
    }
    record = RefusalRecord.objects.get(persona=persona)
    assert (record.code, record.handler_action, record.operation) == (
        "os_error",
        "workspace.read",
        None,
    )
