"""Malformed stamp files at boot: each kind of damage gives exactly its own error.

tests/test_boot_check.py covers a missing file, a removed tool, a duplicate top-level key, a
dropped schema section, duplicate tools, a name that cannot be projected, an unregistered
handler and file permissions. These are the other ways the bytes of an active stamp go wrong:
truncated, wrong types, nested duplicate keys, an unknown schema version, and altered bytes
that still parse. For each, the complete list of boot messages is asserted, so a file is
never reported for less, or for more, than what is wrong with it.
"""

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from personas.models import Persona
from stamps.checks import active_stamp_messages
from stamps.models import CapabilityStamp
from tests.factories import make_agent, make_owner, make_persona
from tests.stored_stamps import store_as_stamp
from virgo.canonical import sha256_hex

pytestmark = pytest.mark.django_db


@pytest.fixture
def persona() -> Persona:
    return make_persona(make_agent(make_owner()), name="Checked")


def stamp_file(persona: Persona) -> Path:
    return CapabilityStamp.objects.get(persona_uuid=persona.uuid, generation_number=1).path


def who(persona: Persona) -> str:
    return f"persona 'Checked' ({persona.uuid}) generation 1"


def stored_hash(persona: Persona) -> str:
    return CapabilityStamp.objects.get(persona_uuid=persona.uuid, generation_number=1).stamp_hash


def messages() -> list[tuple[str, str]]:
    return [(message.id or "", message.msg) for message in active_stamp_messages()]


def write_bytes(persona: Persona, data: bytes, *, stored: bool) -> Path:
    """Replace the file's bytes; with `stored`, the stored stamp's too, so only the content
    shows (tests.stored_stamps)."""
    if stored:
        return store_as_stamp(persona, data)
    path = stamp_file(persona)
    path.write_bytes(data)
    return path


def rewrite(persona: Persona, change: Callable[[dict[str, Any]], None]) -> Path:
    document = json.loads(stamp_file(persona).read_bytes())
    change(document)
    return write_bytes(persona, rfc8785.dumps(document), stored=True)


def altered(persona: Persona, path: Path) -> tuple[str, str]:
    actual = sha256_hex(path.read_bytes())
    return (
        "virgo.E002",
        f"{who(persona)}: stamp file {path} was altered (sha256 {actual}, stored "
        f"{stored_hash(persona)})",
    )


def malformed(persona: Persona, path: Path, reason: str) -> tuple[str, str]:
    return ("virgo.E003", f"{who(persona)}: stamp file {path} is malformed: {reason}")


def schema_error(persona: Persona, path: Path, where: str, error: str) -> tuple[str, str]:
    return ("virgo.E003", f"{who(persona)}: stamp file {path}: schema v3: at {where}: {error}")


@pytest.mark.parametrize(
    "cut",
    [lambda data: b"", lambda data: data[:1], lambda data: data[: len(data) // 2],
     lambda data: data[:-1]],
    ids=["empty", "one-byte", "half", "all-but-the-last-byte"],
)  # fmt: skip
def test_a_truncated_file_is_altered_and_not_json(
    persona: Persona, cut: Callable[[bytes], bytes]
) -> None:
    """V1-BOOT-1: a file cut short (a crash mid-write, a full disk) fails boot twice over: its
    hash no longer matches, and its bytes are not JSON."""
    truncated = cut(stamp_file(persona).read_bytes())
    path = write_bytes(persona, truncated, stored=False)
    with pytest.raises(ValueError) as parsing:
        json.loads(truncated)
    reason = f"not JSON: {parsing.value}"
    assert messages() == [altered(persona, path), malformed(persona, path, reason)]
    with pytest.raises(SystemCheckError, match=r"virgo\.E012.*is malformed"):
        call_command("check")


@pytest.mark.parametrize(
    ("change", "where", "error"),
    [
        (lambda d: d.update(schema_version="3"), "schema_version", "3 was expected"),
        (lambda d: d.update(tools={}), "tools", "{} is not of type 'array'"),
        (lambda d: d["persona"].update(generation="1"), "persona/generation", "'1' is not of "
         "type 'integer'"),
        (lambda d: d["tools"][0].update(name=None), "tools/0/name", "None is not of type "
         "'string'"),
        (lambda d: d["bindings"].update(queues="reviews"), "bindings/queues", "'reviews' is not "
         "of type 'array'"),
    ],
    ids=["version-as-string", "tools-as-object", "generation-as-string", "null-name",
         "queues-as-string"],
)  # fmt: skip
def test_a_value_of_the_wrong_type_is_named_by_its_path(
    persona: Persona, change: Callable[[dict[str, Any]], None], where: str, error: str
) -> None:
    """V1-BOOT-1: well-formed JSON with a value of the wrong type breaks schema v3; the error
    names the JSON path of the value (and the hash is not what catches it)."""
    path = rewrite(persona, change)
    assert messages() == [schema_error(persona, path, where, error)]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"schema_version": 3.0}', "number 3.0 is not an integer (stamps carry no floats)"),
        (b'{"schema_version": 9007199254740993}', "integer 9007199254740993 is outside the "
         "I-JSON range"),
        (b"[]", "the top level is not a JSON object"),
        (b'"stamp"', "the top level is not a JSON object"),
    ],
    ids=["float", "beyond-i-json", "array", "string"],
)  # fmt: skip
def test_numbers_and_shapes_no_consumer_may_guess_at_are_malformed(
    persona: Persona, data: bytes, reason: str
) -> None:
    """V1-BOOT-1: what readers could disagree on is refused before the schema is consulted."""
    path = write_bytes(persona, data, stored=True)
    assert messages() == [malformed(persona, path, reason)]


def test_a_key_repeated_inside_a_tool_is_malformed(persona: Persona) -> None:
    """V1-BOOT-1: a duplicate key anywhere, not only at the top level: one reader would take
    `allow`, another `confirm`, so the file is refused rather than guessed at."""
    data = stamp_file(persona).read_bytes()
    assert data.count(b'"access":"allow"') > 1
    doubled = data.replace(b'"access":"allow"', b'"access":"allow","access":"confirm"', 1)
    path = write_bytes(persona, doubled, stored=True)
    assert messages() == [malformed(persona, path, "duplicate key 'access'")]


def test_a_duplicate_handler_action_alone_fails_boot(persona: Persona) -> None:
    """V1-BOOT-1, V1-CONS-2: two differently named tools on one handler action: the duplicate
    action is named, and so is what it breaks (the catalogue's action, the handler table)."""

    def share_action(document: dict[str, Any]) -> None:
        tool = next(t for t in document["tools"] if t["name"] == "complete")
        tool["handler_action"] = "todos.claim"

    rewrite(persona, share_action)
    found = messages()
    assert ("virgo.E004", f"{who(persona)}: duplicate handler action 'todos.claim' (2 tools)") in (
        found
    )
    assert (
        "virgo.E007",
        f"{who(persona)}: tool complete: handler action 'todos.claim' is not the catalogue's "
        "'todos.complete'",
    ) in found
    assert {message_id for message_id, _ in found} == {"virgo.E004", "virgo.E005", "virgo.E007"}
    assert not any("duplicate tool name" in text for _, text in found)


@pytest.mark.parametrize("version", [0, 1, 2, 4, 99])
def test_any_schema_version_but_3_is_refused_in_an_active_generation(
    persona: Persona, version: int
) -> None:
    """V1-BOOT-1, V1-SCH-3: active generations are always built as v3; a file claiming another
    version (unknown, or a legacy one put in place of the factory's output) fails boot."""
    path = rewrite(persona, lambda document: document.update(schema_version=version))
    assert messages() == [schema_error(persona, path, "schema_version", "3 was expected")]


def test_an_altered_byte_that_still_parses_is_caught_by_the_hash(persona: Persona) -> None:
    """V1-BOOT-1, V1-STAMP-2: one changed letter in a valid stamp is only an alteration:
    exactly one error, naming the file, its actual hash and the recorded one."""
    data = stamp_file(persona).read_bytes()
    assert b'"name":"Checked"' in data
    path = write_bytes(
        persona, data.replace(b'"name":"Checked"', b'"name":"Chucked"'), stored=False
    )
    assert messages() == [altered(persona, path)]
    with pytest.raises(SystemCheckError, match="was altered"):
        call_command("check")


def test_the_same_document_in_other_bytes_is_altered(persona: Persona) -> None:
    """V1-STAMP-2: the hash covers the bytes: re-indenting the same document is an
    alteration, though every reader would parse it the same."""
    path = stamp_file(persona)
    pretty = json.dumps(json.loads(path.read_bytes()), indent=2).encode()
    write_bytes(persona, pretty, stored=False)
    assert messages() == [altered(persona, path)]


def test_a_byte_that_is_not_utf8_is_altered_and_malformed(persona: Persona) -> None:
    """V1-BOOT-1: a flipped byte that breaks the encoding: altered, and not UTF-8."""
    data = bytearray(stamp_file(persona).read_bytes())
    position = data.index(b"Checked")
    data[position] = 0xFF
    path = write_bytes(persona, bytes(data), stored=False)
    reason = (
        f"not UTF-8: 'utf-8' codec can't decode byte 0xff in position {position}: "
        "invalid start byte"
    )
    assert messages() == [altered(persona, path), malformed(persona, path, reason)]
