"""VX-SEC-15: a secret the value scan could not read as text (compressed, archived, in a wide
encoding) is unpacked within bounds and found, or the content is refused with the bound it broke;
it is never handed out unscanned.

The attacker's files: a `.gz` of a settings.py with an AWS key, a `.tgz` of an AWS credentials
file, notes saved as UTF-16 by an editor, and their cousins (bzip2, xz, zlib, zip in zip, a
second gzip member, a truncated stream), then the bombs (a tiny file that unpacks to gigabytes,
too deep, too many members, an encrypted member).
"""

import bisect
import bz2
import contextlib
import gzip
import io
import lzma
import random
import signal
import struct
import tarfile
import tracemalloc
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runtime import packed
from tests.runtime_support import call, root_of, standing_persona
from tests.secrets_support import AWS_SECRET, BOUNDARY, fake

pytestmark = pytest.mark.django_db

GITHUB_TOKEN = "ghp_" + fake("packed-github", 36)
SETTINGS_PY = (
    f'AWS_ACCESS_KEY_ID = "AKIA{fake("packed-aws-id", 16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")}"\n'
    f'AWS_SECRET_ACCESS_KEY = "{AWS_SECRET}"\nDEBUG = False\n'
).encode()
NOTES = f"Notes from the call.\nThe CI token is {GITHUB_TOKEN} until Friday.\n"
CYRILLIC = "Заметки со встречи: выпуск в пятницу.\n" * 60  # noqa: RUF001


def tar_of(name: str, data: bytes, *, directory: str | None = None) -> bytes:
    """A tar of one file; with `directory`, the directory's own entry first, as `tar` writes it."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        if directory is not None:
            folder = tarfile.TarInfo(directory)
            folder.type = tarfile.DIRTYPE
            archive.addfile(folder)
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
    # Saved as UTF-16 and cut short by a byte: what decodes is read, the broken end replaced.
    "notes-utf16-cut.txt": lambda: NOTES.encode("utf-16") + b"\x00",
    # No mark, and the ASCII a small part of a text in another script: 4 KiB of Cyrillic first.
    "cyrillic-utf16le-no-bom.txt": lambda: (CYRILLIC + NOTES).encode("utf-16-le"),
    "cyrillic-utf16be-no-bom.txt": lambda: (CYRILLIC + NOTES).encode("utf-16-be"),
    "cyrillic-utf32be-no-bom.txt": lambda: (CYRILLIC + NOTES).encode("utf-32-be"),
    "cyrillic-utf32le-no-bom.txt": lambda: (CYRILLIC + NOTES).encode("utf-32-le"),
    "utf16-no-bom-in-zip.zip": lambda: zip_of(
        ("notes.txt", (CYRILLIC + NOTES).encode("utf-16-le"))
    ),
    # `tar czf` and `zip -r` of a directory: the directory's own entry comes before its files.
    "aws-directory.tgz": lambda: gzip.compress(
        tar_of(".aws/credentials", f"[default]\naws_secret_access_key = {AWS_SECRET}\n".encode(),
               directory=".aws")
    ),
    "project.zip": lambda: zip_of(("project/", b""), ("project/settings.py", SETTINGS_PY)),
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
        ("cyrillic-utf16.txt", lambda: CYRILLIC.encode("utf-16-le")),
        ("notes-utf16-no-bom.txt", lambda: "Notes, nothing secret here.\n".encode("utf-16-le")),
        # Zeros are NULs in every place wide text has them, and no text at all.
        ("sparse.img", lambda: bytes(256 * 1024)),
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
    assert result["reason"] == (
        "'memory/big.gz' cannot be scanned for secret credential values: packed and larger than "
        "the scan unpacks; it is not handed out unscanned"
    )


def test_a_packed_file_exactly_as_large_as_the_scan_unpacks_is_scanned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """VX-SEC-15: the bound admits its own size: such a file is unpacked and its secret named."""
    persona = standing_persona()
    monkeypatch.setattr("runtime.tools.workspace.PACKED_MAX_INPUT", 1000)
    # Padded to the bound with letters that compress (noise would be stored as it is, and the
    # byte scan would find the secret before anything is unpacked).
    letters = random.Random(7)
    padding = "".join(letters.choice("abcdefghijklmnop") for _ in range(3000)).encode()
    padded = next(
        data
        for n in range(3000)
        if len(data := gzip.compress(SETTINGS_PY + padding[:n], mtime=0)) == 1000
    )
    assert b"AKIA" not in padded
    put(persona, "edge.gz", padded)
    result = read(persona, "edge.gz")
    assert (result["ok"], result["boundary"]) == (False, BOUNDARY), result
    assert "holds what looks like a secret credential value" in result["reason"]


def test_packed_content_is_read_as_its_files_name_says() -> None:
    """VX-SEC-14, VX-SEC-15: the keyword detector reads what a packed file holds by the file's
    own name, as it reads the same bytes unpacked: a lock file's `password = ...` names a
    package field there, and the same line in a packed settings file is a credential."""
    persona = standing_persona()
    line = b"password = k9XpV4tB8nHc3yFdQ7mZr2Lw\n"
    put(persona, "package-lock.json", line)
    assert read(persona, "package-lock.json")["ok"] is True
    put(persona, "packed/package-lock.json", gzip.compress(line))
    assert read(persona, "packed/package-lock.json")["ok"] is True
    put(persona, "packed/settings.py", gzip.compress(line))
    refused = read(persona, "packed/settings.py")
    assert (refused["ok"], refused["boundary"]) == (False, BOUNDARY), refused


def test_the_kinds_are_told_by_their_first_bytes() -> None:
    assert packed.packed_kind(gzip.compress(b"x")) == "gzip"
    assert packed.packed_kind(tar_of("a", b"b")) == "tar"
    # An empty zip is its end record alone; a tar's magic ends at byte 262, so a head that long
    # is enough; wide text by its mark, and without one it is no kind (its runs are read).
    assert packed.packed_kind(zip_of()) == "zip"
    assert packed.packed_kind(tar_of("a", b"b")[:262]) == "tar"
    assert packed.packed_kind(b"plain text, nothing packed\n" * 10) is None
    assert packed.packed_kind("wide".encode("utf-16")) == "utf-16-le"
    assert packed.packed_kind(b"\xfe\xff" + "wide".encode("utf-16-be")) == "utf-16-be"
    assert packed.packed_kind("wide".encode("utf-32")) == "utf-32-le"
    assert packed.packed_kind(b"\x00\x00\xfe\xff" + "wide".encode("utf-32-be")) == "utf-32-be"
    assert packed.packed_kind("wide".encode("utf-16-le") * 10) is None


def test_unpacked_text_is_scanned_by_the_same_detectors(tmp_path: Path) -> None:
    """The finder is the caller's: nested plain content reaches it as text."""
    seen: list[str] = []
    assert packed.secret_in_packed(gzip.compress(b"hello"), lambda t: seen.append(t)) is None
    assert seen == ["hello"]


# The bounds, at their edges, and what the scan reads on the way (secret_in_packed itself) -------

MIB = 1024 * 1024
MARKER = "the-marked-secret-value"


def marked(text: str) -> str | None:
    """A finder for content too large for the real detectors to read quickly: the marker is the
    secret."""
    return "marked" if MARKER in text else None


def test_output_exactly_at_the_bound_is_scanned_and_one_byte_more_is_refused() -> None:
    """VX-SEC-15: PACKED_MAX_OUTPUT bytes in all is within the bound (the secret at its very end
    is found); one more byte is out of it, refused with the reason."""
    body = b"." * (packed.PACKED_MAX_OUTPUT - len(MARKER)) + MARKER.encode()
    assert packed.secret_in_packed(gzip.compress(body, compresslevel=1), marked) == "marked"
    over = gzip.compress(body + b"\0", compresslevel=1)
    with pytest.raises(packed.Unscannable) as refused:
        packed.secret_in_packed(over, marked)
    assert str(refused.value) == refused.value.reason
    assert refused.value.reason == (
        "it unpacks to more than 64 MiB, more than the secrets scan reads"
    )


def test_members_exactly_at_the_bound_are_scanned_and_one_more_is_refused() -> None:
    """VX-SEC-15: PACKED_MAX_MEMBERS members are read, the secret in the last one found; one
    member more is refused with the reason."""
    members = [(f"{n}", b"") for n in range(packed.PACKED_MAX_MEMBERS - 1)]
    exact = zip_of(*members, ("last.txt", MARKER.encode()))
    assert packed.secret_in_packed(exact, marked) == "marked"
    with pytest.raises(packed.Unscannable) as refused:
        packed.secret_in_packed(zip_of(*members, ("a", b""), ("b", b"")), marked)
    assert str(refused.value) == (
        "it holds more than 10000 archive members, more than the secrets scan reads"
    )


def test_input_exactly_at_the_bound_is_unpacked_and_one_byte_more_is_refused() -> None:
    """VX-SEC-15: a packed file of PACKED_MAX_INPUT bytes is unpacked (the bytes after its
    stream are noise the unpacking stops at); one byte more is refused unread, with the
    reason."""
    stream = gzip.compress(MARKER.encode())
    exact = stream + bytes(packed.PACKED_MAX_INPUT - len(stream))
    assert packed.secret_in_packed(exact, marked) == "marked"
    with pytest.raises(packed.Unscannable) as refused:
        packed.secret_in_packed(exact + b"\0", marked)
    assert str(refused.value) == (
        "it is packed and larger than 32 MiB, more than the secrets scan unpacks"
    )


def test_a_secret_before_a_long_tail_is_found() -> None:
    """VX-SEC-15: a stream is unpacked a chunk at a time; what every chunk gave is scanned, not
    only the last one."""
    data = gzip.compress(MARKER.encode() + b"x" * (3 * MIB))
    assert packed.secret_in_packed(data, marked) == "marked"


@pytest.mark.parametrize("compress", [bz2.compress, lzma.compress], ids=["bzip2", "xz"])
def test_every_stream_of_a_concatenation_is_read_past_a_long_first_one(
    compress: Callable[[bytes], bytes],
) -> None:
    """VX-SEC-15: `cat a.bz2 b.bz2` (or two .xz) is one valid file; the second stream is read
    too, also when the first unpacks to more than one chunk."""
    data = compress(b"x" * (3 * MIB)) + compress(MARKER.encode())
    assert packed.secret_in_packed(data, marked) == "marked"


def test_a_decompression_bomb_stops_at_the_bound_without_unpacking_the_rest() -> None:
    """VX-SEC-15: a bomb costs bounded work: the stream is unpacked a chunk at a time and stops
    once the bound is passed, so memory stays near PACKED_MAX_OUTPUT whatever the bomb would
    unpack to (here four times it)."""
    engine = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(MIB)
    bomb = b"".join(engine.compress(zeros) for _ in range(4 * packed.PACKED_MAX_OUTPUT // MIB))
    bomb += engine.flush()
    tracemalloc.start()
    try:
        with pytest.raises(packed.Unscannable):
            packed.secret_in_packed(bomb, marked)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2 * packed.PACKED_MAX_OUTPUT, peak


def test_binary_numbers_are_not_taken_for_wide_text() -> None:
    """VX-SEC-15: wide text is ASCII beside one or three NULs, eight characters on end; tables
    of numbers have NULs in some of those places only, or in others too, and give no text."""
    little = struct.pack("<1024I", *range(256, 1280))  # each: low byte, 0x01-0x04, NUL, NUL
    big = struct.pack(">1024I", *((1 << 24) + 65 + n % 26 for n in range(1024)))  # 01 00 00 41
    assert packed.wide_ascii(little.decode("latin-1")) == ""
    assert packed.wide_ascii(big.decode("latin-1")) == ""
    # 16-bit numbers below 256, one in five of them zero: NULs in every high byte, as in UTF-16,
    # but in the low bytes too, which ASCII never has.
    counts = [0 if n % 5 == 0 else 1 + n % 200 for n in range(2048)]
    assert packed.wide_ascii(struct.pack("<2048H", *counts).decode("latin-1")) == ""
    assert packed.wide_ascii(struct.pack(">2048H", *counts).decode("latin-1")) == ""


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
def test_the_ascii_runs_of_wide_text_are_read_whatever_surrounds_them(encoding: str) -> None:
    """VX-SEC-15: each run of ASCII between other characters (ideographic spaces, Cyrillic) is
    read out as a line, eight characters and more; seven are too short to be a secret."""
    line = "Osaka\u3000team\u3000notes: ship the release build on Friday.\u3000срок\u3000seven77"  # noqa: RUF001
    runs = packed.wide_ascii(line.encode(encoding).decode("latin-1"))
    assert runs.split("\n") == ["notes: ship the release build on Friday."]
    eight = "\u3000eight888\u3000".encode(encoding).decode("latin-1")
    assert packed.wide_ascii(eight) == "eight888"


def test_what_a_scan_of_bytes_sees_is_the_text_then_its_wide_runs() -> None:
    """VX-SEC-15: the finder reads the bytes as they are; only when it finds nothing there, and
    only if they hold wide text, the runs of it."""
    seen: list[str] = []

    def finder(text: str) -> str | None:
        seen.append(text)
        return "wide" if text == "wide text here" else None

    assert packed.find_in_bytes("plain", finder) is None
    assert seen == ["plain"]
    wide = "wide text here".encode("utf-16-le").decode("latin-1")
    assert packed.find_in_bytes(wide, finder) == "wide"
    assert seen == ["plain", wide, "wide text here"]
    assert packed.find_in_bytes(wide, lambda text: "as it is") == "as it is"


def test_exactly_the_deepest_nesting_is_unpacked() -> None:
    """VX-SEC-15: PACKED_MAX_DEPTH levels of packing are unpacked and their content scanned;
    one more is refused (the test of the bounds above)."""
    data = MARKER.encode()
    for _ in range(packed.PACKED_MAX_DEPTH):
        data = gzip.compress(data)
    assert packed.secret_in_packed(data, marked) == "marked"


def test_content_that_is_not_packed_is_left_to_the_caller() -> None:
    """VX-SEC-15: the caller scans plain bytes itself (runtime.tools.workspace); what is not
    packed is not read again here."""
    seen: list[str] = []
    assert packed.secret_in_packed(MARKER.encode(), lambda text: seen.append(text)) is None
    assert seen == []


def test_a_stream_cut_just_past_a_chunks_edge_is_scanned_up_to_its_cut() -> None:
    """VX-SEC-15: what came out before a damaged part is kept, wherever the chunks fall: cut
    just after it has unpacked past the first chunk, a stream gives the finder every byte a
    decompressor gets from it."""
    body = fake("cut-at-the-edge", packed._CHUNK - 2000).encode() + b"abcdef" * 5000

    def unpacked(data: bytes) -> bytes:
        return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS).decompress(data)

    stream = gzip.compress(body)
    # The shortest cut that unpacks past the chunk: the chunk's last byte is then the output of
    # input already read, with more of it still to come.
    cut = bisect.bisect_left(
        range(len(stream)), True, key=lambda n: len(unpacked(stream[:n])) > packed._CHUNK
    )
    seen: list[str] = []
    packed.secret_in_packed(stream[:cut], lambda text: seen.append(text))
    assert seen == [unpacked(stream[:cut]).decode("latin-1")]


class TookTooLong(Exception):
    """Raised by the clock; not an OSError, so no except clause of the unpacking swallows it."""


@contextlib.contextmanager
def within(seconds: float) -> Iterator[None]:
    def stop(*_: object) -> None:
        raise TookTooLong(f"more than {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize(
    "compress",
    [gzip.compress, zlib.compress, bz2.compress, lzma.compress],
    ids=["gzip", "zlib", "bzip2", "xz"],
)
def test_a_stream_without_its_end_is_read_in_bounded_time(
    compress: Callable[[bytes], bytes],
) -> None:
    """VX-SEC-15: a damaged file costs bounded work: a stream whose last bytes are missing
    (its checksum, its end marker) never ends, and the scan stops where its input does, with
    the secret in what it gave. Milliseconds of work; the clock only catches a scan that
    would wait for more input forever."""
    data = compress(MARKER.encode() + fake("without-its-end", 100_000).encode())[:-4]
    with within(5):
        assert packed.secret_in_packed(data, marked) == "marked"


@pytest.mark.parametrize("compress", [bz2.compress, lzma.compress], ids=["bz2", "xz"])
def test_a_stream_cut_before_its_end_marker_is_scanned_past_its_first_chunk(
    compress: Callable[[bytes], bytes],
) -> None:
    """VX-SEC-15: a damaged stream is read as far as it decodes. A bz2 stream missing its end
    marker reported `needs_input` once all its input was handed over, with more than a chunk of
    output still waiting: the secret past the first MiB was never scanned, and the file was
    handed out."""
    body = b"notes " * (MIB // 5) + MARKER.encode() + b" and more" * 10_000
    cut = compress(body)[:-10]
    assert packed.secret_in_packed(cut, marked) == "marked"


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32"])
def test_wide_text_is_read_in_its_own_encoding_even_cut_short(encoding: str) -> None:
    """VX-SEC-15: text in a wide encoding (told by its byte-order mark) is decoded as that
    encoding, so the detectors read the text itself, non-ASCII words included, not its bytes;
    a file cut short by a byte is still read, the broken end replaced."""
    text = "Заметки: " + MARKER
    seen: list[str] = []

    def finder(read: str) -> str | None:
        seen.append(read)
        return marked(read)

    assert packed.secret_in_packed(text.encode(encoding), finder) == "marked"
    # The detectors read bytes as latin-1: these are the text's UTF-8 bytes, its mark first.
    assert seen[0].encode("latin-1").decode("utf-8") == "\ufeff" + text
    assert packed.secret_in_packed(text.encode(encoding) + b"\x00", marked) == "marked"
