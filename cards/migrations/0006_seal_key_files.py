"""Seal every signing key that still signs from a file into the database (VX-SCALE-1).

Each active or retiring key whose private half is only a file is read from that file (with the
same checks as ever: this user's alone, a P-256 or Ed25519 key) and sealed under the current
key-encryption key. A key whose file is not on this machine, or is refused, is left as it was
and reported: it keeps signing where its file is, and `virgo keys rewrap` run there seals it.
The files themselves are left where they are (a generated one goes when its key stops signing).
"""

from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from django.db import migrations


def seal_key_files(apps: Any, schema_editor: Any) -> None:
    from cards import keys, sealing

    SigningKey = apps.get_model("cards", "SigningKey")
    unsealed = SigningKey.objects.using(schema_editor.connection.alias).filter(
        state__in=["active", "retiring"], private_key_sealed=""
    )
    for key in unsealed.exclude(private_key_path=""):
        try:
            private = keys.read_private_key(Path(key.private_key_path))
        except keys.UnusableKeyFile as refused:
            print(
                f"\n  signing key {key.kid} left unsealed: {refused}; run `virgo keys rewrap`"
                " on the machine that has its file"
            )
            continue
        der = private.private_bytes(
            serialization.Encoding.DER,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        key.private_key_sealed = sealing.seal(key.kid, der)
        key.save(update_fields=["private_key_sealed"])


class Migration(migrations.Migration):
    dependencies = [
        ("cards", "0005_sealed_signing_keys"),
    ]

    operations = [
        migrations.RunPython(seal_key_files, migrations.RunPython.noop, elidable=True),
    ]
