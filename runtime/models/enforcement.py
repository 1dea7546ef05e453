"""What the handler remembers: confirmation requests and their answers, learned choices (the
prompt registry), and loud refusals.

Written through runtime.confirmations, runtime.registry and runtime.handler; the admin only
calls those.
"""

from django.conf import settings
from django.db import models

from personas.catalogue import Boundary
from personas.models import Persona, PersonaClass


class AuthorityKind(models.TextChoices):
    HUMAN = "human", "Bound human authority"
    LEAD = "lead", "Owning lead"


class DecisionRecord(models.Model):
    """A confirmation request and its answer: written before the operation may run.

    It is the durable pending request the routed authority answers (in the admin here; through
    virgo-channel once that adapter exists), and the once-only ticket under which the approved
    operation executes.
    """

    class Decision(models.TextChoices):
        PENDING = "pending", "Pending"
        APPROVED = "approved", "Approved"
        DENIED = "denied", "Denied"
        CANCELLED = "cancelled", "Cancelled: the requester was revoked"

    class Via(models.TextChoices):
        AUTHORITY = "authority", "The routed authority"
        PROMPT_REGISTRY = "prompt-registry", "A learned choice of the prompt registry"
        REVOCATION = "revocation", "The requester's revocation"

    correlation_id = models.CharField(max_length=200, unique=True)
    requester = models.ForeignKey(
        Persona, on_delete=models.CASCADE, related_name="decision_records"
    )
    tool_name = models.CharField(max_length=100)
    handler_action = models.CharField(max_length=100)
    operation = models.JSONField(help_text="The normalised operation the authority is asked about.")
    operation_digest = models.CharField(max_length=64)
    stamp_hash = models.CharField(max_length=64)
    boundary = models.CharField(
        max_length=64, blank=True, choices=[(b.value, b.value) for b in Boundary]
    )
    rule = models.CharField(max_length=64)
    reason = models.TextField()
    authority_kind = models.CharField(max_length=8, choices=AuthorityKind.choices)
    authority_user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="routed_decisions",
    )
    authority_persona = models.ForeignKey(
        Persona,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="routed_decisions",
    )
    decision = models.CharField(max_length=10, choices=Decision.choices, default=Decision.PENDING)
    decided_via = models.CharField(max_length=20, choices=Via.choices, blank=True)
    decided_by_user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_by_persona = models.ForeignKey(
        Persona, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    registry_entry = models.ForeignKey(
        "PromptRegistryEntry", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    executed_at = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["decision", "authority_user"], name="decision_routed_idx")]
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(authority_kind="human", authority_user__isnull=False)
                    | models.Q(authority_kind="lead", authority_persona__isnull=False)
                ),
                name="decision_routed_to_an_authority",
            ),
            models.CheckConstraint(
                condition=~models.Q(authority_persona=models.F("requester")),
                name="decision_never_routed_to_its_requester",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} by {self.requester_id} ({self.decision})"

    @property
    def authority_label(self) -> str:
        if self.authority_kind == AuthorityKind.HUMAN:
            return f"human:{self.authority_user}"
        return f"lead:{self.authority_persona}"


class PromptRegistryEntry(models.Model):
    """A learned answer to one exact blocked operation.

    Keyed by (stamp hash, handler action, normalised target scope, operation shape) and matched
    only exactly. An experience-layer entry belongs to one persona; a class-overlay entry is shared
    by the personas of one class and is keyed by the class-profile hash of the stamp in place of
    the stamp hash (see runtime.registry).

    Only an accepted entry applies. One a snapshot brought in waits for review unkeyed (no stamp
    hash, no digest): the review keys it from its shown fields onto the stamp current then.
    """

    class Location(models.TextChoices):
        EXPERIENCE = "experience", "Persona experience layer"
        CLASS_OVERLAY = "class-overlay", "Shared class overlay"

    class Choice(models.TextChoices):
        APPROVE = "approve", "Approve without asking"
        DENY = "deny", "Refuse without asking"

    class Review(models.TextChoices):
        PENDING = "pending", "Waits for review"
        ACCEPTED = "accepted", "Accepted: applies"
        REJECTED = "rejected", "Rejected: never applies"
        REVOKED = "revoked", "Its stamp was revoked: never applies"

    location = models.CharField(max_length=16, choices=Location.choices)
    persona = models.ForeignKey(
        Persona,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="prompt_registry_entries",
    )
    persona_class = models.CharField(max_length=32, blank=True, choices=PersonaClass.choices)
    stamp_hash = models.CharField(max_length=64, blank=True)
    handler_action = models.CharField(max_length=100)
    target_scope = models.JSONField()
    operation_shape = models.JSONField()
    key_digest = models.CharField(max_length=64, blank=True, editable=False)
    choice = models.CharField(max_length=8, choices=Choice.choices)
    # Fails closed: an entry is created accepted only by the code paths that are a review.
    review = models.CharField(max_length=8, choices=Review.choices, default=Review.PENDING)
    imported_with = models.ForeignKey(
        "SnapshotImport",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="registry_entries",
    )
    learned_from = models.ForeignKey(
        DecisionRecord, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    carried_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="carried_to"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "prompt registry entries"
        constraints = [
            models.UniqueConstraint(
                fields=["persona", "key_digest"],
                condition=models.Q(location="experience", review="accepted"),
                name="registry_unique_experience_key",
            ),
            models.UniqueConstraint(
                fields=["persona_class", "key_digest"],
                condition=models.Q(location="class-overlay", review="accepted"),
                name="registry_unique_overlay_key",
            ),
            models.CheckConstraint(
                condition=(
                    models.Q(review="accepted") & ~models.Q(key_digest="")
                    | ~models.Q(review="accepted") & models.Q(key_digest="")
                ),
                name="registry_only_accepted_entries_are_keyed",
            ),
            models.CheckConstraint(
                condition=(
                    models.Q(location="experience", persona__isnull=False, persona_class="")
                    | models.Q(location="class-overlay", persona__isnull=True)
                    & ~models.Q(persona_class="")
                ),
                name="registry_entry_has_one_owner",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.choice} {self.handler_action} {self.target_scope}"


class RefusalRecord(models.Model):
    """The audit trail of every refused call: what was asked, by whom, and which rule said no."""

    persona = models.ForeignKey(Persona, on_delete=models.CASCADE, related_name="refusals")
    tool_name = models.CharField(max_length=100)
    handler_action = models.CharField(max_length=100, blank=True)
    code = models.CharField(max_length=40)
    boundary = models.CharField(max_length=64, blank=True)
    rule = models.CharField(max_length=64, blank=True)
    reason = models.TextField()
    operation = models.JSONField(null=True, blank=True)
    stamp_hash = models.CharField(max_length=64, blank=True)
    correlation_id = models.CharField(max_length=200, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.code} {self.tool_name} by {self.persona_id}"
