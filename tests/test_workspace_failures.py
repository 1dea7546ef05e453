"""Workspace files with a second name, and what the operating system refuses, through handle().

A hard link is another name for the same file: `memory/notes.md` linked to `.env` (or to a file
of another persona's workspace, or of VIRGO_HOME) reads the secret under an innocent name, and
no check of the name can see it. Every tool that reads, hashes, writes or sends a file refuses
one with more than one link. And whatever the disk says (a name too long, a file too large, not a
directory), handle() answers with a structured, recorded result, never an exception.
"""

import hashlib
import os
import resource
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from personas.models import Persona
from runtime.models import RefusalRecord
from runtime.stamp import load_active_stamp
from runtime.tools.workspace import STANDARD_MUTABLE_PATHS, HardLinked, Workspace
from tests.channel_support import OPS, running_hub, surface_persona
from tests.runtime_support import call, standing_persona

pytestmark = pytest.mark.django_db

SECRET = "ANTHROPIC_API_KEY=sk-ant-do-not-leak-0123456789"


def root_of(persona: Persona) -> Path:
    stamp = load_active_stamp(persona)
    return stamp.workspace_for(stamp.tools["workspace_read"]).ensure()


def linked_to_secret(persona: Persona, name: str = "memory/notes.md") -> Path:
    """`.env` in the workspace root, and `name` a hard link to it."""
    root = root_of(persona)
    secret = root / ".env"
    secret.write_text(SECRET)
    (root / "memory").mkdir(exist_ok=True)
    os.link(secret, root / name)
    return secret


def assert_hard_link_refused(result: dict, persona: Persona, tool: str) -> None:
    assert (result["ok"], result["code"], result["boundary"]) == (
        False,
        "hard_link",
        "cross-scope-access",
    ), result
    assert "hard links" in result["reason"]
    text = repr(result)
    assert SECRET not in text and hashlib.sha256(SECRET.encode()).hexdigest() not in text
    assert RefusalRecord.objects.filter(persona=persona, tool_name=tool, code="hard_link").exists()


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("workspace_read", {"path": "memory/notes.md"}),
        ("workspace_hash", {"path": "memory/notes.md"}),
        ("workspace_stat", {"path": "memory/notes.md"}),
        ("workspace_write", {"path": "memory/notes.md", "content": "x"}),
        ("workspace_write", {"path": "memory/notes.md", "content": "x", "mode": "append"}),
        ("workspace_write", {"path": "memory/notes.md", "content": "x", "expected_sha256": ""}),
    ],
    ids=["read", "hash", "stat", "replace", "append", "conditional"],
)
def test_a_hard_link_to_a_secret_is_refused_by_every_file_tool(tool: str, arguments: dict) -> None:
    """VX-SEC-11: read, hash, stat and every write of a file with two links are refused loudly
    and recorded; neither the secret nor its hash comes back, and the secret is untouched (an
    append would have copied it into a new file of one link)."""
    persona = standing_persona()
    secret = linked_to_secret(persona)
    result = call(persona, tool, arguments)
    assert_hard_link_refused(result, persona, tool)
    assert secret.read_text() == SECRET
    assert secret.stat().st_nlink == 2


def test_a_hard_link_is_not_listed_and_an_ordinary_file_still_is() -> None:
    """VX-SEC-11: listing does not show (nor size) a file with two links; single-link files
    are read as ever."""
    persona = standing_persona()
    linked_to_secret(persona)
    assert call(persona, "workspace_write", {"path": "memory/plain.md", "content": "ok"})["ok"]
    listed = call(persona, "workspace_list", {"path": "memory"})["result"]
    assert [entry["name"] for entry in listed["entries"]] == ["plain.md"]
    assert call(persona, "workspace_read", {"path": "memory/plain.md"})["result"]["content"] == (
        "ok"
    )


def test_a_hard_link_to_another_personas_file_is_refused() -> None:
    """VX-SEC-11: the other name may lie outside the workspace (here: a peer's own file)."""
    owner_persona, peer = standing_persona(), standing_persona()
    private = "the peer's own notes, for nobody else"
    assert call(peer, "workspace_write", {"path": "memory/private.md", "content": private})["ok"]
    (root_of(owner_persona) / "memory").mkdir()
    os.link(root_of(peer) / "memory/private.md", root_of(owner_persona) / "memory/shared.md")
    result = call(owner_persona, "workspace_read", {"path": "memory/shared.md"})
    assert_hard_link_refused(result, owner_persona, "workspace_read")
    assert private not in repr(result)


def test_a_hard_linked_file_is_not_deleted(settings) -> None:  # type: ignore[no-untyped-def]
    """VX-SEC-11: delete (which asks first through handle()) refuses too, at the tool."""
    space = Workspace(root=settings.VIRGO_HOME / "ws", mutable_paths=STANDARD_MUTABLE_PATHS)
    root = space.ensure()
    (root / ".env").write_text(SECRET)
    (root / "memory").mkdir()
    os.link(root / ".env", root / "memory/notes.md")
    with pytest.raises(HardLinked):
        space.write("memory/notes.md", "", mode="delete")
    assert (root / "memory/notes.md").exists()


def test_a_hard_link_is_never_sent_to_the_hub(settings) -> None:  # type: ignore[no-untyped-def]
    """VX-SEC-11: send_human_file refuses a file with two links before anything is sent."""
    with running_hub(settings) as hub:
        persona = surface_persona()
        linked_to_secret(persona, "memory/report.md")
        result = call(persona, "send_human_file", {"binding": OPS, "path": "memory/report.md"})
        assert_hard_link_refused(result, persona, "send_human_file")
        assert hub.received == []


# What the operating system refuses ------------------------------------------------------------

LONG = "a" * 256


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("workspace_read", {"path": f"memory/{LONG}"}),
        ("workspace_stat", {"path": f"memory/{LONG}/x.md"}),
        ("workspace_list", {"path": LONG}),
        ("workspace_write", {"path": f"memory/{LONG}", "content": "x"}),
        ("workspace_write", {"path": f"memory/{'é' * 128}", "content": "x"}),
    ],
    ids=["read", "stat", "list", "write", "write-256-bytes-in-128-characters"],
)
def test_a_path_segment_over_255_bytes_is_a_recorded_refusal(tool: str, arguments: dict) -> None:
    """VX-SEC-11: the disk's name limit is the workspace's: refused, naming the segment's
    limit, recorded; never an exception out of handle()."""
    persona = standing_persona()
    result = call(persona, tool, arguments)
    assert (result["ok"], result["code"], result["tool"]) == (False, "invalid_arguments", tool)
    assert "is longer than 255 bytes" in result["reason"]
    assert RefusalRecord.objects.get(persona=persona).code == "invalid_arguments"
    # The limit is the file system's own, not a smaller one.
    name = "memory/" + "b" * 252 + ".md"
    assert call(persona, "workspace_write", {"path": name, "content": "x"})["ok"]


@pytest.mark.parametrize("tool", ["workspace_read", "workspace_hash", "workspace_stat"])
def test_an_os_error_of_a_tool_is_a_structured_recorded_failure(tool: str) -> None:
    """VX-SEC-11: ENOTDIR (a file used as a directory) from the disk: the code says what kind,
    errno names it, the reason names the persona's path and not the server's, a record row
    is written; handle() raises nothing."""
    persona = standing_persona()
    assert call(persona, "workspace_write", {"path": "QUEUE.md", "content": "- one\n"})["ok"]
    result = call(persona, tool, {"path": "QUEUE.md/inside.md"})
    assert (result["ok"], result["code"], result["errno"], result["retryable"]) == (
        False,
        "wrong_kind",
        "ENOTDIR",
        False,
    )
    assert result["tool"] == tool and result["boundary"] is None
    assert "'QUEUE.md/inside.md'" in result["reason"] and "Not a directory" in result["reason"]
    assert str(root_of(persona)) not in result["reason"]
    record = RefusalRecord.objects.get(persona=persona)
    assert (record.tool_name, record.code, record.reason) == (tool, "wrong_kind", result["reason"])


@contextmanager
def files_limited_to(size: int) -> Iterator[None]:
    """This process may write no file past `size` bytes (RLIMIT_FSIZE; Python ignores SIGXFSZ,
    so the write fails with EFBIG). The test database is in memory or on a server."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def test_a_write_that_fails_half_way_leaves_the_old_file_and_no_temporary() -> None:
    """VX-SEC-11, V1-STD-2, V1-WS-1: an append that the disk cuts off half-way (EFBIG past
    3 MiB of a 6 MiB file) is a recorded `file_too_large` failure; the file keeps every old
    byte and no temporary file is left beside it. A write done in place would have
    truncated it."""
    persona = standing_persona()
    root = root_of(persona)
    (root / "memory").mkdir()
    target = root / "memory/journal.md"
    old = ("0123456789abcde\n" * (6 * 1024 * 1024 // 16)).encode()
    target.write_bytes(old)
    target.chmod(0o600)
    with files_limited_to(3 * 1024 * 1024):
        result = call(
            persona,
            "workspace_write",
            {"path": "memory/journal.md", "content": "one more line\n", "mode": "append"},
        )
    assert (result["ok"], result["code"], result["errno"]) == (False, "file_too_large", "EFBIG")
    assert target.read_bytes() == old
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(path.name for path in (root / "memory").iterdir()) == ["journal.md"]
    assert RefusalRecord.objects.get(persona=persona).code == "file_too_large"
    appended = call(
        persona,
        "workspace_write",
        {"path": "memory/journal.md", "content": "one more line\n", "mode": "append"},
    )
    assert appended["ok"] and target.read_bytes() == old + b"one more line\n"
