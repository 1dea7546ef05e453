"""What a generation's grant digest covers (stamps.grant.GRANT_DEFINITION); see stamps 0006."""

from django.db import migrations, models

from personas.migrations._sqlite_rename import around


class Migration(migrations.Migration):
    dependencies = [
        ("personas", "0010_directory_search_indexes"),
    ]

    operations = around(
        [
            migrations.AddField(
                model_name="generation",
                name="grant_definition",
                field=models.CharField(blank=True, max_length=40),
            ),
        ]
    )
