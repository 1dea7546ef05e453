"""The work tools' records: tasks and their reports (runtime.tools.work)."""

from django.conf import settings
from django.db import models

from personas.models import Persona
from runtime.models.fields import uuid_field


class Task(models.Model):
    """A unit of work in one of an owner's queues; the switchboard's todos are these rows.

    `created_by` is the persona that raised the work (none when the owner did), `for_persona` the
    persona a delegated todo is addressed to (create_for), `assignee` the persona working it.
    """

    class State(models.TextChoices):
        OPEN = "open", "Open"
        ASSIGNED = "assigned", "Assigned"
        CLAIMED = "claimed", "Claimed"
        DONE = "done", "Done"

    uuid = uuid_field()
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    queue = models.CharField(max_length=100)
    title = models.CharField(max_length=200)
    body = models.TextField(blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.OPEN)
    created_by = models.ForeignKey(
        Persona, null=True, blank=True, on_delete=models.SET_NULL, related_name="created_tasks"
    )
    for_persona = models.ForeignKey(
        Persona, null=True, blank=True, on_delete=models.SET_NULL, related_name="todos_for"
    )
    assignee = models.ForeignKey(
        Persona, null=True, blank=True, on_delete=models.SET_NULL, related_name="assigned_tasks"
    )
    assigned_by = models.ForeignKey(
        Persona, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True, db_index=True)
    done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["owner", "queue", "state"], name="task_queue_idx")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state="open", assignee__isnull=True)
                | models.Q(state__in=["assigned", "claimed", "done"], assignee__isnull=False),
                name="task_assignee_matches_state",
            )
        ]

    def __str__(self) -> str:
        return f"[{self.queue}] {self.title} ({self.state})"


class TaskReport(models.Model):
    class Status(models.TextChoices):
        PROGRESS = "progress", "Progress"
        BLOCKED = "blocked", "Blocked"
        DONE = "done", "Done"

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="reports")
    by = models.ForeignKey(Persona, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=10, choices=Status.choices)
    notes = models.TextField(blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.status} on {self.task_id} by {self.by_id}"
