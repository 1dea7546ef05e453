"""The coordination tools' records: presence, wake markers and the inbox
(runtime.tools.coordination)."""

from django.conf import settings
from django.db import models

from personas.models import Persona
from runtime.models.fields import uuid_field


class Presence(models.Model):
    """What a persona tells its peers about itself: a standing summary and its current activity."""

    class State(models.TextChoices):
        ACTIVE = "active", "Active"
        BUSY = "busy", "Busy"
        IDLE = "idle", "Idle"
        AWAY = "away", "Away"

    persona = models.OneToOneField(Persona, on_delete=models.CASCADE, related_name="presence")
    summary = models.CharField(max_length=500, blank=True)
    activity = models.CharField(max_length=200, blank=True)
    state = models.CharField(max_length=8, choices=State.choices, default=State.IDLE)
    summary_at = models.DateTimeField(null=True, blank=True)
    activity_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.persona}: {self.state}"


class WakeMarker(models.Model):
    """Where a persona's last wake reconciliation ended; the next one starts there."""

    persona = models.OneToOneField(Persona, on_delete=models.CASCADE, related_name="wake_marker")
    marked_at = models.DateTimeField()
    wakes = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.persona} woke at {self.marked_at:%Y-%m-%d %H:%M:%S}"


class CoordinationMessage(models.Model):
    """One broker message delivered to one recipient's inbox.

    `envelope` is written by the broker at send time from the registry (the sender's persona,
    agent, address and active stamp); nothing the sender passes can change it. `label` is the
    sender's own attribution text, kept apart and never trusted.
    """

    uuid = uuid_field()
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    sender = models.ForeignKey(Persona, on_delete=models.CASCADE, related_name="sent_messages")
    recipient = models.ForeignKey(Persona, on_delete=models.CASCADE, related_name="inbox")
    subject = models.CharField(max_length=200, blank=True)
    body = models.TextField()
    label = models.CharField(max_length=200, blank=True)
    in_reply_to = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="replies"
    )
    envelope = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    acked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["recipient", "acked_at"], name="inbox_unacked_idx")]
        constraints = [
            models.CheckConstraint(
                condition=~models.Q(sender=models.F("recipient")),
                name="message_not_to_self",
            )
        ]

    def __str__(self) -> str:
        return f"{self.sender_id} -> {self.recipient_id}: {self.subject or self.body[:40]}"
