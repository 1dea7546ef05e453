"""VX-SEC-15: a secret the value scan could not read as text (compressed, archived, in a wide
encoding) is unpacked within bounds and found, or the content is refused with the bound it broke;
it is never handed out unscanned.

The attacker's files: a `.gz` of a settings.py with an AWS key, a `.tgz` of an AWS credentials
file, notes saved as UTF-16 by an editor, and their cousins (bzip2, xz, zlib, zip in zip, a
second gzip member, a truncated stream), then the bombs (a tiny file that unpacks to gigabytes,
too deep, too many members, an encrypted member).
"""

import bz2
import gzip
import io
import lzma
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from runtime import packed
from tests.runtime_support import call, root_of, standing_persona
from tests.test_secrets_boundary import AWS_SECRET, BOUNDARY, fake

pytestmark = pytest.mark.django_db

GITHUB_TOKEN = "ghp_" + fake("packed-github", 36)
SETTINGS_PY = (
    f'AWS_ACCESS_KEY_ID = "AKIA{fake("packed-aws-id", 16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")}"\n'
    f'AWS_SECRET_ACCESS_KEY = "{AWS_SECRET}"\nDEBUG = False\n'
).encode()
NOTES = f"Notes from the call.\nThe CI token is {GITHUB_TOKEN} until Friday.\n"


def tar_of(name: str, data: bytes) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        member = tarfile.TarInfo(name)
        member.size = len(data)
        archive.addfile(member, io.BytesIO(data))
    return out.getvalue()


def zip_of(*members: tuple[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members:
            archive.writestr(name, data)
    return out.getvalue()


HIDDEN: dict[str, Callable[[], bytes]] = {
    "settings.py.gz": lambda: gzip.compress(SETTINGS_PY),
    "backup.tgz": lambda: gzip.compress(
        tar_of(".aws/credentials", f"[default]\naws_secret_access_key = {AWS_SECRET}\n".encode())
    ),
    "notes-utf16.txt": lambda: NOTES.encode("utf-16"),
    "notes-utf16le-no-bom.txt": lambda: NOTES.encode("utf-16-le"),
    "notes-utf16be.txt": lambda: b"\xfe\xff" + NOTES.encode("utf-16-be"),
    "notes-utf32.txt": lambda: NOTES.encode("utf-32"),
    "notes-utf32le-no-bom.txt": lambda: NOTES.encode("utf-32-le"),
    "settings.py.bz2": lambda: bz2.compress(SETTINGS_PY),
    "settings.py.xz": lambda: lzma.compress(SETTINGS_PY),
    "object.zz": lambda: zlib.compress(b"blob 80\x00" + SETTINGS_PY),
    "bundle.zip": lambda: zip_of(
        ("readme.md", b"# hi\n"), ("inner.zip", zip_of(("n.txt", NOTES.encode())))
    ),
    "two-members.gz": lambda: gzip.compress(b"nothing here\n") + gzip.compress(SETTINGS_PY),
    # Cut off in the middle of its (incompressible) tail: what came before still unpacks.
    "truncated.gz": lambda: gzip.compress(SETTINGS_PY + fake("tail", 200_000).encode())[:-20_000],
    "utf16-in-gzip.gz": lambda: gzip.compress(NOTES.encode("utf-16")),
}  # fmt: skip


def put(persona, name: str, data: bytes) -> None:  # type: ignore[no-untyped-def]
    path = root_of(persona) / "memory" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def read(persona, name: str) -> dict:  # type: ignore[no-untyped-def]
    return call(persona, "workspace_read", {"path": f"memory/{name}"})


@pytest.mark.parametrize("name", sorted(HIDDEN))
def test_a_secret_packed_out_of_the_scans_sight_is_found(name: str) -> None:
    """VX-SEC-15: refused at the secrets boundary, naming the kind of secret found inside."""
    persona = standing_persona()
    put(persona, name, HIDDEN[name]())
    result = read(persona, name)
    assert (result["ok"], result["boundary"]) == (False, BOUNDARY), result
    assert "holds what looks like a secret credential value" in result["reason"]


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("plain.txt.gz", lambda: gzip.compress(b"just notes\n" * 100)),
        ("docs.zip", lambda: zip_of(("a.md", b"# a\n"), ("b.md", b"# b\n"))),
        ("utf16.txt", lambda: "Grüße, nothing secret here.\n".encode("utf-16")),
        ("math.md", lambda: b"x^2 + y^2 = z^2\n"),
        ("not-really.gz", lambda: b"\x1f\x8bjunk that is not a gzip stream at all\n"),
    ],
)
def test_packed_content_without_a_secret_stays_readable(
    name: str, data: Callable[[], bytes]
) -> None:
    """VX-SEC-15: unpacking is for finding secrets; ordinary archives and text are handed out."""
    persona = standing_persona()
    put(persona, name, data())
    result = read(persona, name)
    assert result["ok"] is True, result


def nested_gzip(levels: int) -> bytes:
    data = b"innocent\n"
    for _ in range(levels):
        data = gzip.compress(data)
    return data


def encrypted_zip() -> bytes:
    """A zip whose member says it is encrypted (the flag in both headers), as an attacker's
    password-protected archive would: nobody can read it without the password, nor scan it."""
    data = bytearray(zip_of(("secret.txt", NOTES.encode())))
    data[6] |= 0x01
    central = data.rindex(b"PK\x01\x02")
    data[central + 8] |= 0x01
    return bytes(data)


@pytest.mark.parametrize(
    ("name", "data", "bound"),
    [
        ("bomb.gz", lambda: gzip.compress(bytes(packed.PACKED_MAX_OUTPUT + 1)),
         "it unpacks to more than 64 MiB"),
        ("deep.gz", lambda: nested_gzip(packed.PACKED_MAX_DEPTH + 1),
         "it nests packed content deeper than 4 levels"),
        ("many.zip", lambda: zip_of(*((f"{n}", b"") for n in range(packed.PACKED_MAX_MEMBERS + 1))),
         "it holds more than 10000 archive members"),
        ("locked.zip", encrypted_zip, "its member 'secret.txt' cannot be unpacked"),
    ],
)  # fmt: skip
def test_what_cannot_be_scanned_within_bounds_is_refused_with_the_bound(
    name: str, data: Callable[[], bytes], bound: str
) -> None:
    """VX-SEC-15: never handed out unscanned; the reason names the bound."""
    persona = standing_persona()
    put(persona, name, data())
    result = read(persona, name)
    assert (result["ok"], result["boundary"]) == (False, BOUNDARY), result
    assert "cannot be scanned for secret credential values" in result["reason"]
    assert bound in result["reason"]


def test_a_packed_file_larger_than_the_scan_unpacks_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    persona = standing_persona()
    monkeypatch.setattr("runtime.tools.workspace.PACKED_MAX_INPUT", 1000)
    put(persona, "big.gz", gzip.compress(bytes(range(256)) * 40, compresslevel=0))
    result = read(persona, "big.gz")
    assert "packed and larger than the scan unpacks" in result["reason"]


def test_the_kinds_are_told_by_their_first_bytes() -> None:
    assert packed.packed_kind(gzip.compress(b"x")) == "gzip"
    assert packed.packed_kind(tar_of("a", b"b")) == "tar"
    assert packed.packed_kind(b"plain text, nothing packed\n" * 10) is None
    assert packed.packed_kind("wide".encode("utf-16-le") * 10) == "utf-16-le"
    assert packed.packed_kind("wide".encode("utf-16-be") * 10) == "utf-16-be"
    assert packed.packed_kind("wide".encode("utf-32-be") * 10) == "utf-32-be"


def test_unpacked_text_is_scanned_by_the_same_detectors(tmp_path: Path) -> None:
    """The finder is the caller's: nested plain content reaches it as text."""
    seen: list[str] = []
    assert packed.secret_in_packed(gzip.compress(b"hello"), lambda t: seen.append(t)) is None
    assert seen == ["hello"]
