"""The decision tools' records: decisions, the human instructions relayed into them, lanes and
their approvals (runtime.tools.decisions)."""

from django.conf import settings
from django.db import models

from personas.models import Persona
from runtime.models.fields import uuid_field
from runtime.models.work import Task


class Decision(models.Model):
    """A decision a persona raised in its scope (workspace, project), and how it was resolved.

    A resolution names its basis: the resolver's own authority (a project lead), the relay of a
    recorded human instruction (a secretary) or a lane approval (a team coordinator).
    """

    class State(models.TextChoices):
        OPEN = "open", "Open"
        RESOLVED = "resolved", "Resolved"

    class Basis(models.TextChoices):
        OWN_AUTHORITY = "own-authority", "The resolver's own authority"
        HUMAN_RELAY = "human-relay", "Relay of the bound human authority's decision"
        LANE_APPROVAL = "lane-approval", "Authorized by the bound lane approver"

    uuid = uuid_field()
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    raised_by = models.ForeignKey(
        Persona, on_delete=models.CASCADE, related_name="raised_decisions"
    )
    workspace = models.CharField(max_length=64)
    project = models.CharField(max_length=64, blank=True, help_text="Empty: no project.")
    title = models.CharField(max_length=200)
    question = models.TextField(blank=True)
    options = models.JSONField(default=list, blank=True)
    task = models.ForeignKey(
        Task, null=True, blank=True, on_delete=models.SET_NULL, related_name="decisions"
    )
    state = models.CharField(max_length=10, choices=State.choices, default=State.OPEN)
    resolution = models.TextField(blank=True)
    resolved_by = models.ForeignKey(
        Persona, null=True, blank=True, on_delete=models.PROTECT, related_name="resolved_decisions"
    )
    basis = models.CharField(max_length=16, choices=Basis.choices, blank=True)
    relayed_instruction = models.OneToOneField(
        "HumanInstruction", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    lane_approval = models.OneToOneField(
        "LaneApproval", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True, db_index=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state="open", resolved_by__isnull=True, basis="")
                | models.Q(state="resolved", resolved_by__isnull=False, basis="own-authority")
                | models.Q(
                    state="resolved",
                    resolved_by__isnull=False,
                    basis="human-relay",
                    relayed_instruction__isnull=False,
                )
                | models.Q(
                    state="resolved",
                    resolved_by__isnull=False,
                    basis="lane-approval",
                    lane_approval__isnull=False,
                ),
                name="decision_resolution_has_its_basis",
            )
        ]

    def __str__(self) -> str:
        return f"{self.title} ({self.state})"


class HumanInstruction(models.Model):
    """The bound human authority's explicit decision, recorded for a secretary to relay."""

    uuid = uuid_field()
    decision = models.ForeignKey(Decision, on_delete=models.CASCADE, related_name="instructions")
    given_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    resolution = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.given_by} on {self.decision}: {self.resolution[:40]}"


class LaneBinding(models.Model):
    """A team coordinator's lane (a workspace, or one project of it) and its bound approver."""

    coordinator = models.ForeignKey(Persona, on_delete=models.CASCADE, related_name="lanes")
    workspace = models.CharField(max_length=64)
    project = models.CharField(max_length=64, blank=True, help_text="Empty: the whole workspace.")
    approver = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="approver_of_lanes"
    )
    active = models.BooleanField(default=True)
    bound_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["coordinator", "workspace", "project"]
        constraints = [
            models.UniqueConstraint(
                fields=["coordinator", "workspace", "project"],
                condition=models.Q(active=True),
                name="lane_one_active_binding",
            )
        ]

    def __str__(self) -> str:
        lane = f"{self.workspace}/{self.project}" if self.project else f"{self.workspace}/*"
        return f"{self.coordinator} lane {lane} approved by {self.approver}"

    def covers(self, *, workspace: str, project: str) -> bool:
        return self.workspace == workspace and (not self.project or self.project == project)


class LaneApproval(models.Model):
    """The lane approver's authorization of one decision's resolution."""

    uuid = uuid_field()
    lane = models.ForeignKey(LaneBinding, on_delete=models.PROTECT, related_name="approvals")
    decision = models.ForeignKey(Decision, on_delete=models.CASCADE, related_name="approvals")
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    resolution = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.approved_by} approves {self.decision}: {self.resolution[:40]}"
