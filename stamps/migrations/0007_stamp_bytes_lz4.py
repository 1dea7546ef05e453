"""A stamp's bytes: compressed with LZ4 where PostgreSQL has it (virgo.compression)."""

from django.db import migrations

from virgo.compression import compress_with_lz4


class Migration(migrations.Migration):
    dependencies = [("stamps", "0006_grant_definition_set_once")]

    operations = [compress_with_lz4("stamps_capabilitystamp", "body")]
