"""The workspace tools on real files: ranged reads, atomic confined writes, every escape refused."""

import hashlib
import os
from pathlib import Path

import pytest

from runtime import workspace as ws
from runtime.workspace import (
    STANDARD_MUTABLE_PATHS,
    AuthorityPath,
    Conflict,
    InvalidArgument,
    InvalidPath,
    NotFound,
    NotMutable,
    PathEscape,
    SecretPath,
    SymlinkWrite,
    Workspace,
    normalise_path,
    workspace_root,
)

PRIVATE_KEY_HEADER = "-----BEGIN OPENSSH PRIVATE KEY-----"


@pytest.fixture
def home(tmp_path: Path, settings) -> Path:
    settings.VIRGO_HOME = tmp_path / "home"
    return settings.VIRGO_HOME


@pytest.fixture
def space(home: Path) -> Workspace:
    root = workspace_root(workspace="work", project="core", persona_uuid="p-1")
    return Workspace(root=root, mutable_paths=(*STANDARD_MUTABLE_PATHS, "worktrees/core/**"))


def test_the_root_follows_the_recorded_layout(home: Path) -> None:
    assert workspace_root(workspace="work", project="core", persona_uuid="u") == (
        home / "workspaces" / "work" / "core" / "u"
    )
    assert workspace_root(workspace="root", project=None, persona_uuid="u") == (
        home / "workspaces" / "root" / "_scope" / "u"
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("QUEUE.md", "QUEUE.md"),
        ("./memory//notes.md", "memory/notes.md"),
        ("memory/v1..v2.md", "memory/v1..v2.md"),
        ("memory/", "memory"),
    ],
)
def test_paths_normalise_to_one_spelling(raw: str, expected: str) -> None:
    assert normalise_path(raw) == expected


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ("../other/QUEUE.md", PathEscape),
        ("memory/../QUEUE.md", PathEscape),
        ("/etc/passwd", PathEscape),
        ("~/notes.md", PathEscape),
        ("memory/\x00.md", InvalidPath),
        ("memory\\notes.md", InvalidPath),
        ("", InvalidPath),
        (7, InvalidPath),
    ],
)
def test_bad_paths_are_refused_before_the_disk_is_touched(raw: object, error: type) -> None:
    with pytest.raises(error):
        normalise_path(raw)


def test_writes_are_atomic_owner_private_and_leave_no_temporary_files(space: Workspace) -> None:
    """V1-STD-2, V1-WS-1: a write lands whole on a mutable path, mode 0600, no temp left."""
    result = space.write("memory/notes/today.md", "first\n")
    assert result["sha256"] == hashlib.sha256(b"first\n").hexdigest()
    target = space.root / "memory" / "notes" / "today.md"
    assert target.read_bytes() == b"first\n"
    assert oct(target.stat().st_mode & 0o777) == "0o600"
    space.write("memory/notes/today.md", "second\n", mode="append")
    assert target.read_bytes() == b"first\nsecond\n"
    space.write("QUEUE.md", "- [ ] review #12\n")
    assert sorted(p.name for p in space.root.rglob("*")) == [
        "QUEUE.md",
        "memory",
        "notes",
        "today.md",
    ]


def test_create_never_overwrites_and_expected_hash_guards_concurrent_writers(
    space: Workspace,
) -> None:
    """V1-WS-1: conditional writes make lost updates impossible."""
    space.write("FINDINGS.md", "a", mode="create")
    with pytest.raises(Conflict):
        space.write("FINDINGS.md", "b", mode="create")
    with pytest.raises(Conflict):
        space.write("FINDINGS.md", "c", expected_sha256=hashlib.sha256(b"zzz").hexdigest())
    space.write("FINDINGS.md", "d", expected_sha256=hashlib.sha256(b"a").hexdigest())
    assert (space.root / "FINDINGS.md").read_text() == "d"
    with pytest.raises(Conflict):
        space.write("DECISIONS.md", "x", expected_sha256=hashlib.sha256(b"a").hexdigest())
    space.write("DECISIONS.md", "x", expected_sha256="")


@pytest.mark.parametrize(
    "path",
    ["README.md", "memory", "QUEUE.md.bak", "memoryx/a.md", "worktrees/web/a.py", "notes/QUEUE.md"],
)
def test_writes_outside_the_mutable_paths_are_refused(space: Workspace, path: str) -> None:
    """V1-STD-2, V1-WS-1: only QUEUE.md, DECISIONS.md, FINDINGS.md, memory/** and overlays."""
    with pytest.raises(NotMutable):
        space.write(path, "x")
    assert not (space.root / path).exists()


def test_a_class_overlay_adds_its_project_worktree(space: Workspace) -> None:
    """V1-WS-1: class overlays may add project worktrees."""
    space.write("worktrees/core/src/app.py", "print('hi')\n")
    assert (space.root / "worktrees/core/src/app.py").exists()


def test_writes_never_go_through_a_symlink(space: Workspace, tmp_path: Path) -> None:
    """V1-WS-1: a symlinked directory or file is refused even when it points inside."""
    root = space.ensure()
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "memory").symlink_to(outside)
    with pytest.raises(SymlinkWrite):
        space.write("memory/x.md", "x")
    assert list(outside.iterdir()) == []
    (root / "memory").unlink()
    (root / "memory").mkdir()
    (root / "elsewhere.md").write_text("keep")
    (root / "QUEUE.md").symlink_to(root / "elsewhere.md")
    with pytest.raises(SymlinkWrite):
        space.write("QUEUE.md", "clobber")
    assert (root / "elsewhere.md").read_text() == "keep"


def test_reads_follow_symlinks_inside_and_refuse_those_leading_out(
    space: Workspace, tmp_path: Path
) -> None:
    root = space.ensure()
    (root / "FINDINGS.md").write_text("inside")
    (root / "link.md").symlink_to(root / "FINDINGS.md")
    assert space.read("link.md")["content"] == "inside"
    (tmp_path / "other.md").write_text("outside")
    (root / "out.md").symlink_to(tmp_path / "other.md")
    with pytest.raises(PathEscape):
        space.read("out.md")
    assert "out.md" not in [entry["name"] for entry in space.list()["entries"]]


def test_a_symlink_to_a_secret_is_as_secret_as_the_secret(space: Workspace) -> None:
    """V1-GB-4: the resolved name is checked too."""
    root = space.ensure()
    (root / ".env").write_text("TOKEN=abc")
    (root / "notes.md").symlink_to(root / ".env")
    with pytest.raises(SecretPath):
        space.read("notes.md")
    assert space.list()["entries"] == []


def test_secret_and_authority_files_are_never_listed_nor_read(space: Workspace) -> None:
    """V1-GB-4, V1-GB-5: keys, .env, credential stores and lease files stay invisible."""
    root = space.ensure()
    hidden = [".env", "deploy.pem", "id_rsa.pub", "credentials.json", ".netrc", "worker.lease"]
    for name in [*hidden, "QUEUE.md"]:
        (root / name).write_text("x")
    (root / "secrets").mkdir()
    (root / "secrets" / "notes.md").write_text("x")
    assert [entry["name"] for entry in space.list()["entries"]] == ["QUEUE.md"]
    for name in hidden[:-1]:
        with pytest.raises(SecretPath):
            space.read(name)
    with pytest.raises(SecretPath):
        space.stat("secrets/notes.md")
    with pytest.raises(AuthorityPath):
        space.hash("worker.lease")
    with pytest.raises(AuthorityPath):
        space.write("memory/worker.fence", "1")


def test_a_file_holding_a_secret_value_is_read_by_no_range(space: Workspace) -> None:
    """V1-GB-4, VX-SEC-7: a key placed in an innocent file is refused whatever range is asked,
    the key's header split across pages or left out of the range included; its neighbours and
    the file once the key is gone read as usual."""
    root = space.ensure()
    (root / "memory").mkdir()
    body = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ" * 40
    text = "# notes\n" + "x" * (ws.READ_MAX_LENGTH + 100) + PRIVATE_KEY_HEADER + "\n" + body
    (root / "memory" / "notes.md").write_text(text)
    (root / "memory" / "plain.md").write_text("nothing to hide\n")
    header_at = text.index(PRIVATE_KEY_HEADER)
    for offset, length in ((0, 16), (header_at + 5, 64), (header_at + 40, 4096), (0, 1)):
        with pytest.raises(SecretPath):
            space.read("memory/notes.md", offset=offset, length=length)
    assert space.read("memory/plain.md")["content"] == "nothing to hide\n"
    space.write("memory/notes.md", "# notes\nthe key was rotated\n")
    assert "rotated" in space.read("memory/notes.md")["content"]


def test_ranged_reads_walk_a_large_file_with_continuation(space: Workspace) -> None:
    """V1-WS-2, V1-STD-1, V1-ACC-4: offset/length reads with next_offset, total_size and done."""
    text = "".join(f"line {i:05d} ünïcødé ✓\n" for i in range(20000))
    data = text.encode()
    assert len(data) > 2 * ws.READ_MAX_LENGTH
    space.write("memory/big.md", "")
    (space.root / "memory/big.md").write_bytes(data)
    pages: list[str] = []
    offset = 0
    while True:
        page = space.read("memory/big.md", offset=offset, length=ws.READ_MAX_LENGTH - 1)
        assert page["encoding"] == "utf-8"
        assert page["total_size"] == len(data)
        pages.append(page["content"])
        offset = page["next_offset"]
        if page["done"]:
            break
    assert len(pages) > 2
    assert "".join(pages) == text
    assert offset == len(data)
    assert space.read("memory/big.md", offset=len(data))["done"] is True
    with pytest.raises(InvalidArgument):
        space.read("memory/big.md", length=ws.READ_MAX_LENGTH + 1)
    with pytest.raises(InvalidArgument):
        space.read("memory/big.md", offset=-1)


def test_binary_content_comes_back_as_base64(space: Workspace) -> None:
    space.ensure()
    (space.root / "blob.bin").write_bytes(b"\xff\x00\xfe")
    page = space.read("blob.bin")
    assert page == page | {"encoding": "base64", "content": "/wD+", "done": True}


def test_list_stat_and_hash_describe_the_workspace(space: Workspace) -> None:
    """V1-STD-1: listing (paginated), metadata and hashes."""
    for name in ("DECISIONS.md", "FINDINGS.md", "QUEUE.md"):
        space.write(name, name)
    space.write("memory/a.md", "a")
    first = space.list(limit=2)
    assert [e["name"] for e in first["entries"]] == ["DECISIONS.md", "FINDINGS.md"]
    assert first["done"] is False
    second = space.list(cursor=first["next_cursor"], limit=2)
    assert [e["name"] for e in second["entries"]] == ["QUEUE.md", "memory"]
    assert second["done"] is True
    assert space.list("memory")["entries"][0]["path"] == "memory/a.md"
    assert space.stat("QUEUE.md") | {"modified": None} == {
        "path": "QUEUE.md",
        "type": "file",
        "size": 8,
        "modified": None,
        "mutable": True,
    }
    assert space.stat("memory")["type"] == "directory"
    assert space.hash("memory/a.md")["sha256"] == hashlib.sha256(b"a").hexdigest()
    with pytest.raises(NotFound):
        space.stat("nothing.md")


def test_delete_removes_the_file(space: Workspace) -> None:
    space.write("memory/old.md", "x")
    assert space.write("memory/old.md", "", mode="delete")["deleted"] is True
    assert not (space.root / "memory/old.md").exists()
    with pytest.raises(NotFound):
        space.write("memory/old.md", "", mode="delete")


def test_the_root_and_the_directories_above_it_are_owner_only(space: Workspace, home: Path) -> None:
    space.ensure()
    for directory in (space.root, *space.root.parents):
        if directory == home:
            break
        assert oct(os.stat(directory).st_mode & 0o777) == "0o700", directory


def test_reading_a_directory_is_refused_and_keeps_no_descriptor_open(space: Workspace) -> None:
    """V1-STD-1, VX-SEC-11: read and hash of a directory (or of a hard-linked file) are clear
    refusals, and each closes what it opened: a persona repeating them cannot use up the
    server's file descriptors."""
    space.write("memory/a.md", "a")
    os.link(space.root / "memory/a.md", space.root / "memory/b.md")
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(50):
        for call in (
            lambda: space.read("memory"),
            lambda: space.hash("memory"),
            lambda: space.read("memory/a.md"),
        ):
            with pytest.raises(ws.WorkspaceError):
                call()
    assert len(os.listdir("/proc/self/fd")) == before
