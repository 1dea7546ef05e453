"""What a snapshot import kept: the import itself, and the archive's stamps as read-only history."""

from django.conf import settings
from django.db import models

from personas.models import Persona


class SnapshotImport(models.Model):
    """One `virgo persona import`: who brought which archived persona in, as which new persona.

    The archive's stamps are kept beside it as history (ArchivedStamp); the persona itself was
    created by the services and stamped by the factory like any other.
    """

    persona = models.ForeignKey(Persona, on_delete=models.CASCADE, related_name="snapshot_imports")
    source_persona = models.UUIDField(help_text="The persona the archive names: provenance only.")
    manifest_sha256 = models.CharField(max_length=64)
    imported_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    imported_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-imported_at", "-id"]

    def __str__(self) -> str:
        return f"import of {self.source_persona} as {self.persona}"


class ArchivedStamp(models.Model):
    """A stamp a snapshot carried, as history: never a generation's stamp, file or authority."""

    snapshot_import = models.ForeignKey(
        SnapshotImport, on_delete=models.CASCADE, related_name="archived_stamps"
    )
    generation_number = models.PositiveIntegerField()
    stamp_hash = models.CharField(max_length=64)
    body = models.BinaryField()

    class Meta:
        ordering = ["snapshot_import", "generation_number"]
        constraints = [
            models.UniqueConstraint(
                fields=["snapshot_import", "generation_number"],
                name="archived_stamp_unique_per_generation",
            )
        ]

    def __str__(self) -> str:
        return f"archived stamp {self.stamp_hash[:12]} (generation {self.generation_number})"
