"""The pinned grant (VX-TRUST-4): each persona's owner-private salt and each generation's digest.

Django gives every existing row the same value of a callable default, so each persona is
given its own salt here. The digests of generations stamped before this are filled in by
stamps 0004, from their stored stamps (the records know nothing of stamps).
"""

import secrets

from django.db import migrations, models

import personas.models
from personas.migrations._sqlite_rename import around


def salt_each_persona(apps, schema_editor):
    Persona = apps.get_model("personas", "Persona")
    for persona in Persona.objects.only("pk").iterator():
        Persona.objects.filter(pk=persona.pk).update(grant_salt=secrets.token_hex(32))


class Migration(migrations.Migration):
    dependencies = [
        ("personas", "0006_stamp_audit_and_not_standing_index"),
    ]

    operations = around(
        [
            migrations.AddField(
                model_name="generation",
                name="grant_digest",
                field=models.CharField(blank=True, max_length=64),
            ),
            migrations.AddField(
                model_name="persona",
                name="grant_salt",
                field=models.CharField(
                    default=personas.models.new_grant_salt, editable=False, max_length=64
                ),
            ),
            migrations.RunPython(salt_each_persona, migrations.RunPython.noop),
        ]
    )
