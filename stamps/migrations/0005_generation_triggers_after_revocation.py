"""Revocation (personas 0008) remade personas_generation on SQLite, dropping its triggers: they
are made again, as 0004 left them. On PostgreSQL they survived; replacing the function is
harmless."""

from importlib import import_module

from django.db import migrations

_grant_digests = import_module("stamps.migrations.0004_grant_digests")


class Migration(migrations.Migration):
    dependencies = [
        ("stamps", "0004_grant_digests"),
        ("personas", "0008_revocation"),
    ]
    operations = [migrations.RunPython(_grant_digests.triggers, migrations.RunPython.noop)]
