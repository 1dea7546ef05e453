"""The stored stamp of each persona generation: written once, never updated, never deleted.

The ORM refuses changes here; the database refuses them too (triggers created by migration
0002), so no code path, admin action or hand-written SQL can alter a stamp. A stamp goes away
only after its generation is gone.

That makes the row what a stamp file is verified against (stored_stamp_of): every reader of an
active stamp file (the runtime, the boot checks, the admin, `virgo stamp show`) compares the
file's hash with its generation's stored stamp, never with a column that could be re-pointed.
"""

from pathlib import Path
from typing import Any, NoReturn

from django.db import models

from personas.models import Generation
from stamps.storage import stamp_path
from virgo.canonical import sha256_hex


class StampImmutable(Exception):
    """A stored stamp cannot be changed or deleted."""


class CapabilityStampQuerySet(models.QuerySet["CapabilityStamp"]):
    def update(self, **kwargs: Any) -> NoReturn:
        raise StampImmutable("capability stamps are immutable: update refused")

    def delete(self) -> NoReturn:
        raise StampImmutable("capability stamps are immutable: delete refused")

    def bulk_update(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise StampImmutable("capability stamps are immutable: bulk update refused")

    def update_or_create(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise StampImmutable("capability stamps are immutable: update_or_create refused")


class CapabilityStamp(models.Model):
    """The canonical (RFC 8785) bytes of one generation's CAPABILITY-STAMP.json."""

    # No database constraint and no ORM cascade: the trigger refuses to delete a stamp while its
    # generation exists, so the stamp row is removed right after its generation is (see
    # stamps.signals), never before.
    generation = models.OneToOneField(
        Generation,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="stamp",
        editable=False,
    )
    persona_uuid = models.UUIDField(editable=False)
    generation_number = models.PositiveIntegerField(editable=False)
    schema_version = models.PositiveSmallIntegerField(default=3, editable=False)
    stamp_hash = models.CharField(max_length=64, editable=False)
    body = models.BinaryField(editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = CapabilityStampQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["persona_uuid", "generation_number"], name="stamp_unique_per_generation"
            )
        ]

    def __str__(self) -> str:
        return f"stamp {self.stamp_hash[:12]} of {self.persona_uuid}#{self.generation_number}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise StampImmutable("capability stamps are immutable: save of a stored stamp refused")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise StampImmutable("capability stamps are immutable: delete refused")

    @property
    def path(self) -> Path:
        return stamp_path(self.persona_uuid, self.generation_number)

    @property
    def data(self) -> bytes:
        return bytes(self.body)


class StampNotVerifiable(Exception):
    """A generation has no stored stamp its file can be verified against."""


def stored_stamp_of(generation: Generation) -> CapabilityStamp:
    """The immutable stored stamp of `generation`, against which its stamp file is verified.

    Raises StampNotVerifiable when there is none, when it is not this generation's, or when the
    generation's recorded stamp hash names other bytes (both are frozen once set: only a
    database edited behind every guard disagrees).
    """
    stored: CapabilityStamp | None = getattr(generation, "stamp", None)
    if stored is None:
        raise StampNotVerifiable("it is recorded as standing but has no stored stamp")
    persona_uuid = str(generation.persona.uuid)
    if (str(stored.persona_uuid), stored.generation_number) != (persona_uuid, generation.number):
        raise StampNotVerifiable(
            f"its stored stamp is that of persona {stored.persona_uuid} generation "
            f"{stored.generation_number}"
        )
    if generation.stamp_hash != stored.stamp_hash:
        raise StampNotVerifiable(
            f"its recorded stamp hash ({generation.stamp_hash or 'nothing'}) is not its stored "
            f"stamp's ({stored.stamp_hash})"
        )
    return stored


def stamp_file_state(generation: Generation) -> str:
    """In words, how a generation's stamp file stands against its stored stamp (admin, CLI)."""
    try:
        stored = stored_stamp_of(generation)
    except StampNotVerifiable as exc:
        return f"UNVERIFIABLE: {exc}"
    try:
        data = stored.path.read_bytes()
    except FileNotFoundError:
        return "MISSING"
    return "matches the stored stamp" if sha256_hex(data) == stored.stamp_hash else "ALTERED"
