"""Owners, agents, skills, registered addresses, personas and their generations.

Writes go through personas.services; these models hold data and small read-only helpers.
"""

import secrets
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, NamedTuple, NoReturn

from django.conf import settings
from django.db import models
from django.db.models.fields.json import KT
from django.db.models.functions import Lower
from django.urls import reverse


class PersonaClass(models.TextChoices):
    SECRETARY = "secretary", "Secretary"
    TEAM_COORDINATOR = "team-coordinator", "Team coordinator"
    PROJECT_LEAD = "project-lead", "Project lead"
    CODER_DEPUTY = "coder-deputy", "Coder deputy"


class RevocationReason(models.TextChoices):
    """Why a persona or generation was revoked: the code its tombstone shows (VX-TRUST-5).

    The words an owner or moderator wrote beside it stay in the audit event.
    """

    UNSPECIFIED = "unspecified", "Unspecified"
    COMPROMISED = "compromised", "Compromised: its runtime or credentials are not trusted"
    SUPERSEDED = "superseded", "Superseded by another persona or generation"
    RETIRED = "retired", "Retired: no longer in service"
    POLICY_VIOLATION = "policy-violation", "Policy violation (moderator)"


class Verification(models.TextChoices):
    """How a part of an owner's identity chain was proven (VX-ID-1, VX-ID-2)."""

    OIDC = "oidc", "OpenID Connect sign-in"
    DNS_TXT = "dns-txt", "DNS TXT record"
    HTTPS_WELL_KNOWN = "https-well-known", "HTTPS well-known file"
    OPERATOR = "operator", "Approved by the installation"
    UNVERIFIED = "unverified", "Not verified"


def new_domain_token() -> str:
    return secrets.token_urlsafe(24)


class OwnerIdentity(models.Model):
    """The owning human's identity chain, which every card of theirs carries (SPEC-0009).

    Nothing in it that a card names is typed: the issuer and subject are written only by an
    OpenID Connect sign-in from the verified ID token (`identity_verified_at` says when), and the
    organization is a domain the owner proved (OrganizationDomain). What owners typed before
    proofs existed stays as `claimed_*`, shown to them and never put on a card.
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="identity"
    )
    display_name = models.CharField(max_length=200)
    identity_issuer = models.URLField(blank=True, help_text="OIDC issuer that attests this owner")
    identity_subject = models.CharField(max_length=255, blank=True)
    identity_verified_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When a verified ID token last proved the issuer and subject; empty: unproven.",
    )
    organization_domain = models.ForeignKey(
        "OrganizationDomain",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The proven domain this owner's cards name as their provider.",
    )
    claimed_organization = models.CharField(max_length=200, blank=True)
    claimed_organization_url = models.URLField(blank=True)

    class Meta:
        verbose_name_plural = "owner identities"
        constraints = [
            models.UniqueConstraint(
                fields=["identity_issuer", "identity_subject"],
                condition=models.Q(identity_verified_at__isnull=False),
                name="one_owner_per_verified_subject",
            ),
            models.CheckConstraint(
                condition=models.Q(identity_verified_at__isnull=True)
                | (~models.Q(identity_issuer="") & ~models.Q(identity_subject="")),
                name="verified_subject_names_issuer_and_subject",
            ),
        ]

    def __str__(self) -> str:
        return self.display_name

    @property
    def subject_verified(self) -> bool:
        return self.identity_verified_at is not None


class OrganizationDomain(models.Model):
    """A domain an owner claims for their organization, and whether and how it was proven.

    The owner publishes `token` in a DNS TXT record or an HTTPS well-known file on the domain,
    or a superuser approves the claim; until then (and again once a proof lapses) no card names
    it. A verified domain belongs to one owner: another may use it only when shared with them.
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="organization_domains"
    )
    domain = models.CharField(
        max_length=253, help_text="Lower-case, IDNA A-labels, no dot at the end."
    )
    token = models.CharField(max_length=64, default=new_domain_token, editable=False)
    verification = models.CharField(
        max_length=24, choices=Verification.choices, default=Verification.UNVERIFIED
    )
    verified_at = models.DateTimeField(
        null=True, blank=True, help_text="Since when the current proof has held."
    )
    checked_at = models.DateTimeField(null=True, blank=True)
    last_failure = models.CharField(max_length=500, blank=True)
    shared_with = models.ManyToManyField(
        settings.AUTH_USER_MODEL, blank=True, related_name="shared_organization_domains"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["domain", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "domain"], name="one_claim_per_owner_domain"),
            models.UniqueConstraint(
                fields=["domain"],
                condition=models.Q(verified_at__isnull=False),
                name="verified_domain_has_one_owner",
            ),
            models.CheckConstraint(
                condition=(
                    models.Q(verified_at__isnull=True, verification="unverified")
                    | (models.Q(verified_at__isnull=False) & ~models.Q(verification="unverified"))
                ),
                name="verified_domain_says_how",
            ),
            models.CheckConstraint(
                condition=~models.Q(verification="oidc"), name="domain_not_proven_by_oidc"
            ),
        ]

    def __str__(self) -> str:
        return self.domain

    @property
    def is_verified(self) -> bool:
        return self.verified_at is not None

    def may_be_named_by(self, user: Any) -> bool:
        """Whether `user`'s cards may name this domain: verified, and theirs or shared with them."""
        if not self.is_verified:
            return False
        return self.owner_id == user.pk or self.shared_with.filter(pk=user.pk).exists()


class Agent(models.Model):
    """A registered agent runtime of one owner and its vended grant."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agents"
    )
    name = models.CharField(max_length=120)
    self_description = models.TextField(
        blank=True,
        help_text="What the agent says about itself. Never published on a card.",
    )
    granted_verbs = models.JSONField(default=list, blank=True, help_text="The vended verb grant")
    granted_queues = models.JSONField(default=list, blank=True, help_text="The vended queue grant")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="agent_unique_name_per_owner")
        ]
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Skill(models.Model):
    """One row of the authoritative verb->skill map: a skill requires all of its verbs."""

    slug = models.SlugField(max_length=80, unique=True)
    name = models.CharField(max_length=120)
    description = models.TextField()
    tags = models.JSONField(default=list)
    required_verbs = models.JSONField(default=list)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    def card_entry(self) -> dict[str, Any]:
        return {
            "id": self.slug,
            "name": self.name,
            "description": self.description,
            "tags": list(self.tags),
        }


class SkillMapRevision(models.Model):
    """A counter bumped in the transaction of every change to the verb->skill map.

    Each persona records the revision its skills were derived from; one that is behind is owed a
    recompute. So a fan-out that was never queued (broker down) or stopped halfway resumes from
    the database alone: the reconciler and the next fan-out pick up exactly the personas behind.
    """

    revision = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"skill map revision {self.revision}"


class RegisteredAddress(models.Model):
    """A canonical registered address in the root/workspace/project/role hierarchy.

    Two segments for reserved-root and scope-wide roles (`root/secretary`, `work/coordinator`),
    three for project duties (`work/core/lead`). See personas.addresses for the grammar.
    """

    path = models.CharField(max_length=200, unique=True)
    registered_at = models.DateTimeField(auto_now_add=True)
    registered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["path"]
        verbose_name_plural = "registered addresses"

    def __str__(self) -> str:
        return self.path

    @property
    def segments(self) -> list[str]:
        return self.path.split("/")

    @property
    def workspace(self) -> str:
        return self.segments[0]

    @property
    def project(self) -> str | None:
        segments = self.segments
        return segments[1] if len(segments) == 3 else None

    @property
    def role(self) -> str:
        return self.segments[-1]


class HumanSurface(models.Model):
    """A place on the hub (a chat, a channel, a person's direct messages) registered to one owner.

    Only its owner's personas may be bound to it, and it is the only kind of place an owner's
    confirmations may be sent to. One binding belongs to one owner: a second owner cannot claim
    it, nor a spelling of it that differs only in case. Writes go through personas.surfaces.
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="human_surfaces"
    )
    binding = models.CharField(max_length=200, help_text="The hub's id of the place, as bound.")
    label = models.CharField(max_length=200, blank=True)
    registered_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(Lower("binding"), name="human_surface_one_owner_per_binding")
        ]
        ordering = ["binding"]

    def __str__(self) -> str:
        return self.binding


def new_grant_salt() -> str:
    return secrets.token_hex(32)


class PersonaQuerySet(models.QuerySet["Persona"]):
    def advertised(self) -> "PersonaQuerySet":
        """Discoverable personas whose current generation has not failed to stand."""
        return self.filter(discoverable=True).exclude(standing=False)

    def owned_by(self, user: Any) -> "PersonaQuerySet":
        return self.filter(agent__owner=user)

    def with_tombstone(self) -> "PersonaQuerySet":
        """Personas whose card answers a tombstone (Persona.tombstone): revoked, or their
        current generation revoked; in one query, however many."""
        return self.filter(models.Q(revoked_at__isnull=False) | _current_generation_revoked())

    def with_generation_revoked(self) -> "PersonaQuerySet":
        """Each persona with `generation_revoked`: whether its current generation is revoked,
        read in the same query (a list of personas asks it of every row)."""
        return self.annotate(generation_revoked=_current_generation_revoked())


def _current_generation_revoked() -> models.Exists:
    return models.Exists(
        Generation.objects.filter(
            persona=models.OuterRef("pk"),
            number=models.OuterRef("generation"),
            revoked_at__isnull=False,
        )
    )


def mcp_url(persona_uuid: uuid.UUID) -> str:
    """A persona's remote MCP endpoint, under the installation's public base URL."""
    return f"{settings.VIRGO_PUBLIC_BASE_URL}/mcp/{persona_uuid}"


class Persona(models.Model):
    """A scoped face of one agent (SPEC-0009 "Persona Record")."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="personas")
    name = models.CharField(max_length=120)
    description = models.TextField(blank=True)
    system_prompt = models.TextField(help_text="Authored by the owner; never generated.")
    verb_subset = models.JSONField(default=list)
    queues = models.JSONField(default=list)
    skills = models.JSONField(
        default=list, editable=False, help_text="Derived from the verb subset; never set by hand."
    )
    skill_map_revision = models.PositiveIntegerField(default=0, editable=False, db_index=True)
    persona_class = models.CharField(max_length=32, choices=PersonaClass.choices)
    address = models.ForeignKey(RegisteredAddress, on_delete=models.PROTECT, related_name="+")
    graph_namespace = models.CharField(max_length=200, blank=True)
    human_surface_bindings = models.JSONField(
        default=list,
        blank=True,
        help_text="Human surfaces of the owner (or mailboxes of the owner's personas) on the hub.",
    )
    ask_first_verbs = models.JSONField(
        default=list,
        blank=True,
        help_text="Verbs of the subset that wait for confirmation though no boundary asks.",
    )
    owning_lead = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="deputies"
    )
    discoverable = models.BooleanField(default=False)
    # The key of the card's grant digest (stamps.grant.digest): owner-private, so a
    # peer cannot find the tool list by hashing the few grants a class makes likely.
    grant_salt = models.CharField(max_length=64, default=new_grant_salt, editable=False)
    generation = models.PositiveIntegerField(default=1, editable=False)
    standing = models.BooleanField(
        null=True,
        editable=False,
        help_text="Whether the current generation stands: unknown until its stamp is built.",
    )
    # The whole persona revoked (VX-TRUST-5): final; every generation is revoked with it.
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    revocation_reason = models.CharField(
        max_length=32, choices=RevocationReason.choices, blank=True, editable=False
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = PersonaQuerySet.as_manager()

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(revoked_at__isnull=True) | models.Q(standing=False),
                name="persona_revoked_never_stands",
            )
        ]
        indexes = [
            models.Index(
                fields=["id"],
                name="persona_discoverable_idx",
                condition=models.Q(discoverable=True),
            ),
            # Start-up counts the stamps owed (stamps.checks) in time that does not grow with
            # the personas that stand.
            models.Index(
                fields=["id"],
                name="persona_not_standing_idx",
                condition=models.Q(standing__isnull=True) | models.Q(standing=False),
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def base_path(self) -> str:
        return f"/a/{self.uuid}/"

    @property
    def card_path(self) -> str:
        return f"/a/{self.uuid}/.well-known/agent-card.json"

    @property
    def card_url(self) -> str:
        return settings.VIRGO_PUBLIC_BASE_URL + self.card_path

    @property
    def mcp_url(self) -> str:
        """Its tools over the network (serving/): also the resource its tokens are bound to."""
        return mcp_url(self.uuid)

    @property
    def discovery_url(self) -> str:
        return settings.VIRGO_PUBLIC_BASE_URL + self.base_path

    @property
    def effective_graph_namespace(self) -> str:
        return self.graph_namespace or self.address.path

    @property
    def is_advertised(self) -> bool:
        return self.discoverable and self.standing is not False

    @property
    def is_revoked(self) -> bool:
        """The whole persona is revoked (a revoked generation alone is its generation's)."""
        return self.revoked_at is not None

    def tombstone(self) -> "Tombstone | None":
        """What its card's tombstone says (VX-TRUST-5): the persona's revocation, or its current
        generation's; None while neither is revoked."""
        if self.revoked_at is not None:
            return Tombstone(self.revoked_at, self.revocation_reason, None)
        current = (
            Generation.objects.filter(
                persona_id=self.pk, number=self.generation, revoked_at__isnull=False
            )
            .values_list("revoked_at", "revocation_reason")
            .first()
        )
        if current is None:
            return None
        return Tombstone(current[0], current[1], self.generation)


class Tombstone(NamedTuple):
    """A revocation as a tombstone tells it: when, why (the code), and which generation, or
    None when the whole persona was revoked."""

    revoked_at: datetime
    reason: str
    generation: int | None


class PurgedPersona(models.Model):
    """A revoked persona a superuser purged: its tombstone stays (VX-TRUST-5).

    Whoever holds the card of a revoked persona must go on learning that it was revoked, whatever
    becomes of the records, so a purge keeps exactly what the tombstone says, and nothing else:
    no name, no prompt, no tool. Nothing but a purge writes it (personas.services.persona_purge),
    and the purge is in the audit trail.
    """

    uuid = models.UUIDField(unique=True, editable=False)
    revoked_at = models.DateTimeField(editable=False)
    revocation_reason = models.CharField(
        max_length=32, choices=RevocationReason.choices, editable=False
    )
    generation = models.PositiveIntegerField(
        null=True,
        blank=True,
        editable=False,
        help_text="The revoked generation, when only it was; empty when the persona was.",
    )
    listed = models.BooleanField(
        editable=False,
        help_text="Whether its card was public: only then does the tombstone answer everyone.",
    )
    purged_at = models.DateTimeField(auto_now_add=True)
    purged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-purged_at", "-id"]

    def __str__(self) -> str:
        return f"purged persona {self.uuid}"

    @property
    def tombstone(self) -> Tombstone:
        return Tombstone(self.revoked_at, self.revocation_reason, self.generation)


class GenerationFrozen(Exception):
    """A generation's identity and composition never change; its stamp and composition hashes
    are set once."""


# What a generation is: fixed when it is made.
IMMUTABLE_FIELDS = ("persona", "number", "composition", "base_composition_hash")
# The outcome of its stamp build: empty until the stamp is stored, then fixed. The runtime checks
# the stamp file against the immutable stamp row; these must never be re-pointed beside it.
SET_ONCE_FIELDS = ("stamp_hash", "composition_hash", "grant_digest", "grant_definition")


# The proven organization domain a generation's card names as provider, in lower case (absent
# when the card names the installation): the directory's `provider` filter (personas.search)
# and the index that answers it are this one expression, so it matches proven domains only.
PROVIDER_ORGANIZATION = Lower(KT("composition__identity__organization__domain"))


class GenerationQuerySet(models.QuerySet["Generation"]):
    def update(self, **kwargs: Any) -> int:
        """QuerySet.update, refusing to change what is frozen (migration stamps 0003 refuses it
        in the database too)."""
        frozen = [name for name in IMMUTABLE_FIELDS if name in kwargs or f"{name}_id" in kwargs]
        if frozen:
            raise GenerationFrozen(f"generations are immutable: update of {frozen[0]} refused")
        for name in SET_ONCE_FIELDS:
            if name not in kwargs:
                continue
            already_set = self.exclude(**{name: ""})
            value = kwargs[name]
            if isinstance(value, str):
                already_set = already_set.exclude(**{name: value})
            # An expression (bulk_update's CASE) is not compared: rows already set refuse it.
            if already_set.exists():
                raise GenerationFrozen(
                    f"a generation's {name} is set once: update of a set {name} refused"
                )
        return super().update(**kwargs)

    def bulk_update(
        self, objs: Iterable["Generation"], fields: Sequence[str], batch_size: int | None = None
    ) -> int:
        # Checked before Django's own atomic block, which a refusal inside would leave broken.
        objs = list(objs)
        Generation.check_writes(objs, fields)
        return super().bulk_update(objs, fields, batch_size=batch_size)

    def bulk_create(self, objs: Iterable["Generation"], *args: Any, **kwargs: Any) -> list[Any]:
        """QuerySet.bulk_create, giving each new generation its status list index in one more
        insert (StatusListEntry), as save() does for one."""
        created = super().bulk_create(objs, *args, **kwargs)
        StatusListEntry.objects.bulk_create(
            [StatusListEntry(generation=generation) for generation in created]
        )
        return created


class Generation(models.Model):
    """One immutable composition of a persona; its stamp hangs on it (stamps app).

    The ORM refuses changes to IMMUTABLE_FIELDS, and to SET_ONCE_FIELDS once they hold a value,
    through save(), QuerySet.update()/bulk_update() and virgo.bulk.update_each (check_writes);
    database triggers refuse the same (migration stamps 0003).
    """

    persona = models.ForeignKey(Persona, on_delete=models.CASCADE, related_name="generations")
    number = models.PositiveIntegerField()
    composition = models.JSONField(help_text="What the persona was at this generation.")
    base_composition_hash = models.CharField(max_length=64)
    standing = models.BooleanField(null=True, help_text="Unknown until the stamp is built.")
    not_standing_reasons = models.JSONField(default=list, blank=True)
    stamp_hash = models.CharField(max_length=64, blank=True)
    composition_hash = models.CharField(max_length=64, blank=True)
    # What the card pins (VX-TRUST-4): set with the stamp hash, from the stamp's tools.
    grant_digest = models.CharField(max_length=64, blank=True)
    # What the digest covers (stamps.grant.GRANT_DEFINITION); blank for a digest of the first
    # definition, the tools and their access only, which generations stamped before it keep.
    grant_definition = models.CharField(max_length=40, blank=True)
    # A revoked generation never stands again (VX-TRUST-5): the database refuses it.
    revoked_at = models.DateTimeField(null=True, blank=True)
    revocation_reason = models.CharField(
        max_length=32, choices=RevocationReason.choices, blank=True
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = GenerationQuerySet.as_manager()

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(revoked_at__isnull=True) | models.Q(standing=False),
                name="generation_revoked_never_stands",
            ),
            models.UniqueConstraint(
                fields=["persona", "number"], name="generation_unique_number_per_persona"
            ),
        ]
        indexes = [models.Index(PROVIDER_ORGANIZATION, name="generation_proven_provider_idx")]
        ordering = ["persona", "-number"]

    def __str__(self) -> str:
        return f"generation {self.number}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        adding = self._state.adding
        if not adding:
            fields = kwargs.get("update_fields")
            names = [field.name for field in self._meta.concrete_fields]
            Generation.check_writes([self], names if fields is None else list(fields))
        super().save(*args, **kwargs)
        if adding:
            # In the same transaction: a generation is never without its place in the list.
            StatusListEntry.objects.create(generation=self)

    @classmethod
    def check_writes(cls, generations: Sequence["Generation"], fields: Sequence[str]) -> None:
        """Raise GenerationFrozen if writing `fields` of these stored generations would change
        what is frozen. virgo.bulk.update_each calls it before its UPDATE."""
        names = {cls._meta.get_field(name).name for name in fields}
        guarded = [name for name in (*IMMUTABLE_FIELDS, *SET_ONCE_FIELDS) if name in names]
        if not guarded:
            return
        attnames = [cls._meta.get_field(name).attname for name in guarded]
        stored = {
            row[0]: row[1:]
            for row in cls._base_manager.filter(
                pk__in=[generation.pk for generation in generations]
            ).values_list("pk", *attnames)
        }
        for generation in generations:
            if generation.pk not in stored:
                continue
            for name, attname, before in zip(guarded, attnames, stored[generation.pk], strict=True):
                after = getattr(generation, attname)
                if after == before or (name in SET_ONCE_FIELDS and before == ""):
                    continue
                rule = "is set once" if name in SET_ONCE_FIELDS else "never changes"
                raise GenerationFrozen(
                    f"generation {generation.number} of persona {generation.persona_id}: "
                    f"{name} {rule}: write refused"
                )

    @property
    def stamp_owed(self) -> bool:
        return self.standing is None

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None


class StatusListEntryQuerySet(models.QuerySet["StatusListEntry"]):
    def update(self, **kwargs: Any) -> int:
        """QuerySet.update, refusing to point an index at another generation."""
        if "generation" in kwargs or "generation_id" in kwargs:
            raise GenerationFrozen("a status list index is never given to another generation")
        return super().update(**kwargs)


class StatusListEntry(models.Model):
    """A generation's place in the revocation status list (VX-TRUST-7, W3C Bitstring Status
    List): its card names `index`, and the list's bit at `index` is set from the moment the
    generation, or its whole persona, is revoked (personas.services.persona_revoke).

    Made with the generation (Generation.save, GenerationQuerySet.bulk_create). The index is an
    auto-increment key, which the database never hands out twice (an identity column; SQLite's
    AUTOINCREMENT), and an entry is never given to another generation (save and update refuse,
    the one-to-one column is unique). The entry outlives its generation's row (SET_NULL): a
    purged persona's cards still read revoked.
    """

    index = models.BigAutoField(primary_key=True)
    generation = models.OneToOneField(
        Generation,
        null=True,
        on_delete=models.SET_NULL,
        related_name="status_entry",
        editable=False,
    )
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    objects = StatusListEntryQuerySet.as_manager()

    class Meta:
        # The list is rendered from exactly these rows, in one index scan however many exist.
        indexes = [
            models.Index(
                fields=["index"],
                condition=models.Q(revoked_at__isnull=False),
                name="status_entry_revoked_idx",
            )
        ]

    def __str__(self) -> str:
        return f"status list index {self.index}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise GenerationFrozen("a status list entry is written once; a revocation updates it")
        super().save(*args, **kwargs)


class StatusListVersion(models.Model):
    """One row, whose `version` moves in every transaction that changes what the revocation
    status list says or which keys sign it (a revocation, a change of the signing set). Every
    web process reads it per request and renders the list again only when it moved, so no
    process's memory is the truth, and a revocation is seen by all at their next request."""

    version = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"status list version {self.version}"


class AuditEventRefused(Exception):
    """The audit trail is append-only: a stored event is never changed or deleted."""


class AuditEventQuerySet(models.QuerySet["AuditEvent"]):
    def update(self, **kwargs: Any) -> NoReturn:
        raise AuditEventRefused("audit events are append-only: update refused")

    def delete(self) -> NoReturn:
        raise AuditEventRefused("audit events are append-only: delete refused")

    def bulk_update(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise AuditEventRefused("audit events are append-only: bulk update refused")

    def update_or_create(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise AuditEventRefused("audit events are append-only: update_or_create refused")


class AuditEvent(models.Model):
    """One change or decision that matters, once (VX-AUDIT-1): who (by name, kept as it was when
    they acted), what (`kind` and `data`, told in words by personas.audit.describe), when,
    through what (`channel`) and under which correlation id. Written only by
    personas.audit.record; append-only (save of a stored event, update and delete refused).

    A deletion elsewhere still clears the links to what it deleted (the persona, the agent, the
    account: SET_NULL, through Django's base manager), which is why the actor's name, and the
    persona's in `data` where it may go, are kept beside them."""

    class Kind(models.TextChoices):
        PERSONA_CREATED = "persona-created", "Persona created"
        PERSONA_EDITED = "persona-edited", "Persona changed"
        GENERATION = "generation", "New generation (not an owner's edit)"
        PERSONA_DELETED = "persona-deleted", "Persona deleted"
        PROPOSAL_MADE = "proposal-made", "Grant change proposed"
        PROPOSAL_APPROVED = "proposal-approved", "Grant change approved"
        PROPOSAL_REJECTED = "proposal-rejected", "Grant change rejected"
        PROPOSAL_STALE = "proposal-stale", "Grant change gone stale"
        CARD_IMPORTED = "card-imported", "Persona imported from an agent card"
        SNAPSHOT_IMPORTED = "snapshot-imported", "Persona imported from a snapshot"
        DISCOVERABILITY = "discoverability", "Discoverability toggled"
        GRANT_NARROWED = "grant-narrowed", "Agent grant narrowed a persona"
        SKILL_MAP_CHANGED = "skill-map-changed", "Verb->skill map changed"
        STAMP_REPAIRED = "stamp-repaired", "Stamp file repaired"
        STAMP_QUARANTINED = "stamp-quarantined", "Stamp quarantined"
        STAMP_RESTORED = "stamp-restored", "Stamp file restored"
        REVOKED = "revoked", "Persona or generation revoked"
        IDENTITY_LINKED = "identity-linked", "OpenID Connect identity linked"
        ORGANIZATION_VERIFIED = "organization-verified", "Organization domain verified"
        ORGANIZATION_APPROVED = "organization-approved", "Organization domain approved"
        ORGANIZATION_LAPSED = "organization-lapsed", "Organization domain proof lapsed"
        ORGANIZATION_SHARED = "organization-shared", "Organization domain shared"
        PURGED = "purged", "Revoked persona purged (its tombstone kept)"
        KEY_CREATED = "key-created", "Signing key created"
        KEY_ROTATED = "key-rotated", "Signing key rotated"
        KEY_RETIRED = "key-retired", "Signing key retired"
        KEY_REVOKED = "key-revoked", "Signing key revoked"
        BASE_URL_MOVED = "base-url-moved", "Public base URL moved"
        CONFIRMATION_REQUESTED = "confirmation-requested", "Call held for confirmation"
        CONFIRMATION_ANSWERED = "confirmation-answered", "Confirmation answered"
        LEARNED_CHOICE_USED = "learned-choice-used", "Learned choice applied"
        CALL_REFUSED = "call-refused", "Call refused"
        UNCONFINED_LAUNCH = "unconfined-launch", "Agent launched unconfined or unsandboxed"

    class Channel(models.TextChoices):
        ADMIN = "admin", "Admin"
        API = "api", "API"
        CLI = "cli", "Command line"
        IMPORT = "import", "Import"
        TASK = "task", "Task (worker)"
        RUNTIME = "runtime", "Runtime (a tool call)"
        INTERNAL = "internal", "Internal (no entry point)"

    kind = models.CharField(max_length=32, choices=Kind.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Who acted, by name, as they were called when they did: survives their account's deletion.
    actor_name = models.CharField(max_length=150, blank=True)
    persona = models.ForeignKey(
        Persona, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_events"
    )
    agent = models.ForeignKey(
        Agent, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_events"
    )
    data = models.JSONField(default=dict)
    channel = models.CharField(max_length=16, choices=Channel.choices, default=Channel.INTERNAL)
    correlation_id = models.CharField(max_length=200, blank=True, db_index=True)
    at = models.DateTimeField("when", auto_now_add=True, db_index=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        # An inline's row heading: the row itself shows who and the exact time.
        return f"{self.get_kind_display()}, {self.at:%d %b %Y %H:%M}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            raise AuditEventRefused("audit events are append-only: save of a stored event refused")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise AuditEventRefused("audit events are append-only: delete refused")


class GrantProposal(models.Model):
    """A change that would widen what a persona may do, waiting for its owner's decision.

    Nothing of it runs or is advertised until the owner approves: then the change is made by
    the persona's one write function (personas.services.persona_update), exactly as an owner's
    immediate change would be. It records the generation it was made against (a later change
    makes it stale, and a stale proposal cannot be approved), who proposed it through what, who
    decided and when, and its grant diff as the stamps app computed it (settings.VIRGO_GRANT_DIFF).
    """

    class Status(models.TextChoices):
        PENDING = "pending", "Waiting for the owner"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"
        STALE = "stale", "Stale: the persona changed after it was proposed"

    class Via(models.TextChoices):
        ADMIN = "admin", "Admin"
        API = "api", "API"
        CLI = "cli", "Command line"
        IMPORT = "import", "Import"
        SKILL_MAP = "skill-map", "Skill-map change"

    persona = models.ForeignKey(Persona, on_delete=models.CASCADE, related_name="proposals")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    via = models.CharField(max_length=16, choices=Via.choices)
    changes = models.JSONField(help_text="The proposed values of the persona's authored fields.")
    base_generation = models.PositiveIntegerField(
        help_text="The persona's generation when proposed: approval needs it still current."
    )
    next_composition_hash = models.CharField(max_length=64)
    diff = models.JSONField(help_text="The grant diff: tools, access, skills, queues, bindings.")
    proposed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    proposed_at = models.DateTimeField(auto_now_add=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    applied_generation = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-proposed_at", "-id"]
        indexes = [models.Index(fields=["persona", "status"], name="proposal_persona_status_idx")]

    def __str__(self) -> str:
        return f"proposal {self.pk} for {self.persona}"

    @property
    def effective_status(self) -> str:
        """Its status, or `stale` for a pending one whose persona has moved on since."""
        if self.status == self.Status.PENDING and self.persona.generation != self.base_generation:
            return self.Status.STALE
        return self.status

    @property
    def decidable(self) -> bool:
        return self.effective_status == self.Status.PENDING

    @property
    def review_url(self) -> str:
        """The admin page where the owner reviews the diff and decides."""
        return settings.VIRGO_PUBLIC_BASE_URL + reverse(
            "admin:personas_grantproposal_change", args=[self.pk]
        )
