"""Canonical bytes and hashes (RFC 8785), and a strict I-JSON reader.

Ground, so records hash a composition and producers a stamp without either reaching the other.

A stamp's hash is the SHA-256 of its RFC 8785 bytes, and those exact bytes are what the file
holds, so hashing the file proves it unaltered. Reading is strict because the three runtime
consumers must see the same document: JSON that parsers disagree about (duplicate keys), or that
is not I-JSON (floats, integers beyond 2**53, NaN), is refused rather than guessed at.
"""

import hashlib
import json
from typing import Any

import orjson
import rfc8785

I_JSON_MAX_INT = 2**53 - 1


class MalformedStamp(ValueError):
    """The bytes are not a strict I-JSON object."""


def canonical_bytes(document: dict[str, Any]) -> bytes:
    """RFC 8785 bytes. Stamps and grants (ASCII keys; strings, I-JSON integers, booleans, null,
    lists and tuples) take orjson, whose output is byte-identical there; anything else goes to
    rfc8785.

    Identical because: ASCII keys sort the same by code point as by UTF-16 unit; both escape
    exactly `"`, `\\` and U+0000-U+001F, with the same short forms and lower-case \\u00xx;
    non-ASCII text is written as UTF-8 by both; integers and literals print alike. Floats, the
    one real difference, are sent to rfc8785, as are strings UTF-8 cannot encode.
    """
    if _plain(document):
        data = _sorted_json(document)
        if data is not None:
            return data
    return rfc8785.dumps(document)


def stamp_bytes(document: dict[str, Any]) -> bytes:
    """canonical_bytes of a stamp that passed the v3 schema, or of a grant read out of one
    (stamps.grant.digest_message), without re-checking its types.

    The schema already guarantees what canonical_bytes checks: every object closed to its
    listed ASCII keys, strings, integers within I-JSON, booleans and null, no floats.
    """
    data = _sorted_json(document)
    return rfc8785.dumps(document) if data is None else data


def _sorted_json(document: dict[str, Any]) -> bytes | None:
    """Compact JSON with sorted keys, or None where orjson cannot write the value as it is
    (a string UTF-8 cannot encode, a key that is not a string, an integer beyond 64 bits)."""
    try:
        return orjson.dumps(document, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return None


def _plain(value: object) -> bool:
    kind = type(value)
    if isinstance(value, str) or kind is bool or value is None:
        return True
    if kind is int:
        return -I_JSON_MAX_INT <= value <= I_JSON_MAX_INT  # type: ignore[operator]
    if kind is dict:
        return all(
            isinstance(key, str) and key.isascii() and _plain(item)
            for key, item in value.items()  # type: ignore[attr-defined]
        )
    if kind is list or kind is tuple:
        # Tuples too (a dataclass's asdict keeps them): both encoders write them as arrays.
        return all(_plain(item) for item in value)  # type: ignore[attr-defined]
    return False


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def stamp_hash(document: dict[str, Any]) -> str:
    return sha256_hex(canonical_bytes(document))


def composition_hash(*, base_composition_hash: str, stamp_hash: str) -> str:
    """The generation's composition hash: covers its base composition and its stamp."""
    return sha256_hex(
        canonical_bytes({"base_composition_hash": base_composition_hash, "stamp_hash": stamp_hash})
    )


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise MalformedStamp(f"duplicate key {key!r}")
        result[key] = value
    return result


def _reject_float(text: str) -> Any:
    raise MalformedStamp(f"number {text} is not an integer (stamps carry no floats)")


def _checked_int(text: str) -> int:
    value = int(text)
    if abs(value) > I_JSON_MAX_INT:
        raise MalformedStamp(f"integer {text} is outside the I-JSON range")
    return value


def _reject_constant(text: str) -> Any:
    raise MalformedStamp(f"{text} is not JSON")


def parse_strict(data: bytes) -> dict[str, Any]:
    """Parse stamp bytes, refusing anything that is not a strict I-JSON object."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedStamp(f"not UTF-8: {exc}") from None
    try:
        document = json.loads(
            text,
            object_pairs_hook=_reject_duplicate_keys,
            parse_float=_reject_float,
            parse_int=_checked_int,
            parse_constant=_reject_constant,
        )
    except json.JSONDecodeError as exc:
        raise MalformedStamp(f"not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise MalformedStamp("the top level is not a JSON object")
    return document


def parse_stored(data: bytes) -> dict[str, Any]:
    """parse_strict's document, for bytes whose SHA-256 was just found equal to a stored stamp's.

    Those bytes are what stamp_bytes wrote from a document the schema passed (integers within
    I-JSON, no floats), so only the duplicate-key check could still fail, and a document that
    orjson writes back to exactly these bytes has no duplicate key. Anything else takes
    parse_strict, which says what is wrong.
    """
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError:
        return parse_strict(data)
    if isinstance(document, dict) and _sorted_json(document) == data:
        return document
    return parse_strict(data)
