"""Canonical bytes (RFC 8785), the stamp hash, the composition hash and the strict reader."""

import hashlib
import json
from typing import Any

import pytest

from personas.services import composition_hash as base_hash_of
from stamps.factory import build_stamp
from tests.factories import make_agent, make_owner, make_persona, stamp_kwargs, update_persona
from virgo.canonical import (
    MalformedStamp,
    canonical_bytes,
    composition_hash,
    parse_strict,
    stamp_hash,
)


def reordered(value: Any) -> Any:
    """The same JSON value with every object's keys in reverse order."""
    if isinstance(value, dict):
        return {key: reordered(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [reordered(item) for item in value]
    return value


def test_the_hash_does_not_depend_on_key_order() -> None:
    """V1-FAC-5: RFC 8785 bytes, hence the hash, are the same whatever order keys come in."""
    document = build_stamp(**stamp_kwargs())
    shuffled = reordered(document)
    assert json.dumps(shuffled) != json.dumps(document)
    assert canonical_bytes(shuffled) == canonical_bytes(document)
    assert stamp_hash(shuffled) == stamp_hash(document)
    assert stamp_hash(document) == hashlib.sha256(canonical_bytes(document)).hexdigest()


def test_the_same_inputs_give_the_same_bytes() -> None:
    """V1-STAMP-2: the factory is deterministic, so a generation has exactly one stamp."""
    assert canonical_bytes(build_stamp(**stamp_kwargs())) == canonical_bytes(
        build_stamp(**stamp_kwargs())
    )


def test_the_composition_hash_covers_base_and_stamp() -> None:
    """V1-STAMP-2, V1-FAC-5: changing either the base composition or the stamp changes it."""
    base, stamp = "1" * 64, "2" * 64
    value = composition_hash(base_composition_hash=base, stamp_hash=stamp)
    assert value == composition_hash(base_composition_hash=base, stamp_hash=stamp)
    assert value != composition_hash(base_composition_hash="3" * 64, stamp_hash=stamp)
    assert value != composition_hash(base_composition_hash=base, stamp_hash="3" * 64)
    assert value not in (base, stamp)


@pytest.mark.django_db
def test_a_built_generation_records_both_hashes() -> None:
    """V1-FAC-5: the generation's composition hash is computed over its base and its stamp."""
    persona = make_persona(make_agent(make_owner()))
    generation = persona.generations.get()
    stored = generation.stamp
    assert generation.stamp_hash == stored.stamp_hash == hashlib.sha256(stored.data).hexdigest()
    assert generation.composition_hash == composition_hash(
        base_composition_hash=generation.base_composition_hash, stamp_hash=stored.stamp_hash
    )
    assert canonical_bytes(parse_strict(stored.data)) == stored.data


@pytest.mark.django_db
def test_each_stored_stamp_carries_its_own_generations_base_hash() -> None:
    """V1-FAC-5, V1-STAMP-2: the stamp hashed into a generation's composition names that
    generation's base composition hash (the hash of what the persona is), not a constant: two
    personas, and two generations of one persona, carry different ones."""
    first = make_persona(make_agent(make_owner()))
    second = update_persona(make_persona(first.agent), name="Renamed")
    generations = [first.generations.get(), *second.generations.order_by("number")]
    carried = [parse_strict(g.stamp.data)["base_composition_hash"] for g in generations]
    assert carried == [g.base_composition_hash for g in generations]
    assert carried == [base_hash_of(g.composition) for g in generations]
    assert len(set(carried)) == 3


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"tools": [], "tools": []}', "duplicate key 'tools'"),
        (b'{"generation": 1.5}', "not an integer"),
        (b'{"generation": 9007199254740993}', "outside the I-JSON range"),
        (b'{"generation": NaN}', "NaN is not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"name": "\xff"}', "not UTF-8"),
        (b'{"name": ', "not JSON"),
    ],
)
def test_the_strict_reader_refuses_ambiguous_json(data: bytes, reason: str) -> None:
    """V1-BOOT-1: bytes that consumers could read differently are malformed, not guessed at."""
    with pytest.raises(MalformedStamp, match=reason):
        parse_strict(data)
