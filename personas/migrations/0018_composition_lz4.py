"""A generation's composition: compressed with LZ4 where PostgreSQL has it (virgo.compression)."""

from django.db import migrations

from virgo.compression import compress_with_lz4


class Migration(migrations.Migration):
    dependencies = [("personas", "0017_audit_trail_whole")]

    operations = [compress_with_lz4("personas_generation", "composition")]
