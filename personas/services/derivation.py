"""What a persona is, derived from what its owner wrote; nothing here writes.

Its skills come from the verb->skill map (SPEC-0009 derived skills: every skill whose verbs the
persona's subset holds); its composition is everything it is as I-JSON, the one input of its card
and of its stamp, and the hash of that composition names a generation. The lowest module of the
package: every other one may import it.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from personas.models import OwnerIdentity, Persona, Skill, SkillMapRevision
from virgo.canonical import canonical_bytes, sha256_hex


@dataclass(frozen=True, slots=True)
class SkillMap:
    revision: int
    skills: Sequence[Skill]


def derive_skills(verb_subset: Iterable[str], skill_map: Iterable[Skill]) -> list[Skill]:
    """The skills whose required verbs are all in the subset (SPEC-0009 derived skills).

    A skill that requires no verbs would be advertised without any capability behind it, so
    it is never derived.
    """
    verbs = set(verb_subset)
    return [
        skill for skill in skill_map if skill.required_verbs and set(skill.required_verbs) <= verbs
    ]


def skill_map_revision() -> int:
    return SkillMapRevision.objects.values_list("revision", flat=True).first() or 0


def current_skill_map() -> SkillMap:
    # The revision is read before the skills: a map change committing in between leaves the
    # persona one revision behind (so it is recomputed again), never current with stale skills.
    revision = skill_map_revision()
    return SkillMap(revision, list(Skill.objects.order_by("slug")))


def composition_of(persona: Persona) -> dict[str, Any]:
    """Everything a persona is, as I-JSON: the input of its card and of its stamp.

    `ask_first_verbs` is there only when the owner set some, so the composition of a persona
    made before they existed is unchanged and opens no generation of its own.
    """
    identity = _identity_of(persona.agent.owner)
    composition = {
        "persona": str(persona.uuid),
        "agent": persona.agent_id,
        "name": persona.name,
        "description": persona.description,
        "system_prompt_sha256": sha256_hex(persona.system_prompt.encode()),
        "verb_subset": sorted(persona.verb_subset),
        "queues": sorted(persona.queues),
        "skills": list(persona.skills),
        "persona_class": persona.persona_class,
        "address": persona.address.path,
        "graph_namespace": persona.effective_graph_namespace,
        "human_surface_bindings": sorted(persona.human_surface_bindings),
        "owning_lead": str(persona.owning_lead.uuid) if persona.owning_lead else None,
        "provider": {
            "organization": identity.provider_organization,
            "url": identity.provider_url,
        },
    }
    if persona.ask_first_verbs:
        composition["ask_first_verbs"] = sorted(persona.ask_first_verbs)
    return composition


def composition_hash(composition: dict[str, Any]) -> str:
    """SHA-256 of the composition's RFC 8785 bytes (the C encoder where that is byte-identical)."""
    return sha256_hex(canonical_bytes(composition))


def _identity_of(user: Any) -> OwnerIdentity:
    try:
        return user.identity
    except OwnerIdentity.DoesNotExist:
        return OwnerIdentity(user=user, display_name=user.get_full_name() or user.get_username())
