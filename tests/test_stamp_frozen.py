"""A stamp file is verified against the immutable stamp row; a generation's hashes are frozen.

The attack: an owner who can write the stamp file and one database column swaps the active
stamp for one whose workspace_write reaches every path (`**`) and points the generation's
stamp_hash at it. Each step must fail: the ORM refuses the column on every update path, the
database refuses it to raw SQL, and with the database's guard dropped the runtime and the boot
checks still refuse, since they compare the file with the stored stamp, not with the column.
These run on SQLite and, in make test's second run, on PostgreSQL.
"""

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import rfc8785
from django.conf import settings
from django.db import DatabaseError, connection, transaction

from personas.models import Generation, GenerationFrozen, Persona
from personas.services import persona_set_discoverable
from runtime.stamp import StampUnavailable, load_active_stamp
from stamps.checks import active_stamp_messages
from stamps.models import CapabilityStamp
from stamps.storage import stamp_path
from tests.factories import update_persona
from tests.grant_support import params as pinned_params
from tests.runtime_support import call, standing_persona
from tests.stored_stamps import standing_without_stored_stamp
from virgo.bulk import update_each
from virgo.canonical import sha256_hex

pytestmark = pytest.mark.django_db

OUTSIDE = "src/app.py"


@pytest.fixture
def persona() -> Persona:
    return standing_persona()


def current(persona: Persona) -> Generation:
    return Generation.objects.get(persona=persona, number=persona.generation)


def writable_everywhere(persona: Persona) -> tuple[Path, bytes]:
    """Swap the active stamp file for one whose workspace_write may write any path."""
    path = stamp_path(persona.uuid, persona.generation)
    document = json.loads(path.read_bytes())
    tool = next(tool for tool in document["tools"] if tool["name"] == "workspace_write")
    tool["scope"]["paths"] = ["**"]
    document["bindings"]["workspace"]["mutable_paths"] = ["**"]
    data = rfc8785.dumps(document)
    path.write_bytes(data)
    return path, data


def assert_refused(persona: Persona) -> None:
    """The runtime works from the stored stamp only: every call is refused, nothing written."""
    result = call(persona, "workspace_write", {"path": OUTSIDE, "content": "pwned"})
    assert (result["ok"], result["code"]) == (False, "stamp_unavailable")
    assert not list((Path(settings.VIRGO_HOME) / "workspaces").rglob("app.py"))


def test_before_the_attack_a_path_outside_the_binding_is_not_mutable(persona: Persona) -> None:
    """VX-SEC-8: the baseline: the stored stamp lets workspace_write reach its paths only."""
    result = call(persona, "workspace_write", {"path": OUTSIDE, "content": "x"})
    assert result["code"] == "not_mutable"


ORM_WRITES: dict[str, Callable[[Generation, str, str], object]] = {
    "queryset-update": lambda generation, field, value: Generation.objects.filter(
        pk=generation.pk
    ).update(**{field: value}),
    "related-manager-update": lambda generation, field, value: (
        generation.persona.generations.update(**{field: value})
    ),
    "save": lambda generation, field, value: (
        setattr(generation, field, value),
        generation.save(),
    ),
    "save-update-fields": lambda generation, field, value: (
        setattr(generation, field, value),
        generation.save(update_fields=[field]),
    ),
    "bulk-update": lambda generation, field, value: (
        setattr(generation, field, value),
        Generation.objects.bulk_update([generation], [field]),
    ),
    "update-each": lambda generation, field, value: (
        setattr(generation, field, value),
        update_each([generation], [field]),
    ),
    "update-or-create": lambda generation, field, value: Generation.objects.update_or_create(
        pk=generation.pk, defaults={field: value}
    ),
}


@pytest.mark.parametrize("how", list(ORM_WRITES))
def test_the_orm_refuses_to_repoint_the_stamp_hash(persona: Persona, how: str) -> None:
    """VX-SEC-8: swapping the file and re-pointing stamp_hash through any ORM path fails at the
    column, and the swapped file is refused by the runtime."""
    generation = current(persona)
    recorded = generation.stamp_hash
    _, data = writable_everywhere(persona)
    with pytest.raises(GenerationFrozen, match="stamp_hash"):
        ORM_WRITES[how](generation, "stamp_hash", sha256_hex(data))
    assert current(persona).stamp_hash == recorded
    assert_refused(persona)


@pytest.mark.parametrize("value", ["0" * 64, ""], ids=["repointed", "emptied"])
@pytest.mark.parametrize("how", list(ORM_WRITES))
def test_the_orm_refuses_to_change_a_set_grant_digest(
    persona: Persona, how: str, value: str
) -> None:
    """VX-TRUST-4, VX-SEC-8: the grant digest a card pins is set once with the stamp hash: a
    peer pinning it must never see it re-pointed (or emptied, to be set anew) beside an
    unchanged generation, through any ORM path; the served card keeps the stored digest."""
    persona = persona_set_discoverable(
        persona=persona, actor=persona.agent.owner, discoverable=True, via="test"
    )
    generation = current(persona)
    recorded = generation.grant_digest
    assert len(recorded) == 64 and pinned_params(persona)["grantDigest"] == recorded
    with pytest.raises(GenerationFrozen, match="grant_digest"):
        ORM_WRITES[how](generation, "grant_digest", value)
    assert current(persona).grant_digest == recorded
    assert pinned_params(persona)["grantDigest"] == recorded


@pytest.mark.parametrize(
    "change",
    [
        {"composition_hash": "0" * 64},
        {"composition_hash": ""},
        {"stamp_hash": ""},
        {"grant_digest": "0" * 64},
        {"grant_digest": ""},
        {"number": 7},
        {"base_composition_hash": "0" * 64},
        {"composition": {}},
    ],
    ids=lambda change: next(iter(change)) + ("-emptied" if "" in change.values() else ""),
)
def test_the_orm_refuses_every_frozen_column(persona: Persona, change: dict[str, object]) -> None:
    """VX-SEC-8, VX-TRUST-4: the composition hash and the grant digest are frozen once set
    like the stamp hash; what a generation is (number, composition, base hash) never changes."""
    generation = current(persona)
    with pytest.raises(GenerationFrozen):
        Generation.objects.filter(pk=generation.pk).update(**change)
    for name, value in change.items():
        setattr(generation, name, value)
    with pytest.raises(GenerationFrozen):
        generation.save()
    with pytest.raises(GenerationFrozen):
        update_each([generation], list(change))


def test_what_is_not_frozen_still_updates(persona: Persona) -> None:
    """VX-SEC-8: standing and created_at stay writable (the outcome is recorded, imports date
    rows), and writing a frozen column's own value is no change."""
    generation = current(persona)
    assert Generation.objects.filter(pk=generation.pk).update(
        standing=True, stamp_hash=generation.stamp_hash
    )
    generation.save()
    update_each([generation], ["standing", "stamp_hash", "composition_hash", "grant_digest"])
    assert Generation.objects.filter(pk=generation.pk).update(grant_digest=generation.grant_digest)


def test_the_first_set_goes_through_update_and_update_each(persona: Persona) -> None:
    """VX-SEC-8: a generation's hashes are set once by the stamp build: through
    QuerySet.update (one build) and virgo.bulk.update_each (the fan-out); a second value is
    refused on both paths."""
    persona = update_persona(persona, queues=["triage"])
    assert persona.standing is True and current(persona).stamp_hash
    owed = Generation.objects.create(
        persona=persona,
        number=persona.generation + 1,
        composition=current(persona).composition,
        base_composition_hash="1" * 64,
    )
    owed.stamp_hash, owed.composition_hash, owed.grant_digest = "2" * 64, "3" * 64, "7" * 64
    update_each([owed], ["stamp_hash", "composition_hash", "grant_digest"])
    assert Generation.objects.filter(pk=owed.pk, stamp_hash="2" * 64).exists()
    assert Generation.objects.filter(pk=owed.pk, grant_digest="7" * 64).exists()
    owed.stamp_hash = "4" * 64
    with pytest.raises(GenerationFrozen):
        update_each([owed], ["stamp_hash"])
    owed.stamp_hash, owed.grant_digest = "2" * 64, "8" * 64
    with pytest.raises(GenerationFrozen, match="grant_digest"):
        update_each([owed], ["grant_digest"])
    second = Generation.objects.create(
        persona=persona,
        number=persona.generation + 2,
        composition={},
        base_composition_hash="1" * 64,
    )
    Generation.objects.filter(pk=second.pk).update(stamp_hash="5" * 64, grant_digest="9" * 64)
    with pytest.raises(GenerationFrozen):
        Generation.objects.filter(pk=second.pk).update(stamp_hash="6" * 64)
    with pytest.raises(GenerationFrozen, match="grant_digest"):
        Generation.objects.filter(pk=second.pk).update(grant_digest="a" * 64)


def _quoted(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


RAW_UPDATES = {
    "stamp_hash": "stamp_hash = {digest}",
    "stamp_hash-emptied": "stamp_hash = ''",
    "composition_hash": "composition_hash = {digest}",
    "grant_digest": "grant_digest = {digest}",
    "grant_digest-emptied": "grant_digest = ''",
    "number": "number = number + 10",
    "base_composition_hash": "base_composition_hash = {digest}",
    "composition": "composition = '{{}}'",
    "persona": "persona_id = persona_id + 1000",
}


@pytest.mark.parametrize("column", list(RAW_UPDATES))
def test_the_database_refuses_raw_sql(persona: Persona, column: str) -> None:
    """VX-SEC-8: a trigger refuses the same changes to any client: SQLite and PostgreSQL."""
    generation = current(persona)
    _, data = writable_everywhere(persona)
    assignment = RAW_UPDATES[column].format(digest=_quoted(sha256_hex(data)))
    with (
        pytest.raises(DatabaseError, match=r"immutable|set once"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(
            f"UPDATE personas_generation SET {assignment} WHERE id = %s", [generation.pk]
        )
    after = current(persona)
    assert (after.stamp_hash, after.grant_digest) == (
        generation.stamp_hash,
        generation.grant_digest,
    )
    assert_refused(persona)


def test_the_database_lets_the_first_set_through(persona: Persona) -> None:
    """VX-SEC-8, VX-TRUST-4: an empty hash or digest may be set once by raw SQL too; standing
    stays writable."""
    generation = Generation.objects.create(
        persona=persona,
        number=persona.generation + 1,
        composition={},
        base_composition_hash="1" * 64,
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE personas_generation SET stamp_hash = %s, composition_hash = %s, "
            "grant_digest = %s, standing = %s WHERE id = %s",
            ["2" * 64, "3" * 64, "4" * 64, True, generation.pk],
        )
    generation.refresh_from_db()
    assert (generation.stamp_hash, generation.composition_hash, generation.grant_digest) == (
        "2" * 64,
        "3" * 64,
        "4" * 64,
    )


@contextmanager
def generation_guard_dropped() -> Iterator[None]:
    """Drop the database's guard on generations for this test's transaction (rolled back)."""
    statements = {
        "sqlite": [
            "DROP TRIGGER personas_generation_immutable",
            "DROP TRIGGER personas_generation_hashes_set_once",
        ],
        "postgresql": ["DROP TRIGGER personas_generation_frozen ON personas_generation"],
    }[connection.vendor]
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)
    yield


def test_with_the_database_guard_dropped_the_runtime_still_refuses(persona: Persona) -> None:
    """VX-SEC-8: the runtime and boot verify the file against the immutable stamp row: with
    the generation's trigger gone and the file and stamp_hash both swapped, nothing runs and
    boot names the disagreement."""
    generation = current(persona)
    stored = CapabilityStamp.objects.get(generation=generation)
    path, data = writable_everywhere(persona)
    digest = sha256_hex(data)
    with generation_guard_dropped(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE personas_generation SET stamp_hash = %s WHERE id = %s",
            [digest, generation.pk],
        )
    assert current(persona).stamp_hash == digest
    with pytest.raises(StampUnavailable) as refused:
        load_active_stamp(persona)
    assert f"its recorded stamp hash ({digest}) is not its stored stamp's" in refused.value.reason
    assert_refused(persona)
    # The load quarantined the persona (VX-OPS-4); `virgo check` names it and every reason.
    [(code, text)] = [(message.id, message.msg) for message in active_stamp_messages()]
    who = f"persona {persona.name!r} ({persona.uuid}) generation {generation.number}"
    assert code == "virgo.E012"
    assert text.startswith(f"{who} is quarantined: quarantined by the runtime's load; ")
    assert (
        f"its recorded stamp hash ({digest}) is not its stored stamp's ({stored.stamp_hash})"
        in (text)
    )
    assert f"stamp file {path} was altered (sha256 {digest}, stored {stored.stamp_hash})" in text


def test_a_swapped_file_alone_is_refused_against_the_stored_stamp(persona: Persona) -> None:
    """VX-SEC-8: the file is compared with the stored stamp's hash (nothing else changed)."""
    stored = CapabilityStamp.objects.get(generation=current(persona))
    path, data = writable_everywhere(persona)
    with pytest.raises(StampUnavailable) as refused:
        load_active_stamp(persona)
    assert refused.value.reason.endswith(
        f"stamp file {path} was altered (sha256 {sha256_hex(data)}, stored {stored.stamp_hash})"
    )


def test_a_standing_generation_without_a_stored_stamp_is_refused() -> None:
    """VX-SEC-8: a generation marked standing whose stamp was never stored has nothing its
    file could be verified against: the runtime refuses it, whatever file is there."""
    persona = standing_persona()
    data = stamp_path(persona.uuid, persona.generation).read_bytes()
    path = standing_without_stored_stamp(persona)
    assert path.read_bytes() == data
    with pytest.raises(StampUnavailable, match="has no stored stamp"):
        load_active_stamp(persona)
