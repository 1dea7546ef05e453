"""The run tools' records: runs, their events and artifacts, and conversation archives
(runtime.tools.runs)."""

from django.conf import settings
from django.db import models

from personas.models import Persona
from runtime.models.fields import uuid_field
from runtime.models.work import Task


class Run(models.Model):
    """A run of work (a build, a test, a deployment) in a project, with its events and artifacts."""

    class Kind(models.TextChoices):
        BUILD = "build", "Build"
        TEST = "test", "Test"
        REVIEW = "review", "Review"
        ANALYSIS = "analysis", "Analysis"
        DEPLOY = "deploy", "Deployment"
        PUBLISH = "publish", "Publication"

    class State(models.TextChoices):
        CREATED = "created", "Created"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    uuid = uuid_field()
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    workspace = models.CharField(max_length=64)
    project = models.CharField(max_length=64, blank=True, help_text="Empty: no project.")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    title = models.CharField(max_length=200)
    state = models.CharField(max_length=10, choices=State.choices, default=State.CREATED)
    task = models.ForeignKey(
        Task, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    created_by = models.ForeignKey(Persona, on_delete=models.CASCADE, related_name="runs")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.kind} {self.title} ({self.state})"


class RunEvent(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()
    kind = models.CharField(max_length=32)
    message = models.TextField(blank=True)
    data = models.JSONField(default=dict, blank=True)
    by = models.ForeignKey(Persona, on_delete=models.CASCADE, related_name="+")
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="run_event_unique_seq")]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.seq} {self.kind}"


class Artifact(models.Model):
    """Something a run produced; `published_to` says where it was published outside, if at all."""

    uuid = uuid_field()
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="artifacts")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=32, blank=True)
    location = models.CharField(max_length=1024, blank=True)
    sha256 = models.CharField(max_length=64, blank=True)
    size = models.PositiveBigIntegerField(null=True, blank=True)
    published_to = models.URLField(max_length=1024, blank=True)
    recorded_by = models.ForeignKey(Persona, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.name} of {self.run_id}"


class ConversationArchive(models.Model):
    """One archived conversation of a persona; `parent` is the conversation it continued.

    A lineage never crosses personas: a parent is always an archive of the same persona.
    """

    uuid = uuid_field()
    persona = models.ForeignKey(
        Persona, on_delete=models.CASCADE, related_name="conversation_archives"
    )
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    title = models.CharField(max_length=200)
    summary = models.TextField(blank=True)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["started_at", "id"]

    def __str__(self) -> str:
        return f"{self.persona}: {self.title}"
