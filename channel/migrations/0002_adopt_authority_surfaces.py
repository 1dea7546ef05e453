import re

from django.db import migrations

# What a binding may be (personas.surfaces); copied, since a migration must not follow later code.
BINDING = re.compile(r"[!-~]{1,200}")


def adopt_authority_surfaces(apps, schema_editor):
    """Register each owner's confirmation binding as one of their human surfaces, unless another
    owner already holds it (personas 0005 registered the bindings personas use).

    A confirmation surface another owner holds is kept as it is, but confirmations are not sent
    there (channel.routing): they wait in the admin until the owner sets one of their own.
    """
    AuthoritySurface = apps.get_model("channel", "AuthoritySurface")
    HumanSurface = apps.get_model("personas", "HumanSurface")
    for surface in AuthoritySurface.objects.order_by("pk").iterator():
        binding = surface.binding
        if not BINDING.fullmatch(binding) or binding.startswith("virgo:"):
            continue
        if not HumanSurface.objects.filter(binding__iexact=binding).exists():
            HumanSurface.objects.create(owner_id=surface.user_id, binding=binding)


class Migration(migrations.Migration):
    dependencies = [
        ("channel", "0001_initial"),
        ("personas", "0005_human_surfaces_and_ask_first_verbs"),
    ]

    operations = [
        migrations.RunPython(adopt_authority_surfaces, migrations.RunPython.noop),
    ]
