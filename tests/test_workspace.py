"""The workspace tools on real files: ranged reads, atomic confined writes, every escape refused."""

import hashlib
import os
import stat
from pathlib import Path

import pytest

from runtime.tools import workspace as ws
from runtime.tools.workspace import (
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


def test_resolving_makes_the_root_owner_only_unless_only_looking(space: Workspace) -> None:
    """V1-WS-1, VX-SEC-9: a path is resolved in a root made for it (owner-only) when a tool is to
    touch it; explain's look (create=False) resolves it as spelt and makes nothing."""
    assert not space.root.exists()
    looked = space.resolve_inside("memory/notes.md", create=False)
    assert looked == (Path(os.path.realpath(space.root)) / "memory" / "notes.md", "memory/notes.md")
    assert not space.root.exists()
    made = space.resolve_inside("memory/notes.md")
    assert made == (space.root.resolve() / "memory" / "notes.md", "memory/notes.md")
    assert stat.S_IMODE(space.root.stat().st_mode) == 0o700


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


# What a refusal says, and where each limit lies: the reason is part of the tool result a persona
# reads, so it names the path and the rule (a refusal saying `None` tells the persona nothing).


def refusal(call) -> ws.WorkspaceError:  # type: ignore[no-untyped-def]
    with pytest.raises(ws.WorkspaceError) as raised:
        call()
    assert str(raised.value) == raised.value.reason
    return raised.value


def prepared(space: Workspace) -> Path:
    """A workspace holding a file, a directory, a symlink out, a secret and a lease."""
    root = space.ensure()
    space.write("FINDINGS.md", "a")
    space.write("memory/sub/inner.md", "inner")
    (root / "memory" / "plain").mkdir()
    (root / "memory" / "flat.md").write_text("not a directory")
    (root / ".env").write_text("TOKEN=abc")
    (root / "worker.lease").write_text("1")
    (root / "out.md").symlink_to(root.parent)
    return root


MUTABLE = "QUEUE.md, DECISIONS.md, FINDINGS.md, memory/**, worktrees/core/**"
REFUSALS = [
    ("not a string", lambda s: normalise_path(7), "invalid_path", "path must be a string"),
    ("nul", lambda s: normalise_path("a\x00b"), "invalid_path", "path contains a NUL byte"),
    (
        "backslash",
        lambda s: normalise_path("memory\\a.md"),
        "invalid_path",
        "path contains a backslash; use '/' between segments",
    ),
    (
        "too long",
        lambda s: normalise_path("a/" * 512 + "b"),
        "invalid_path",
        "path is longer than 1024 characters",
    ),
    (
        "control character",
        lambda s: normalise_path("memory/\x1f.md"),
        "invalid_path",
        "path contains a control character",
    ),
    (
        "absolute",
        lambda s: normalise_path("/etc/passwd"),
        "path_escape",
        "path '/etc/passwd' is absolute; paths are relative to the workspace root",
    ),
    (
        "home",
        lambda s: normalise_path("~/notes.md"),
        "path_escape",
        "path '~/notes.md' is absolute; paths are relative to the workspace root",
    ),
    (
        "dot dot",
        lambda s: normalise_path("memory/../QUEUE.md"),
        "path_escape",
        "path 'memory/../QUEUE.md' contains '..'",
    ),
    (
        "long segment",
        lambda s: normalise_path("memory/" + "é" * 128),
        "invalid_path",
        f"path segment {'é' * 40!r}... is longer than 255 bytes",
    ),
    (
        "empty",
        lambda s: normalise_path("./"),
        "invalid_path",
        "path must name a file inside the workspace",
    ),
    (
        "mode",
        lambda s: s.write("QUEUE.md", "x", mode="move"),
        "invalid_arguments",
        "mode must be one of replace, append, create, delete",
    ),
    (
        "authority write",
        lambda s: s.write("memory/worker.fence", "1"),
        "authority_path",
        "'memory/worker.fence' is lease, fence or authority material",
    ),
    (
        "file in an authority directory",
        lambda s: s.read("leases/notes.md"),
        "authority_path",
        "'leases/notes.md' is lease, fence or authority material",
    ),
    (
        "write in an authority directory",
        lambda s: s.write("memory/fences/today.md", "1"),
        "authority_path",
        "'memory/fences/today.md' is lease, fence or authority material",
    ),
    (
        "not mutable",
        lambda s: s.write("README.md", "x"),
        "not_mutable",
        f"'README.md' is not a mutable path of this workspace binding ({MUTABLE})",
    ),
    (
        "content too large",
        lambda s: s.write("QUEUE.md", "x" * (ws.WRITE_MAX_BYTES + 1)),
        "too_large",
        f"content is {ws.WRITE_MAX_BYTES + 1} bytes; the limit is {ws.WRITE_MAX_BYTES}",
    ),
    (
        "expected absent",
        lambda s: s.write("QUEUE.md", "x", expected_sha256="0" * 64),
        "conflict",
        "'QUEUE.md' changed: its sha256 is absent",
    ),
    (
        "expected other",
        lambda s: s.write("FINDINGS.md", "x", expected_sha256=""),
        "conflict",
        f"'FINDINGS.md' changed: its sha256 is {hashlib.sha256(b'a').hexdigest()}",
    ),
    (
        "create existing",
        lambda s: s.write("FINDINGS.md", "x", mode="create"),
        "conflict",
        "'FINDINGS.md' already exists",
    ),
    (
        "delete missing",
        lambda s: s.write("memory/gone.md", "", mode="delete"),
        "not_found",
        "'memory/gone.md' does not exist",
    ),
    (
        "delete in a missing directory",
        lambda s: s.write("memory/gone/deeper/old.md", "", mode="delete"),
        "not_found",
        "'memory/gone' does not exist",
    ),
    (
        "write through a file",
        lambda s: s.write("memory/flat.md/x.md", "x"),
        "wrong_kind",
        "'memory/flat.md' is not a directory",
    ),
    (
        "write over a directory",
        lambda s: s.write("memory/plain", "x"),
        "wrong_kind",
        "'memory/plain' is not a regular file",
    ),
    (
        "read a directory",
        lambda s: s.read("memory/plain"),
        "wrong_kind",
        "'memory/plain' is not a regular file",
    ),
    (
        "hash a directory",
        lambda s: s.hash("memory"),
        "wrong_kind",
        "'memory' is not a regular file",
    ),
    ("read missing", lambda s: s.read("nothing.md"), "not_found", "'nothing.md' does not exist"),
    ("hash missing", lambda s: s.hash("nothing.md"), "not_found", "'nothing.md' does not exist"),
    ("stat missing", lambda s: s.stat("nothing.md"), "not_found", "'nothing.md' does not exist"),
    ("list missing", lambda s: s.list("nothing"), "not_found", "'nothing' does not exist"),
    (
        "list a file",
        lambda s: s.list("FINDINGS.md"),
        "wrong_kind",
        "'FINDINGS.md' is not a directory",
    ),
    (
        "escape",
        lambda s: s.read("out.md"),
        "path_escape",
        "path 'out.md' resolves outside the workspace",
    ),
    (
        "secret",
        lambda s: s.read(".env"),
        "secret_path",
        "'.env' looks like secret credential material (a dotenv file: an application's secrets, "
        "one variable a line)",
    ),
    (
        "lease",
        lambda s: s.stat("worker.lease"),
        "authority_path",
        "'worker.lease' is lease, fence or authority material",
    ),
    (
        "limit",
        lambda s: s.list(limit=ws.LIST_MAX_LIMIT + 1),
        "invalid_arguments",
        "limit must be at least 1 and at most 1000",
    ),
    (
        "limit zero",
        lambda s: s.list(limit=0),
        "invalid_arguments",
        "limit must be at least 1 and at most 1000",
    ),
    ("cursor", lambda s: s.list(cursor=-1), "invalid_arguments", "cursor must be at least 0"),
    ("cursor type", lambda s: s.list(cursor="2"), "invalid_arguments", "cursor must be an integer"),
    (
        "offset",
        lambda s: s.read("FINDINGS.md", offset=-1),
        "invalid_arguments",
        "offset must be at least 0",
    ),
    (
        "offset type",
        lambda s: s.read("FINDINGS.md", offset=True),
        "invalid_arguments",
        "offset must be an integer",
    ),
    (
        "length",
        lambda s: s.read("FINDINGS.md", length=0),
        "invalid_arguments",
        f"length must be at least 1 and at most {ws.READ_MAX_LENGTH}",
    ),
]


@pytest.mark.parametrize(
    ("case", "call", "code", "reason"), REFUSALS, ids=[case[0] for case in REFUSALS]
)
def test_each_refusal_names_the_path_and_the_rule(
    space: Workspace, case: str, call, code: str, reason: str
) -> None:
    """V1-WS-1, V1-STD-1: a refused call answers with its code and a reason naming the path
    and the limit or rule it broke; nothing is created on the way."""
    prepared(space)
    before = sorted(space.root.rglob("*"))
    refused = refusal(lambda: call(space))
    assert (refused.code, refused.reason) == (code, reason)
    assert sorted(space.root.rglob("*")) == before


def test_every_limit_admits_its_own_value(space: Workspace) -> None:
    """V1-WS-1, V1-WS-2: each limit is inclusive: the largest path, segment, write, file,
    page and range it names are accepted, the next one up is refused (above)."""
    longest = "a/" * 511 + "bc"
    assert len(longest) == ws.MAX_PATH_LENGTH and normalise_path(longest) == longest
    assert normalise_path("memory/ spaced ~name.md") == "memory/ spaced ~name.md"
    assert normalise_path("./", allow_root=True) == ""
    assert normalise_path("memory/" + "é" * 127 + "x") == "memory/" + "é" * 127 + "x"
    result = space.write("QUEUE.md", "q" * ws.WRITE_MAX_BYTES)
    assert result == {
        "path": "QUEUE.md",
        "mode": "replace",
        "size": ws.WRITE_MAX_BYTES,
        "sha256": hashlib.sha256(b"q" * ws.WRITE_MAX_BYTES).hexdigest(),
    }
    (space.root / "memory").mkdir()
    big = space.root / "memory" / "big.md"
    big.write_bytes(b"b" * (ws.FILE_MAX_BYTES - 1))
    space.write("memory/big.md", "c", mode="append")
    assert big.stat().st_size == ws.FILE_MAX_BYTES
    too_large = refusal(lambda: space.write("memory/big.md", "c", mode="append"))
    assert (too_large.code, too_large.reason) == (
        "too_large",
        "appending would make 'memory/big.md' larger than the file limit",
    )
    assert big.stat().st_size == ws.FILE_MAX_BYTES
    assert space.list(limit=1)["entries"][0]["name"] == "QUEUE.md"
    assert space.list(limit=ws.LIST_MAX_LIMIT)["total"] == 2
    page = space.read("QUEUE.md", length=ws.READ_MAX_LENGTH)
    assert (page["length"], page["done"]) == (ws.READ_MAX_LENGTH, False)
    assert space.read("QUEUE.md", length=1)["content"] == "q"


@pytest.mark.parametrize(
    ("path", "patterns", "mutable"),
    [
        ("memory/a.md", ("memory/**",), True),
        ("memory/deep/a.md", ("memory/**",), True),
        ("memory/x", ("memory/**",), True),
        ("memory", ("memory/**",), False),
        ("memory/", ("memory/**",), False),
        ("memoryx/a.md", ("memory/**",), False),
        ("README.md", ("memory/**",), False),
        ("QUEUE.md", ("QUEUE.md",), True),
        ("README.md", ("QUEUE.md",), False),
        ("QUEUE.md", ("memory/**", "QUEUE.md"), True),
        ("anything/at/all.md", ("**",), True),
        ("", ("**",), False),
        ("QUEUE.md", (), False),
    ],
)
def test_a_mutable_pattern_covers_exactly_what_it_says(
    path: str, patterns: tuple[str, ...], mutable: bool
) -> None:
    """V1-WS-1: `dir/**` covers what lies strictly below dir, a plain path only itself, `**`
    every path but the root."""
    assert ws.is_mutable(path, patterns) is mutable


def test_a_tool_scoped_to_some_paths_reads_and_lists_only_towards_them(space: Workspace) -> None:
    """V1-STD-1, V1-WS-1: a stamp that scopes a reading tool to paths (a project worktree)
    lets it read only those, and list only the directories on the way to them."""
    for name in ("QUEUE.md", "memory/a.md", "worktrees/core/src/app.py"):
        space.write(name, name)
    space.ensure()
    (space.root / "worktrees" / "web").mkdir()
    (space.root / "README.md").write_text("outside the scope")
    scoped = Workspace(
        root=space.root,
        mutable_paths=space.mutable_paths,
        readable_paths=("QUEUE.md", "worktrees/core/**"),
    )
    assert scoped.read("QUEUE.md")["content"] == "QUEUE.md"
    assert scoped.read("worktrees/core/src/app.py")["content"] == "worktrees/core/src/app.py"
    assert scoped.stat("worktrees")["type"] == "directory"
    assert [e["name"] for e in scoped.list("worktrees")["entries"]] == ["core", "web"]
    assert [e["name"] for e in scoped.list("worktrees/core")["entries"]] == ["src"]
    assert "QUEUE.md" in [e["name"] for e in scoped.list()["entries"]]
    for call, path in (
        (lambda: scoped.read("README.md"), "README.md"),
        (lambda: scoped.read("worktrees"), "worktrees"),
        (lambda: scoped.hash("memory/a.md"), "memory/a.md"),
        (lambda: scoped.list("worktrees/web"), "worktrees/web"),
        (lambda: scoped.list("memory"), "memory"),
    ):
        refused = refusal(call)
        assert (refused.code, refused.reason) == (
            "out_of_scope",
            f"{path!r} is outside the paths this tool may read (QUEUE.md, worktrees/core/**)",
        )


def test_listing_hides_temporaries_secrets_escapes_and_hard_links_and_nothing_else(
    space: Workspace, tmp_path: Path
) -> None:
    """V1-STD-1, V1-GB-4, V1-GB-5, VX-SEC-11: every kind of hidden entry is skipped on its
    own, wherever the directory lists it; each visible entry says what it is."""
    root = space.ensure()
    (tmp_path / "outside.md").write_text("outside")
    hidden = {
        ".~virgo-0001": lambda p: p.write_text("temporary"),
        ".~virgo-0002": lambda p: p.write_text("temporary"),
        "deploy.pem": lambda p: p.write_text("x"),
        "worker.lease": lambda p: p.write_text("1"),
        "out-1.md": lambda p: p.symlink_to(tmp_path / "outside.md"),
        "out-2.md": lambda p: p.symlink_to(tmp_path / "outside.md"),
        "dangling.md": lambda p: p.symlink_to(root / "missing.md"),
        "key-link.md": lambda p: p.symlink_to(root / "deploy.pem"),
        "lease-link.md": lambda p: p.symlink_to(root / "worker.lease"),
        "alias.key": lambda p: p.symlink_to(root / "a.md"),
        "second-name.md": lambda p: os.link(root / "FINDINGS.md", p),
        "third-name.md": lambda p: os.link(root / "DECISIONS.md", p),
    }
    visible = ["a.md", "b.md", "c.md", "memory", "z.md"]
    for index, name in enumerate([*hidden, *visible]):
        if index % 2:
            (root / f"padding-{index:02d}.md").write_text("p")
            visible.append(f"padding-{index:02d}.md")
        if name == "second-name.md":
            (root / "FINDINGS.md").write_text("f")
        if name == "third-name.md":
            (root / "DECISIONS.md").write_text("d")
        if name in hidden:
            hidden[name](root / name)
        elif name == "memory":
            (root / name).mkdir()
        else:
            (root / name).write_text(name)
    listing = space.list(limit=ws.LIST_MAX_LIMIT)
    assert [e["name"] for e in listing["entries"]] == sorted(visible)
    assert (listing["path"], listing["total"], listing["next_cursor"], listing["done"]) == (
        "",
        len(visible),
        len(visible),
        True,
    )
    by_name = {e["name"]: e for e in listing["entries"]}
    file_info, directory_info = os.stat(root / "a.md"), os.stat(root / "memory")
    assert by_name["a.md"] == {
        "name": "a.md",
        "path": "a.md",
        "type": "file",
        "size": 4,
        "modified": ws.datetime.fromtimestamp(file_info.st_mtime, tz=ws.UTC).isoformat(),
    }
    assert by_name["memory"] == {
        "name": "memory",
        "path": "memory",
        "type": "directory",
        "size": None,
        "modified": ws.datetime.fromtimestamp(directory_info.st_mtime, tz=ws.UTC).isoformat(),
    }
    assert by_name["memory"]["modified"].endswith("+00:00")
    past = space.list(cursor=len(visible) + 5)
    assert (past["entries"], past["next_cursor"], past["done"]) == ([], len(visible) + 5, True)


def test_stat_and_hash_answer_in_full(space: Workspace) -> None:
    """V1-STD-1: stat says type, size, time and whether the binding may write it; hash covers
    the whole file, however many chunks it is read in."""
    space.write("QUEUE.md", "q")
    space.write("memory/sub/a.md", "a")
    (space.root / "README.md").write_text("readme")
    info = os.stat(space.root / "memory" / "sub")
    assert space.stat("memory/sub") == {
        "path": "memory/sub",
        "type": "directory",
        "size": None,
        "modified": ws.datetime.fromtimestamp(info.st_mtime, tz=ws.UTC).isoformat(),
        "mutable": False,
    }
    assert space.stat("README.md") | {"modified": None} == {
        "path": "README.md",
        "type": "file",
        "size": 6,
        "modified": None,
        "mutable": False,
    }
    assert space.stat("")["type"] == "directory"
    data = os.urandom(ws._HASH_CHUNK + ws._HASH_CHUNK // 2)
    (space.root / "memory" / "blob.bin").write_bytes(data)
    assert space.hash("memory/blob.bin") == {
        "path": "memory/blob.bin",
        "algorithm": "sha256",
        "sha256": hashlib.sha256(data).hexdigest(),
        "size": len(data),
    }


def test_a_read_page_says_where_it_is_and_where_the_next_starts(space: Workspace) -> None:
    """V1-WS-2: each page gives its offset, length, next offset, the file's size and whether
    it is the last; a character the range would split waits for the next page."""
    text = "héllo wörld"
    space.write("memory/a.md", text)
    data = text.encode()
    assert space.read("memory/a.md", offset=0, length=2) == {
        "path": "memory/a.md",
        "content": "h",
        "encoding": "utf-8",
        "offset": 0,
        "length": 1,
        "next_offset": 1,
        "total_size": len(data),
        "done": False,
    }
    last = space.read("memory/a.md", offset=8, length=100)  # ö starts at byte 8
    assert (last["content"], last["next_offset"], last["done"]) == ("örld", len(data), True)
    assert space.read("memory/a.md", offset=len(data) + 3)["content"] == ""
    # A range ending inside a 4-byte character stops before it; bytes that are not UTF-8, or a
    # cut character at the end of the file, come back whole as base64.
    space.write("memory/emoji.md", "ab😀cd")
    cut = space.read("memory/emoji.md", length=5)
    assert (cut["content"], cut["encoding"], cut["next_offset"]) == ("ab", "utf-8", 2)
    broken = space.read("memory/emoji.md", offset=2, length=3)
    assert (broken["encoding"], broken["length"]) == ("base64", 3)
    (space.root / "memory" / "tail.bin").write_bytes(b"ab\xf0\x9f")
    tail = space.read("memory/tail.bin")
    assert (tail["encoding"], tail["content"], tail["done"]) == ("base64", "YWLwnw==", True)
    (space.root / "memory" / "bad.bin").write_bytes(b"a\xffbcdefgh")
    bad = space.read("memory/bad.bin", length=4)
    assert (bad["encoding"], bad["length"], bad["next_offset"]) == ("base64", 4, 4)


def test_a_secret_at_the_start_or_across_a_scan_chunk_is_still_seen(space: Workspace) -> None:
    """V1-GB-4, VX-SEC-7: a token in a file's first bytes and a key header that straddles the
    boundary between two scanned chunks are both found; a clean file read after them is not
    taken for either. The refusal names the kind (VX-SEC-16: a Kingfisher rule's id, or a
    plugin's secret type where no rule has the format, a bare key header)."""
    space.ensure()
    (space.root / "memory").mkdir()
    token = "ghp_" + "A1b2C3d4" * 5
    (space.root / "memory" / "token.md").write_text(token + "\n")
    header_at = ws._SCAN_CHUNK - len(PRIVATE_KEY_HEADER) // 2
    straddling = "x" * header_at + PRIVATE_KEY_HEADER + "\nbody\n"
    (space.root / "memory" / "split.md").write_text(straddling)
    (space.root / "memory" / "clean.md").write_text("y" * (ws._SCAN_CHUNK + 10))
    (space.root / "memory" / "key.md").write_text(PRIVATE_KEY_HEADER + "\nbody\n")
    kinds = {
        "token.md": "betterleaks.github-pat",
        "split.md": "Private Key",
        "key.md": "Private Key",
    }
    for name, kind in kinds.items():
        refused = refusal(lambda name=name: space.read(f"memory/{name}", offset=0, length=8))
        assert (refused.code, refused.reason) == (
            "secret_content",
            f"'memory/{name}' holds what looks like a secret credential value ({kind})",
        )
    assert space.read("memory/clean.md", length=3)["content"] == "yyy"


def test_each_line_is_judged_whole_wherever_a_scan_chunk_ends(space: Workspace) -> None:
    """V1-GB-4, VX-SEC-14: a chunk of the scan ends at its last line's end, so a token on a
    line that starts well inside the chunk, on the last line cut by the chunk's end, or alone
    after it on an unfinished line is read whole, never in two pieces the rules miss."""
    space.ensure()
    (space.root / "memory").mkdir()
    token = "ghp_" + "A1b2C3d4" * 5
    chunk, overlap = ws._SCAN_CHUNK, ws._SCAN_OVERLAP

    def lines_to(end: int) -> str:
        return ("f" * 99 + "\n") * (end // 100) + "f" * (end % 100 - 1) + "\n"

    files = {
        # Across where a cut with no line's end would fall, the last newline well past it.
        "inner.md": lines_to(chunk - overlap - 10) + token + "\n" + lines_to(overlap + 400),
        # The line the chunk's end cuts, the token its very first characters.
        "cut.md": lines_to(chunk - 10) + token + "\n",
        # A first chunk that ends exactly at a line's end, then the token without one.
        "after.md": lines_to(chunk) + token,
    }
    for name, text in files.items():
        (space.root / "memory" / name).write_text(text)
        refused = refusal(lambda name=name: space.read(f"memory/{name}", length=8))
        assert (refused.code, refused.reason) == (
            "secret_content",
            f"'memory/{name}' holds what looks like a secret credential value "
            "(betterleaks.github-pat)",
        ), name


def test_the_scans_memo_keeps_no_more_verdicts_than_its_bound(
    space: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-SEC-14: a full memo is emptied before the next verdict is kept, so a persona listing
    and reading many files holds at most the bound in memory."""
    full = {(0, n, 0, 0, "x"): None for n in range(ws._SECRET_SCANS_MAX)}
    monkeypatch.setattr(ws, "_SECRET_SCANS", full)
    space.write("memory/a.md", "plain")
    assert space.read("memory/a.md")["content"] == "plain"
    assert len(full) == 1


def test_a_concurrent_creator_is_never_overwritten_by_create(
    space: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """V1-WS-1: `create` that finds no file, then loses the race to another writer, refuses
    naming the path and leaves the other writer's content, rather than replace it."""
    read_at = ws._read_at

    def then_another_writer(directory_fd: int, name: str, path: str) -> bytes | None:
        found = read_at(directory_fd, name, path)
        theirs = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=directory_fd)
        os.write(theirs, b"theirs")
        os.close(theirs)
        return found

    space.ensure()
    monkeypatch.setattr(ws, "_read_at", then_another_writer)
    with pytest.raises(Conflict) as refused:
        space.write("FINDINGS.md", "mine", mode="create")
    assert str(refused.value) == "'FINDINGS.md' already exists"
    assert (space.root / "FINDINGS.md").read_bytes() == b"theirs"
    assert [p.name for p in space.root.iterdir()] == ["FINDINGS.md"]


def test_a_path_resolving_to_the_root_is_the_root_itself(space: Workspace) -> None:
    """V1-WS-1: the root, spelt as nothing or reached through a link inside, resolves to the
    root with the empty relative path (the one spelling the secret and scope checks know)."""
    root = space.ensure()
    (root / "memory").mkdir()
    (root / "memory" / "back").symlink_to(root)
    assert space.resolve_inside("") == (root.resolve(), "")
    assert space.resolve_inside("memory/back") == (root.resolve(), "")


def test_escapes_tells_a_symlink_out_from_one_that_stays_inside(
    space: Workspace, tmp_path: Path
) -> None:
    """V1-WS-1: the policy asks `escapes` before a tool runs: a link leading out escapes, a
    link staying inside and a plain path do not."""
    root = space.ensure()
    (root / "FINDINGS.md").write_text("f")
    (root / "inside.md").symlink_to(root / "FINDINGS.md")
    (root / "out.md").symlink_to(tmp_path)
    assert space.escapes("out.md") is True
    assert space.escapes("out.md/anything") is True
    assert space.escapes("inside.md") is False
    assert space.escapes("not/yet/there.md") is False


def test_a_hard_link_is_refused_naming_its_link_count(space: Workspace) -> None:
    """VX-SEC-11: the refusal names the path and how many names the file has."""
    space.write("memory/notes.md", "n")
    os.link(space.root / "memory/notes.md", space.root / "memory/other.md")
    for call in (
        lambda: space.stat("memory/notes.md"),
        lambda: space.read("memory/notes.md"),
        lambda: space.write("memory/notes.md", "x"),
    ):
        refused = refusal(call)
        assert (refused.code, refused.reason) == (
            "hard_link",
            "'memory/notes.md' has 2 hard links: another name of the same file may be a secret "
            "or lie outside the workspace, so it is not read, written or sent",
        )
    (space.root / "memory/other.md").unlink()
    assert space.stat("memory/notes.md")["size"] == 1


def test_a_symlink_on_the_way_to_a_write_is_named(space: Workspace, tmp_path: Path) -> None:
    """V1-WS-1: the refusal names the symlinked segment: a directory on the way or the file."""
    root = space.ensure()
    (root / "memory").mkdir()
    (root / "memory" / "linked").symlink_to(tmp_path)
    (root / "QUEUE.md").symlink_to(root / "memory")
    for path, named in (("memory/linked/a.md", "memory/linked"), ("QUEUE.md", "QUEUE.md")):
        refused = refusal(lambda path=path: space.write(path, "x"))
        assert (refused.code, refused.reason) == (
            "symlink_write",
            f"{named!r} is a symlink; writes never go through a symlink",
        )
    assert list(tmp_path.glob("*.md")) == []


def test_delete_answers_in_full_and_leaves_the_directory(space: Workspace) -> None:
    """V1-WS-1: a delete says what it removed; the directory that held the file stays."""
    space.write("memory/old.md", "x")
    assert space.write("memory/old.md", "", mode="delete") == {
        "path": "memory/old.md",
        "mode": "delete",
        "deleted": True,
    }
    assert (space.root / "memory").is_dir() and list((space.root / "memory").iterdir()) == []


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


def test_the_directories_a_write_creates_are_owner_only(space: Workspace) -> None:
    """V1-WS-1, VX-SEC-9: each directory a write makes on the way to its file is 0700, like
    the root, whatever the umask; the root itself is a directory, never read as a file."""
    old = os.umask(0o002)
    try:
        space.write("memory/notes/2026/today.md", "x")
    finally:
        os.umask(old)
    for directory in ("memory", "memory/notes", "memory/notes/2026"):
        assert stat.S_IMODE(os.stat(space.root / directory).st_mode) == 0o700, directory
    refused = refusal(lambda: space.hash(""))
    assert (refused.code, refused.reason) == ("wrong_kind", "'' is not a regular file")
