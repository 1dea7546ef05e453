"""The verb catalogue: every verb (tool name) Virgo knows, the only place they are listed.

Verbs and tool names are one vocabulary: a persona's verb subset is its tool grant. Each verb
names the capability bundle of the class matrix it belongs to (persona-capability-surface-v1),
whether it reads or mutates, the handler action the runtime dispatches it to, and the global
boundary it can cross. The 38 tools of the required inventory are marked `required`; the
switchboard todo verbs of SPEC-0009 and the webhook verbs are later, versioned additions.
"""

from dataclasses import dataclass
from enum import StrEnum


class Mode(StrEnum):
    READ = "read"
    WRITE = "write"


class Boundary(StrEnum):
    """The six global boundaries of v1: three ask for confirmation, three are denied."""

    CREDENTIAL_OR_PERMISSION_CHANGE = "credential-or-permission-change"
    DESTRUCTIVE = "destructive-or-irreversible"
    EXTERNAL_PUBLICATION = "external-publication-or-deployment"
    SECRET_CREDENTIAL_VALUES = "secret-credential-values"
    AUTHORITY_MATERIAL_EXPORT = "lease-fence-authority-export"
    CROSS_SCOPE = "cross-scope-access"

    @property
    def is_deny(self) -> bool:
        return self in _DENY_BOUNDARIES


_DENY_BOUNDARIES = frozenset(
    {Boundary.SECRET_CREDENTIAL_VALUES, Boundary.AUTHORITY_MATERIAL_EXPORT, Boundary.CROSS_SCOPE}
)


class Bundle(StrEnum):
    """The 13 capability bundles, rows of the class matrix."""

    WORKSPACE_COORDINATION = "standard workspace and coordination"
    PEERS_PRESENCE = "peer verification and presence"
    GRAPH_CONTEXT = "bounded graph context query"
    DECISIONS_LIST_RAISE = "decisions: list / raise"
    DECISIONS_RESOLVE = "decisions: resolve"
    TASKS_LIST_GET_REPORT = "tasks: list / get / report"
    TASKS_ASSIGN = "tasks: assign"
    RUNS_ARTIFACTS = "runs and artifacts"
    HUMAN_MESSAGES = "human messages, replies, ack, typing"
    REACTIONS = "reaction catalogue and apply"
    HUMAN_CARDS_FILES = "cards, todo cards, file send"
    HUMAN_SURFACE_STATUS = "human-surface/gateway status"
    DEPLOYMENT_PUBLICATION = "deployment/publication"


@dataclass(frozen=True, slots=True)
class Verb:
    name: str
    handler_action: str
    bundle: Bundle
    mode: Mode
    description: str
    required: bool = True
    boundary: Boundary | None = None
    since: str = "v1"


def _v(
    name: str,
    action: str,
    bundle: Bundle,
    mode: Mode,
    description: str,
    *,
    required: bool = True,
    boundary: Boundary | None = None,
    since: str = "v1",
) -> Verb:
    return Verb(name, action, bundle, mode, description, required, boundary, since)


R, W = Mode.READ, Mode.WRITE
B = Bundle

VERBS: tuple[Verb, ...] = (
    # workspace
    _v("workspace_list", "workspace.list", B.WORKSPACE_COORDINATION, R, "List workspace files"),
    _v("workspace_stat", "workspace.stat", B.WORKSPACE_COORDINATION, R, "File metadata"),
    _v("workspace_hash", "workspace.hash", B.WORKSPACE_COORDINATION, R, "Content hash of a file"),
    _v("workspace_read", "workspace.read", B.WORKSPACE_COORDINATION, R, "Ranged file read"),
    _v("workspace_write", "workspace.write", B.WORKSPACE_COORDINATION, W, "Atomic file write"),
    # identity / presence
    _v("list_peers", "identity.list_peers", B.PEERS_PRESENCE, R, "List peer personas"),
    _v("lookup_sender", "identity.lookup_sender", B.PEERS_PRESENCE, R, "Redacted sender lookup"),
    _v("set_summary", "presence.set_summary", B.PEERS_PRESENCE, W, "Set presence summary"),
    _v("set_activity", "presence.set_activity", B.PEERS_PRESENCE, W, "Set presence activity"),
    _v("reconcile_wake", "coordination.reconcile_wake", B.WORKSPACE_COORDINATION, W, "Reconcile"),
    # coordination
    _v("send_broker_message", "coordination.send", B.WORKSPACE_COORDINATION, W, "Broker send"),
    _v("list_coordination_messages", "coordination.list", B.WORKSPACE_COORDINATION, R, "Inbox"),
    _v("ack_coordination_message", "coordination.ack", B.WORKSPACE_COORDINATION, W, "Inbox ack"),
    # decisions
    _v("list_decisions", "decisions.list", B.DECISIONS_LIST_RAISE, R, "List decisions"),
    _v("raise_decision", "decisions.raise", B.DECISIONS_LIST_RAISE, W, "Raise a decision"),
    _v("resolve_decision", "decisions.resolve", B.DECISIONS_RESOLVE, W, "Resolve a decision"),
    # tasks
    _v("list_tasks", "tasks.list", B.TASKS_LIST_GET_REPORT, R, "List owned tasks"),
    _v("get_task", "tasks.get", B.TASKS_LIST_GET_REPORT, R, "Get an owned task"),
    _v("report_task", "tasks.report", B.TASKS_LIST_GET_REPORT, W, "Report on an owned task"),
    _v("assign_task", "tasks.assign", B.TASKS_ASSIGN, W, "Assign a task"),
    # runs
    _v("list_runs", "runs.list", B.RUNS_ARTIFACTS, R, "List runs"),
    _v("get_run", "runs.get", B.RUNS_ARTIFACTS, R, "Get a run"),
    _v("create_run", "runs.create", B.RUNS_ARTIFACTS, W, "Create a run"),
    _v("advance_run", "runs.advance", B.RUNS_ARTIFACTS, W, "Advance a run"),
    _v("append_run_event", "runs.append_event", B.RUNS_ARTIFACTS, W, "Append a run event"),
    _v("record_artifact", "runs.record_artifact", B.RUNS_ARTIFACTS, W, "Record an artifact"),
    # knowledge
    _v("query_graph_context", "graph.query", B.GRAPH_CONTEXT, R, "Bounded graph query"),
    # human surface
    _v("send_human_message", "human.send_message", B.HUMAN_MESSAGES, W, "Message a human"),
    _v("reply_human_message", "human.reply_message", B.HUMAN_MESSAGES, W, "Reply to a human"),
    _v("ack_human_message", "human.ack_message", B.HUMAN_MESSAGES, W, "Acknowledge a message"),
    _v("start_typing", "human.start_typing", B.HUMAN_MESSAGES, W, "Typing indicator on"),
    _v("stop_typing", "human.stop_typing", B.HUMAN_MESSAGES, W, "Typing indicator off"),
    _v("list_reaction_ids", "human.list_reactions", B.REACTIONS, R, "Reaction catalogue"),
    _v("apply_human_reaction", "human.apply_reaction", B.REACTIONS, W, "Apply a reaction"),
    _v("send_human_card", "human.send_card", B.HUMAN_CARDS_FILES, W, "Send a card"),
    _v("send_human_todo", "human.send_todo", B.HUMAN_CARDS_FILES, W, "Send a todo card"),
    _v("send_human_file", "human.send_file", B.HUMAN_CARDS_FILES, W, "Send a file"),
    _v("get_human_surface_status", "human.status", B.HUMAN_SURFACE_STATUS, R, "Surface status"),
    # switchboard todo verbs (SPEC-0009): work arrives as todos over the task model
    _v("list_todos", "todos.list", B.TASKS_LIST_GET_REPORT, R, "List todos in own queues",
       required=False, since="switchboard-v1"),
    _v("claim", "todos.claim", B.TASKS_LIST_GET_REPORT, W, "Claim a todo",
       required=False, since="switchboard-v1"),
    _v("complete", "todos.complete", B.TASKS_LIST_GET_REPORT, W, "Complete a claimed todo",
       required=False, since="switchboard-v1"),
    _v("create_for", "todos.create_for", B.TASKS_ASSIGN, W, "Create a todo for another queue",
       required=False, since="switchboard-v1"),
    # webhook verbs: deployment and publication, always behind confirmation
    _v("register_webhook", "deploy.register_webhook", B.DEPLOYMENT_PUBLICATION, W,
       "Register a deployment webhook", required=False,
       boundary=Boundary.CREDENTIAL_OR_PERMISSION_CHANGE, since="webhooks-v1"),
    _v("trigger_webhook", "deploy.trigger_webhook", B.DEPLOYMENT_PUBLICATION, W,
       "Trigger a deployment or publication webhook", required=False,
       boundary=Boundary.EXTERNAL_PUBLICATION, since="webhooks-v1"),
)  # fmt: skip

VERBS_BY_NAME: dict[str, Verb] = {verb.name: verb for verb in VERBS}
VERB_NAMES: frozenset[str] = frozenset(VERBS_BY_NAME)
REQUIRED_TOOL_NAMES: tuple[str, ...] = tuple(verb.name for verb in VERBS if verb.required)


def unknown_verbs(names: list[str] | set[str] | tuple[str, ...]) -> list[str]:
    """The names that are not in the catalogue, in the order given."""
    return [name for name in names if name not in VERB_NAMES]
