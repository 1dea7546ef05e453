"""What the runtime must remember, by record family: what the handler remembers of each call
(models.enforcement), snapshot imports (models.snapshots), the installation's shared workspace
directory (models.installation), and the records the persona tools
work on (models.coordination, work, decisions, runs, webhooks).

Every row of the tool records belongs to one owner (the installation a persona acts in) and is
written only through the tool modules (runtime.tools: coordination, decisions, work, runs,
webhooks) or their owner-side services; the admin reads them. One app label (`runtime`) and the
same tables as when they were one module.
"""

from runtime.models.coordination import CoordinationMessage, Presence, WakeMarker
from runtime.models.decisions import Decision, HumanInstruction, LaneApproval, LaneBinding
from runtime.models.enforcement import (
    AuthorityKind,
    DecisionRecord,
    PromptRegistryEntry,
    RefusalRecord,
)
from runtime.models.installation import WorkspaceDirectory
from runtime.models.runs import Artifact, ConversationArchive, Run, RunEvent
from runtime.models.snapshots import ArchivedStamp, SnapshotImport
from runtime.models.webhooks import Webhook, WebhookDelivery
from runtime.models.work import Task, TaskReport

__all__ = [
    "ArchivedStamp",
    "Artifact",
    "AuthorityKind",
    "ConversationArchive",
    "CoordinationMessage",
    "Decision",
    "DecisionRecord",
    "HumanInstruction",
    "LaneApproval",
    "LaneBinding",
    "Presence",
    "PromptRegistryEntry",
    "RefusalRecord",
    "Run",
    "RunEvent",
    "SnapshotImport",
    "Task",
    "TaskReport",
    "WakeMarker",
    "Webhook",
    "WebhookDelivery",
    "WorkspaceDirectory",
]
