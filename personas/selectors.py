"""Who may see which agents, personas and audit rows: the one place ownership is written.

Every API view and every admin page reads through these. An owner sees only their own
objects; a moderator (superuser) sees everyone's, so that they can delist any persona. Seeing
is not changing: the services decide every write (owner only, moderators may only delist).
"""

import contextlib
import difflib
import uuid
from typing import Any

from django.core.exceptions import FieldDoesNotExist
from django.db.models import Model, Q, QuerySet

from personas.models import (
    Agent,
    AuditEvent,
    GrantProposal,
    HumanSurface,
    OrganizationDomain,
    OwnerIdentity,
    Persona,
)


def is_moderator(user: Any) -> bool:
    return bool(user.is_authenticated and user.is_active and user.is_superuser)


def agents_visible_to(user: Any) -> QuerySet[Agent]:
    if not (user.is_authenticated and user.is_active):
        return Agent.objects.none()
    if is_moderator(user):
        return Agent.objects.all()
    return Agent.objects.filter(owner=user)


def agents_owned_by(user: Any) -> QuerySet[Agent]:
    """The agents a user may create personas on: their own, moderators included."""
    if not (user.is_authenticated and user.is_active):
        return Agent.objects.none()
    return Agent.objects.filter(owner=user)


def personas_owned_by(user: Any) -> QuerySet[Persona]:
    """The personas on a user's own agents, moderators included (what `--owner` narrows to)."""
    return Persona.objects.filter(agent__in=agents_owned_by(user))


def personas_visible_to(user: Any) -> QuerySet[Persona]:
    if not (user.is_authenticated and user.is_active):
        return Persona.objects.none()
    if is_moderator(user):
        return Persona.objects.all()
    return Persona.objects.filter(agent__owner=user)


def surfaces_visible_to(user: Any) -> QuerySet[HumanSurface]:
    if not (user.is_authenticated and user.is_active):
        return HumanSurface.objects.none()
    if is_moderator(user):
        return HumanSurface.objects.all()
    return HumanSurface.objects.filter(owner=user)


def identities_visible_to(user: Any) -> QuerySet[OwnerIdentity]:
    if not (user.is_authenticated and user.is_active):
        return OwnerIdentity.objects.none()
    if is_moderator(user):
        return OwnerIdentity.objects.all()
    return OwnerIdentity.objects.filter(user=user)


def proposals_visible_to(user: Any) -> QuerySet[GrantProposal]:
    """A persona's proposals are its owner's alone: nobody else, moderators included, sees or
    decides them (a moderator never widens an owner's grant)."""
    if not (user.is_authenticated and user.is_active):
        return GrantProposal.objects.none()
    return GrantProposal.objects.filter(persona__agent__owner=user).select_related(
        "persona__agent", "proposed_by", "decided_by"
    )


# What became of an owner's organization domain: the owner is named in the event's data.
ORGANIZATION_EVENTS = (
    AuditEvent.Kind.ORGANIZATION_VERIFIED,
    AuditEvent.Kind.ORGANIZATION_APPROVED,
    AuditEvent.Kind.ORGANIZATION_LAPSED,
    AuditEvent.Kind.ORGANIZATION_SHARED,
)


def audit_events_visible_to(user: Any) -> QuerySet[AuditEvent]:
    """Moderators see every event; an owner sees the events about their own agents and personas,
    and what they did themselves."""
    if not (user.is_authenticated and user.is_active):
        return AuditEvent.objects.none()
    if is_moderator(user):
        return AuditEvent.objects.all()
    return AuditEvent.objects.filter(
        Q(agent__owner=user)
        | Q(persona__agent__owner=user)
        | Q(actor=user)
        | Q(kind__in=ORGANIZATION_EVENTS, data__owner=user.pk)
    )


def owns(
    user: Any, obj: Agent | Persona | OwnerIdentity | HumanSurface | OrganizationDomain
) -> bool:
    """Whether `user` is the owner of `obj`, the only one who may change it."""
    if not (user.is_authenticated and user.is_active):
        return False
    if isinstance(obj, OrganizationDomain):
        return obj.owner_id == user.pk
    if isinstance(obj, Agent):
        return obj.owner_id == user.pk
    if isinstance(obj, Persona):
        return obj.agent.owner_id == user.pk
    if isinstance(obj, HumanSurface):
        return obj.owner_id == user.pk
    return obj.user_id == user.pk


def _own_or_shared(user: Any) -> Q:
    shared = OrganizationDomain.shared_with.through.objects.filter(user=user)
    return Q(owner=user) | Q(pk__in=shared.values("organizationdomain_id"))


def organization_domains_visible_to(user: Any) -> QuerySet[OrganizationDomain]:
    """An owner sees their own domain claims and the domains shared with them (VX-ID-2); a
    moderator sees every claim, to approve it."""
    if not (user.is_authenticated and user.is_active):
        return OrganizationDomain.objects.none()
    if is_moderator(user):
        return OrganizationDomain.objects.all()
    return OrganizationDomain.objects.filter(_own_or_shared(user))


def organization_domains_nameable_by(user: Any) -> QuerySet[OrganizationDomain]:
    """The domains `user`'s cards may name now: verified, and theirs or shared with them."""
    if not (user.is_authenticated and user.is_active):
        return OrganizationDomain.objects.none()
    return OrganizationDomain.objects.filter(_own_or_shared(user), verified_at__isnull=False)


class UnknownReference(LookupError):
    """Nothing in scope answers to the reference (whether or not it exists out of scope)."""


class AmbiguousReference(LookupError):
    """More than one record in scope answers to the reference."""


# How many candidates an ambiguous reference names: enough to pick from, a line however many.
_CANDIDATES_NAMED = 10


def agent_by_reference(reference: str, *, among: QuerySet[Agent]) -> Agent:
    """The one agent of `among` whose id or name is `reference` (VX-OPS-8)."""
    return _by_reference(reference, among, Q(name=reference), readings="id or name")


def persona_by_reference(reference: str, *, among: QuerySet[Persona]) -> Persona:
    """The one persona of `among` whose id, uuid or name is `reference` (VX-OPS-8).

    `among` is the caller's scope, and is required: an owner's command passes
    personas_owned_by (or personas_visible_to) so that another owner's persona is unknown to
    it, by any of the three, with the same words as one that does not exist.
    """
    match = Q(name=reference)
    with contextlib.suppress(ValueError):  # not a uuid: then only an id or a name
        match |= Q(uuid=uuid.UUID(reference))
    return _by_reference(reference, among, match, readings="id, uuid or name")


# How many of the scope's names a mistyped one is compared with, at most.
_NAMES_COMPARED = 1000


def _did_you_mean[M: Model](reference: str, among: QuerySet[M]) -> str:
    """ "did you mean 'Reviewer'? " for a name of the caller's scope that differs only in case,
    or is close; empty when none is. Only names the caller may see are ever suggested."""
    try:
        among.model._meta.get_field("name")
    except FieldDoesNotExist:
        return ""
    names = list(among.order_by("pk").values_list("name", flat=True)[:_NAMES_COMPARED])
    folded = [name for name in names if name.casefold() == reference.casefold()]
    close = folded or difflib.get_close_matches(reference, names, n=1, cutoff=0.8)
    return f"did you mean {close[0]!r}? " if close else ""


def _by_reference[M: Model](reference: str, among: QuerySet[M], match: Q, *, readings: str) -> M:
    # Every reading of the reference at once: a name that is also another record's id is
    # ambiguous, never silently the id.
    if reference.isascii() and reference.isdigit():
        match |= Q(pk=int(reference))
    noun = among.model._meta.verbose_name
    found = list(among.filter(match).order_by("pk")[: _CANDIDATES_NAMED + 1])
    if not found:
        raise UnknownReference(
            f"no {noun} {reference!r} (by {readings}); {_did_you_mean(reference, among)}"
            f"`virgo {noun} list` shows them"
        )
    if len(found) > 1:
        ids = ", ".join(str(record.pk) for record in found[:_CANDIDATES_NAMED])
        more = ", ..." if len(found) > _CANDIDATES_NAMED else ""
        raise AmbiguousReference(
            f"{noun} {reference!r} is ambiguous: ids {ids}{more} answer to it; give one id"
        )
    return found[0]
