"""The installation's public base URL, recorded once (cards.base_url, VX-SCALE-4).

An installation that has published cards records the URL most of them were published under, so
the machines configured with it keep publishing and any other is found out at once; a new one
records the URL of the first process that signs.
"""

from typing import Any

from django.db import migrations, models
from django.db.models import Count
from django.utils import timezone

from virgo.public_url import normalise_base_url


def record_the_cards_url(apps: Any, schema_editor: Any) -> None:
    PublishedCard = apps.get_model("cards", "PublishedCard")
    PublicBaseUrl = apps.get_model("cards", "PublicBaseUrl")
    most = (
        PublishedCard.objects.exclude(base_url="")
        .values("base_url")
        .annotate(cards=Count("pk"))
        .order_by("-cards", "base_url")
        .first()
    )
    if most is None:
        return
    try:
        url = normalise_base_url(most["base_url"])
    except ValueError:
        # Not a URL a process could be configured with now: the first to sign records its own.
        return
    PublicBaseUrl.objects.create(pk=1, url=url, recorded_at=timezone.now())


class Migration(migrations.Migration):
    dependencies = [("cards", "0008_card_bytes_lz4")]

    operations = [
        migrations.CreateModel(
            name="PublicBaseUrl",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("url", models.CharField(max_length=2048)),
                ("recorded_at", models.DateTimeField()),
            ],
        ),
        migrations.RunPython(record_the_cards_url, migrations.RunPython.noop),
    ]
