"""Every persona's composition now carries its owner's identity chain (VX-ID-3).

Typed identities became unverified in 0012; the cards that named them must be published again.
A new revision of the derivation puts every persona behind, so the reconciler (beat, `virgo
reconcile`, `make run`) derives each one's composition again, opening a generation whose card
names only what was proven.
"""

from typing import Any

from django.db import migrations
from django.db.models import F


def every_persona_behind(apps: Any, schema_editor: Any) -> None:
    # The counter's one row, as personas.services.skills keeps it.
    revision_model = apps.get_model("personas", "SkillMapRevision")
    revision_model.objects.get_or_create(pk=1)
    revision_model.objects.filter(pk=1).update(revision=F("revision") + 1)


class Migration(migrations.Migration):
    dependencies = [("personas", "0012_proven_identity")]

    operations = [migrations.RunPython(every_persona_behind, migrations.RunPython.noop)]
