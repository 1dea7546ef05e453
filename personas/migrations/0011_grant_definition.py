"""What a generation's grant digest covers (stamps.grant.GRANT_DEFINITION); see stamps 0006."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("personas", "0010_directory_search_indexes"),
    ]

    operations = [
        migrations.AddField(
            model_name="generation",
            name="grant_definition",
            field=models.CharField(blank=True, max_length=40),
        ),
    ]
