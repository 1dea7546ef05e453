from django.conf import settings
from django.db import migrations, models


def name_the_actors(apps, schema_editor):
    """Events from before keep who acted by name too: the account's username, as it is now."""
    AuditEvent = apps.get_model("personas", "AuditEvent")
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    actors = AuditEvent.objects.filter(actor__isnull=False).values_list("actor_id", flat=True)
    for user in User.objects.filter(pk__in=actors.distinct()):
        AuditEvent.objects.filter(actor_id=user.pk).update(actor_name=user.username)


class Migration(migrations.Migration):
    dependencies = [
        ("personas", "0016_registry_search_indexes"),
    ]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="actor_name",
            field=models.CharField(blank=True, max_length=150),
        ),
        migrations.AddField(
            model_name="auditevent",
            name="channel",
            field=models.CharField(
                choices=[
                    ("admin", "Admin"),
                    ("api", "API"),
                    ("cli", "Command line"),
                    ("import", "Import"),
                    ("task", "Task (worker)"),
                    ("runtime", "Runtime (a tool call)"),
                    ("internal", "Internal (no entry point)"),
                ],
                default="internal",
                max_length=16,
            ),
        ),
        migrations.AddField(
            model_name="auditevent",
            name="correlation_id",
            field=models.CharField(blank=True, db_index=True, max_length=200),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="at",
            field=models.DateTimeField(auto_now_add=True, db_index=True, verbose_name="when"),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="kind",
            field=models.CharField(
                choices=[
                    ("persona-created", "Persona created"),
                    ("persona-edited", "Persona changed"),
                    ("generation", "New generation (not an owner's edit)"),
                    ("persona-deleted", "Persona deleted"),
                    ("proposal-made", "Grant change proposed"),
                    ("proposal-approved", "Grant change approved"),
                    ("proposal-rejected", "Grant change rejected"),
                    ("proposal-stale", "Grant change gone stale"),
                    ("card-imported", "Persona imported from an agent card"),
                    ("snapshot-imported", "Persona imported from a snapshot"),
                    ("discoverability", "Discoverability toggled"),
                    ("grant-narrowed", "Agent grant narrowed a persona"),
                    ("skill-map-changed", "Verb->skill map changed"),
                    ("stamp-repaired", "Stamp file repaired"),
                    ("stamp-quarantined", "Stamp quarantined"),
                    ("stamp-restored", "Stamp file restored"),
                    ("revoked", "Persona or generation revoked"),
                    ("identity-linked", "OpenID Connect identity linked"),
                    ("organization-verified", "Organization domain verified"),
                    ("organization-approved", "Organization domain approved"),
                    ("organization-lapsed", "Organization domain proof lapsed"),
                    ("organization-shared", "Organization domain shared"),
                    ("purged", "Revoked persona purged (its tombstone kept)"),
                    ("key-created", "Signing key created"),
                    ("key-rotated", "Signing key rotated"),
                    ("key-retired", "Signing key retired"),
                    ("key-revoked", "Signing key revoked"),
                    ("confirmation-requested", "Call held for confirmation"),
                    ("confirmation-answered", "Confirmation answered"),
                    ("learned-choice-used", "Learned choice applied"),
                    ("call-refused", "Call refused"),
                ],
                max_length=32,
            ),
        ),
        migrations.RunPython(name_the_actors, migrations.RunPython.noop),
    ]
