"""The verb->skill map, which only staff administrators change.

Saving or deleting a skill is audited, moves the map's revision and queues the fan-out
(FAN_OUT_SKILL_MAP) that recomputes every affected persona's skills after the commit.
"""

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import F

from personas import audit
from personas.catalogue import unknown_verbs
from personas.models import AuditEvent, Skill, SkillMapRevision
from personas.services.generations import FAN_OUT_SKILL_MAP
from personas.services.validation import User, _require_string_list
from virgo.queueing import queue_after_commit


def _require_staff(actor: User) -> None:
    if not (actor.is_authenticated and getattr(actor, "is_superuser", False)):
        raise PermissionDenied("only staff administrators may change the verb->skill map")


@transaction.atomic
def skill_save(
    *,
    actor: User,
    slug: str,
    name: str,
    description: str,
    required_verbs: list[str],
    tags: list[str] | None = None,
) -> Skill:
    """Create or change a skill; every affected persona is recomputed by a Celery fan-out."""
    _require_staff(actor)
    required = _require_string_list("required_verbs", required_verbs)
    if not required:
        raise ValidationError({"required_verbs": ["a skill requires at least one verb"]})
    unknown = unknown_verbs(required)
    if unknown:
        raise ValidationError({"required_verbs": [f"unknown verbs: {', '.join(unknown)}"]})
    skill = Skill.objects.filter(slug=slug).first() or Skill(slug=slug)
    skill.name, skill.description = name, description
    skill.required_verbs = sorted(required)
    skill.tags = _require_string_list("tags", tags or [])
    if not skill.tags:
        raise ValidationError({"tags": ["a skill needs at least one tag (A2A cards require tags)"]})
    skill.full_clean()
    skill.save()
    _record_map_change(actor, slug, "saved")
    return skill


@transaction.atomic
def skill_delete(*, actor: User, skill: Skill) -> None:
    _require_staff(actor)
    slug = skill.slug
    skill.delete()
    _record_map_change(actor, slug, "deleted")


def _record_map_change(actor: User, slug: str, change: str) -> None:
    audit.record(
        AuditEvent.Kind.SKILL_MAP_CHANGED,
        actor=actor,
        data={"skill": slug, "change": change},
    )
    SkillMapRevision.objects.get_or_create(pk=1)
    SkillMapRevision.objects.filter(pk=1).update(revision=F("revision") + 1)
    queue_after_commit(FAN_OUT_SKILL_MAP)
