"""What virgo-channel must remember: every request to the hub by correlation id, and its end.

Writes go through channel.deliveries, channel.routing and channel.services.
"""

from django.conf import settings
from django.db import models

from personas.models import Persona
from runtime.models import DecisionRecord


class Delivery(models.Model):
    """One write to the hub under one correlation id (the hub's Idempotency-Key).

    Written before the request leaves, so a crash mid-call leaves a row that says so; a terminal
    outcome (applied or not applied) is recorded once and returned on every repeat of the same
    correlation id without asking the hub again. An unknown outcome is not terminal: a repeat
    sends the same request under the same key, which the hub answers without applying twice.
    """

    class Kind(models.TextChoices):
        TOOL = "tool", "Human-surface tool call"
        CONFIRMATION = "confirmation", "Confirmation request to its authority"

    class Status(models.TextChoices):
        PENDING = "pending", "Sent, no answer recorded"
        APPLIED = "applied", "Applied by the hub"
        NOT_APPLIED = "not-applied", "Refused by the hub, definitively"
        UNKNOWN = "unknown", "Outcome unknown (retryable)"
        FAILED = "failed", "Not applied, retryable (hub unreachable or credential refused)"

    TERMINAL = frozenset({Status.APPLIED, Status.NOT_APPLIED})

    kind = models.CharField(max_length=16, choices=Kind.choices)
    correlation_id = models.CharField(max_length=200)
    persona = models.ForeignKey(Persona, on_delete=models.CASCADE, related_name="deliveries")
    tool_name = models.CharField(max_length=100)
    binding = models.CharField(max_length=200)
    route = models.CharField(max_length=300, help_text="The hub route the request went to.")
    request = models.JSONField(help_text="The request as sent, file content left out.")
    request_digest = models.CharField(max_length=64)
    decision = models.OneToOneField(
        DecisionRecord,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="delivery",
    )
    principal = models.JSONField(
        null=True, blank=True, help_text="Who may answer a confirmation, as the hub names them."
    )
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING)
    reason = models.CharField(max_length=100, blank=True)
    result = models.JSONField(null=True, blank=True, help_text="The terminal result, as returned.")
    message_id = models.CharField(max_length=200, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "deliveries"
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "correlation_id"], name="delivery_unique_correlation"
            ),
            models.CheckConstraint(
                condition=models.Q(kind="tool", decision__isnull=True)
                | models.Q(kind="confirmation", decision__isnull=False),
                name="delivery_confirmation_has_its_decision",
            ),
        ]
        indexes = [models.Index(fields=["kind", "status"], name="delivery_status_idx")]

    def __str__(self) -> str:
        return f"{self.tool_name} {self.correlation_id} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL


class AuthoritySurface(models.Model):
    """Where an owner takes confirmation requests on the hub, and who answers there.

    `binding` is where the card goes (e.g. `teams:user/henry`); `principal` is the identity the
    hub attests for whoever presses approve or deny (e.g. `aad:henry@contoso.example`). Only an
    answer from exactly that principal decides a request routed to this owner.
    """

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="authority_surface"
    )
    binding = models.CharField(max_length=200)
    principal = models.CharField(max_length=200)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.user} at {self.binding}"


class AcceptedCallback(models.Model):
    """A signed hub callback that was let in, kept while its signature could still be replayed.

    The signature's HMAC names the callback (it covers the signed time and the whole body); its
    unique constraint makes a second copy fail to insert, however many arrive at once, so each
    signed callback is accepted once. Rows signed longer ago than the tolerance window can never
    verify again and are pruned (channel.callbacks).
    """

    digest = models.CharField(max_length=64, unique=True, help_text="The signature's v1 HMAC.")
    signed_at = models.PositiveBigIntegerField(help_text="The signed time (t=), Unix seconds.")
    accepted_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["signed_at"], name="accepted_callback_signed_idx")]

    def __str__(self) -> str:
        return f"callback signed at {self.signed_at}"
