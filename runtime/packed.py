"""Content the secrets boundary must unpack before it can read it (VX-SEC-15).

The value scan reads a file's bytes as text. A secret inside a compressed stream (gzip, bzip2,
xz, zlib), an archive (zip, tar) or text in a wide encoding (UTF-16 and UTF-32) is not text
there: `workspace_read` would hand it out as base64, unread. So a file that starts like one of
those (a wide text by its byte-order mark) is unpacked here, within bounds, and every text found
inside is scanned with the same detectors (runtime.credentials.find_secret), nested content
included. Wide text without a mark is told by no first bytes: the ASCII runs in it are read
wherever bytes are scanned (find_in_bytes), in a plain file and in unpacked content alike.

Unpacking is bounded three ways, so a crafted file (a decompression bomb, an archive of a million
members, a zip in a zip in a zip) costs a bounded amount of work: PACKED_MAX_OUTPUT bytes in all,
PACKED_MAX_DEPTH levels, PACKED_MAX_MEMBERS archive members. Content that cannot be scanned
within them is refused with that reason (Unscannable), never handed out unscanned. Bytes that
only look like a format (a text file that happens to start with `x^`) and fail to unpack are
what they seemed: text, already scanned as such.
"""

import bz2
import io
import lzma
import re
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

PACKED_MAX_OUTPUT = 64 * 1024 * 1024
PACKED_MAX_DEPTH = 4
PACKED_MAX_MEMBERS = 10_000
# Large enough for any file a workspace read returns whole, small enough to hold in memory.
PACKED_MAX_INPUT = 32 * 1024 * 1024
_CHUNK = 1024 * 1024

Finder = Callable[[str], str | None]


class Unscannable(Exception):
    """Packed content the scan could not read within its bounds: `reason` says which bound."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class _Budget:
    output: int = PACKED_MAX_OUTPUT
    members: int = PACKED_MAX_MEMBERS

    def spend(self, size: int) -> None:
        self.output -= size
        if self.output < 0:
            raise Unscannable(
                f"it unpacks to more than {PACKED_MAX_OUTPUT // (1024 * 1024)} MiB, more than "
                "the secrets scan reads"
            )

    def member(self) -> None:
        self.members -= 1
        if self.members < 0:
            raise Unscannable(
                f"it holds more than {PACKED_MAX_MEMBERS} archive members, more than the secrets "
                "scan reads"
            )


_COMPRESSED = {
    "gzip": (b"\x1f\x8b",),
    "bzip2": (b"BZh",),
    "xz": (b"\xfd7zXZ\x00",),
    "zlib": (b"\x78\x01", b"\x78\x5e", b"\x78\x9c", b"\x78\xda"),
}
_WIDE_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)


def packed_kind(head: bytes) -> str | None:
    """What the first bytes of a file say it is, if it is something the scan must unpack."""
    for kind, magics in _COMPRESSED.items():
        if head.startswith(magics):
            return kind
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return "zip"
    if len(head) >= 262 and head[257:262] == b"ustar":
        return "tar"
    for bom, encoding in _WIDE_BOMS:
        if head.startswith(bom):
            return encoding
    return None


# ASCII written in UTF-16 or UTF-32, either byte order, seen through latin-1: each character
# beside one or three NULs. A credential is ASCII, so runs like these are read out wherever they
# are, without a byte-order mark and whatever surrounds them (Cyrillic or Japanese text, a
# binary's string table), as `strings -e l` would; eight characters are less than any secret
# with its keyword.
_WIDE_CHAR = "[\t\n\r\x20-\x7e]"
_WIDE_RUNS = re.compile(
    f"(?:{_WIDE_CHAR}\x00\x00\x00){{8,}}|(?:\x00\x00\x00{_WIDE_CHAR}){{8,}}"
    f"|(?:{_WIDE_CHAR}\x00){{8,}}|(?:\x00{_WIDE_CHAR}){{8,}}"
)


def wide_ascii(text: str) -> str:
    """The ASCII of every UTF-16 or UTF-32 run in `text` (bytes read as latin-1), a run a line;
    empty when there is none."""
    if "\x00" not in text:
        return ""
    return "\n".join(run.group().replace("\x00", "") for run in _WIDE_RUNS.finditer(text))


def find_in_bytes(text: str, find: Finder) -> str | None:
    """What `find` sees in bytes read as latin-1: as they are, then the wide text among them."""
    found = find(text)
    if found is None and (wide := wide_ascii(text)):
        found = find(wide)
    return found


def secret_in_packed(data: bytes, find: Finder) -> str | None:
    """The kind of the first secret found inside packed `data`, or None; Unscannable when the
    content is out of the scan's bounds. `data` that is not packed is left to the caller."""
    if len(data) > PACKED_MAX_INPUT:
        raise Unscannable(
            f"it is packed and larger than {PACKED_MAX_INPUT // (1024 * 1024)} MiB, more than the "
            "secrets scan unpacks"
        )
    return _scan(data, find, _Budget(), depth=0)


def _scan(data: bytes, find: Finder, budget: _Budget, *, depth: int) -> str | None:
    kind = packed_kind(data[:4096])
    if kind is None:
        # Nested plain content: the detectors read it as the outer file's bytes were read.
        return find_in_bytes(data.decode("latin-1"), find) if depth else None
    if depth >= PACKED_MAX_DEPTH:
        raise Unscannable(f"it nests packed content deeper than {PACKED_MAX_DEPTH} levels")
    for inner in _unpacked(kind, data, budget):
        found = _scan(inner, find, budget, depth=depth + 1)
        if found is not None:
            return found
    return None


def _unpacked(kind: str, data: bytes, budget: _Budget) -> Iterator[bytes]:
    if kind.startswith("utf-"):
        text = data.decode(kind, errors="replace")
        budget.spend(len(text))
        yield text.encode("utf-8", errors="replace")
    elif kind in ("gzip", "bzip2", "xz", "zlib"):
        yield _decompressed(kind, data, budget)
    elif kind == "zip":
        yield from _zip_members(data, budget)
    else:
        yield from _tar_members(data, budget)


def _decompressor(kind: str) -> Any:
    if kind == "gzip":
        return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    if kind == "zlib":
        return zlib.decompressobj()
    if kind == "bzip2":
        return bz2.BZ2Decompressor()
    return lzma.LZMADecompressor()


def _decompressed(kind: str, data: bytes, budget: _Budget) -> bytes:
    """What the stream unpacks to, a chunk at a time so a bomb stops at the budget, every
    stream of a concatenation included (`cat a.gz b.gz` is one valid gzip file); what came out
    before a corrupt part is kept, as a damaged stream may still carry a secret."""
    out = bytearray()
    pending = data
    try:
        while pending:
            engine = _decompressor(kind)
            while True:
                piece = engine.decompress(pending, _CHUNK)
                budget.spend(len(piece))
                out += piece
                pending = getattr(engine, "unconsumed_tail", b"")
                # Asked again until it gives nothing: bz2 says it needs input once all of it was
                # handed over, and hands a stream cut before its end marker out a block at a
                # time (each chunk short), with more still to come.
                if engine.eof or (not pending and not piece):
                    break
            pending = engine.unused_data if engine.eof else b""
    except (zlib.error, OSError, EOFError, lzma.LZMAError):
        pass
    return bytes(out)


def _zip_members(data: bytes, budget: _Budget) -> Iterator[bytes]:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            yield from _zip_read(archive, budget)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        return


def _zip_read(archive: zipfile.ZipFile, budget: _Budget) -> Iterator[bytes]:
    for member in archive.infolist():
        budget.member()
        if member.is_dir():
            continue
        budget.spend(member.file_size)
        try:
            with archive.open(member) as handle:
                yield _read_bounded(handle, member.file_size)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError,
                RuntimeError):  # fmt: skip
            # An encrypted member cannot be read, so it cannot be vouched for.
            raise Unscannable(
                f"its member {member.filename!r} cannot be unpacked (encrypted or damaged)"
            ) from None


def _read_bounded(handle: io.BufferedIOBase | zipfile.ZipExtFile, declared: int) -> bytes:
    """A member's bytes, never more than it declared (a lying header cannot spend more)."""
    data = handle.read(declared + 1)
    if len(data) > declared:
        raise Unscannable("an archive member unpacks to more than its header says")
    return data


def _tar_members(data: bytes, budget: _Budget) -> Iterator[bytes]:
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
            for member in archive:
                budget.member()
                if not member.isfile():
                    continue
                budget.spend(member.size)
                handle = archive.extractfile(member)
                if handle is not None:
                    # The member's file ends at its declared size, which the budget paid for.
                    yield handle.read()
    except (tarfile.TarError, OSError, EOFError):
        return
