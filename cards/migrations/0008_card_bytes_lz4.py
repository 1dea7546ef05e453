"""A card's served bytes and the payload its signatures cover: compressed with LZ4 where PostgreSQL has it (virgo.compression)."""

from django.db import migrations

from virgo.compression import compress_with_lz4


class Migration(migrations.Migration):
    dependencies = [("cards", "0007_published_card_status_listed")]

    operations = [compress_with_lz4("cards_publishedcard", "body", "payload")]
