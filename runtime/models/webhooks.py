"""The webhook tools' records: registered webhooks and their deliveries (runtime.tools.webhooks)."""

from django.db import models

from personas.models import Persona
from runtime.models.enforcement import DecisionRecord
from runtime.models.fields import uuid_field


class Webhook(models.Model):
    """A deployment or publication webhook a persona registered (after confirmation)."""

    uuid = uuid_field()
    persona = models.ForeignKey(Persona, on_delete=models.CASCADE, related_name="webhooks")
    name = models.SlugField(max_length=64)
    url = models.URLField(max_length=1024)
    registered_under = models.ForeignKey(
        DecisionRecord, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["persona", "name"]
        constraints = [
            models.UniqueConstraint(fields=["persona", "name"], name="webhook_unique_name")
        ]

    def __str__(self) -> str:
        return f"{self.name} -> {self.url}"


class WebhookDelivery(models.Model):
    """One attempt to trigger a webhook and what came back."""

    class Outcome(models.TextChoices):
        DELIVERED = "delivered", "Delivered (2xx)"
        REJECTED = "rejected", "Rejected (non-2xx)"
        UNKNOWN = "unknown", "Unknown (timeout or connection lost)"

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    url = models.URLField(
        max_length=1024,
        blank=True,
        help_text="Where it was sent: the URL the trigger was approved for.",
    )
    correlation_id = models.CharField(max_length=200)
    payload = models.JSONField(default=dict)
    outcome = models.CharField(max_length=10, choices=Outcome.choices)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name_plural = "webhook deliveries"

    def __str__(self) -> str:
        return f"{self.webhook} {self.outcome} ({self.correlation_id})"
