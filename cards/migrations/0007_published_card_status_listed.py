"""Cards name their place in the revocation status list (VX-TRUST-7): every card published
before is owed again, and is published anew on its next request or by the task that follows
its persona's next change."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("cards", "0006_seal_key_files"),
        ("personas", "0015_revocation_status_list"),
    ]

    operations = [
        migrations.AddField(
            model_name="publishedcard",
            name="status_listed",
            field=models.BooleanField(default=False),
        ),
    ]
