"""The revocation status list (VX-TRUST-7): each generation's index, and the list's version.

Every generation that exists gets its index here, oldest first, and the bit of every one
already revoked (the generation itself, or its whole persona) is set, so the cards published
from now on name an index whose bit already tells the truth.
"""

from datetime import datetime
from typing import Any

import django.db.models.deletion
from django.db import migrations, models

_BATCH = 2000


def allocate(apps: Any, schema_editor: Any) -> None:
    generation_model = apps.get_model("personas", "Generation")
    entry_model = apps.get_model("personas", "StatusListEntry")
    apps.get_model("personas", "StatusListVersion").objects.create(pk=1, version=0)
    rows = generation_model.objects.order_by("pk").values_list(
        "pk", "revoked_at", "persona__revoked_at"
    )
    batch: list[Any] = []
    for generation_id, revoked_at, persona_revoked_at in rows.iterator(chunk_size=_BATCH):
        revoked: datetime | None = revoked_at or persona_revoked_at
        batch.append(entry_model(generation_id=generation_id, revoked_at=revoked))
        if len(batch) == _BATCH:
            entry_model.objects.bulk_create(batch)
            batch = []
    entry_model.objects.bulk_create(batch)


class Migration(migrations.Migration):
    dependencies = [
        ("personas", "0014_purged_persona_keeps_its_tombstone"),
    ]

    operations = [
        migrations.CreateModel(
            name="StatusListVersion",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("version", models.PositiveBigIntegerField(default=0)),
            ],
        ),
        migrations.CreateModel(
            name="StatusListEntry",
            fields=[
                ("index", models.BigAutoField(primary_key=True, serialize=False)),
                ("revoked_at", models.DateTimeField(blank=True, editable=False, null=True)),
                (
                    "generation",
                    models.OneToOneField(
                        editable=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="status_entry",
                        to="personas.generation",
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(
                        condition=models.Q(("revoked_at__isnull", False)),
                        fields=["index"],
                        name="status_entry_revoked_idx",
                    )
                ],
            },
        ),
        migrations.RunPython(allocate, migrations.RunPython.noop),
    ]
