"""What the runtime must remember: decisions on confirmations, learned choices, refusals, and
the records the persona tools work on (inbox, presence, tasks, decisions, runs, archives).

Writes go through runtime.confirmations, runtime.registry, runtime.handler and the tool modules;
the admin only calls those.
"""

import uuid

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

    class Via(models.TextChoices):
        AUTHORITY = "authority", "The routed authority"
        PROMPT_REGISTRY = "prompt-registry", "A learned choice of the prompt registry"

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


class SnapshotImport(models.Model):
    """One `virgo persona import`: who brought which archived persona in, as which new persona.

    The archive's stamps are kept beside it as history (ArchivedStamp); the persona itself was
    created by the services and stamped by the factory like any other.
    """

    persona = models.ForeignKey(Persona, on_delete=models.CASCADE, related_name="snapshot_imports")
    source_persona = models.UUIDField(help_text="The persona the archive names: provenance only.")
    manifest_sha256 = models.CharField(max_length=64)
    imported_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    imported_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-imported_at", "-id"]

    def __str__(self) -> str:
        return f"import of {self.source_persona} as {self.persona}"


class ArchivedStamp(models.Model):
    """A stamp a snapshot carried, as history: never a generation's stamp, file or authority."""

    snapshot_import = models.ForeignKey(
        SnapshotImport, on_delete=models.CASCADE, related_name="archived_stamps"
    )
    generation_number = models.PositiveIntegerField()
    stamp_hash = models.CharField(max_length=64)
    body = models.BinaryField()

    class Meta:
        ordering = ["snapshot_import", "generation_number"]
        constraints = [
            models.UniqueConstraint(
                fields=["snapshot_import", "generation_number"],
                name="archived_stamp_unique_per_generation",
            )
        ]

    def __str__(self) -> str:
        return f"archived stamp {self.stamp_hash[:12]} (generation {self.generation_number})"


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


# The records the persona tools work on -------------------------------------------------------
#
# Every row below belongs to one owner (the installation a persona acts in) and is written only
# through the tool modules (runtime.coordination, runtime.decisions, runtime.work, runtime.runs,
# runtime.webhooks) or their owner-side services; the admin reads them.


def _uuid_field() -> models.UUIDField:
    return models.UUIDField(default=uuid.uuid4, unique=True, editable=False)


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

    uuid = _uuid_field()
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

    uuid = _uuid_field()
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

    uuid = _uuid_field()
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

    uuid = _uuid_field()
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

    uuid = _uuid_field()
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

    uuid = _uuid_field()
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

    uuid = _uuid_field()
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

    uuid = _uuid_field()
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


class Webhook(models.Model):
    """A deployment or publication webhook a persona registered (after confirmation)."""

    uuid = _uuid_field()
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
