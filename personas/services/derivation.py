"""What a persona is, derived from what its owner wrote; nothing here writes.

Its skills come from the verb->skill map (SPEC-0009 derived skills: every skill whose verbs the
persona's subset holds); its composition is everything it is as I-JSON, the one input of its card
and of its stamp, and the hash of that composition names a generation. The lowest module of the
package: every other one may import it.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.utils.crypto import salted_hmac

from personas.models import OwnerIdentity, Persona, Skill, SkillMapRevision, Verification
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
        **provider_and_identity(identity),
    }
    if persona.ask_first_verbs:
        composition["ask_first_verbs"] = sorted(persona.ask_first_verbs)
    return composition


def provider_and_identity(identity: OwnerIdentity) -> dict[str, Any]:
    """The card's provider and the owner's identity chain: only what was proven (VX-ID-2, 3).

    The provider is the owner's proven organization domain, or else this installation; the chain
    says which, and names the OIDC issuer and subject only when a verified ID token proved them.
    Each part says how it was verified and since when, never when it was last checked, so a
    re-verification that finds the same proof changes no composition.
    """
    owner: dict[str, Any] = {"verification": Verification.UNVERIFIED.value}
    if identity.subject_verified:
        assert identity.identity_verified_at is not None
        owner = {
            "issuer": identity.identity_issuer,
            "subject": shown_subject(identity.identity_issuer, identity.identity_subject),
            "subjectType": settings.VIRGO_IDENTITY_SUBJECTS,
            "verification": Verification.OIDC.value,
            "verifiedAt": _instant(identity.identity_verified_at),
        }
    domain = identity.organization_domain
    if domain is not None and domain.may_be_named_by(identity.user):
        assert domain.verified_at is not None
        organization: dict[str, Any] = {
            "domain": domain.domain,
            "verification": domain.verification,
            "verifiedAt": _instant(domain.verified_at),
        }
        provider = {"organization": domain.domain, "url": f"https://{domain.domain}/"}
        named = "organization"
    else:
        organization = {"verification": Verification.UNVERIFIED.value}
        provider = {
            "organization": settings.VIRGO_PROVIDER_ORGANIZATION,
            "url": settings.VIRGO_PROVIDER_URL,
        }
        named = "installation"
    return {
        "provider": provider,
        "identity": {"provider": named, "owner": owner, "organization": organization},
    }


def shown_subject(issuer: str, subject: str) -> str:
    """The subject as cards show it: the issuer's own, or this installation's pairwise one."""
    if settings.VIRGO_IDENTITY_SUBJECTS == "public":
        return subject
    return salted_hmac(
        "virgo.identity.pairwise-subject", f"{issuer}\n{subject}", algorithm="sha256"
    ).hexdigest()


def _instant(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def composition_hash(composition: dict[str, Any]) -> str:
    """SHA-256 of the composition's RFC 8785 bytes (the C encoder where that is byte-identical)."""
    return sha256_hex(canonical_bytes(composition))


def _identity_of(user: Any) -> OwnerIdentity:
    try:
        return user.identity
    except OwnerIdentity.DoesNotExist:
        return OwnerIdentity(user=user, display_name=user.get_full_name() or user.get_username())
