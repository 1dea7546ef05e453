"""The classifier as a table: every rule names its boundary and its outcome, and carries examples
that must match and neighbours that must not.

Policy shape (persona-capability-surface-v1): the default is positive. Only the six global
boundaries of `personas.catalogue.Boundary` stand in the way: three deny outright, three ask for
confirmation. The test suite runs every example of `RULES`, so the table documents itself and
cannot drift from what the code does; the engine that applies it is runtime.policy.
"""

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from personas.catalogue import Boundary
from runtime.credentials import credential_location, find_secret
from runtime.operations import (
    Binding,
    Operation,
    credential_files_written,
    touched_paths,
)
from runtime.tools.workspace import is_authority_path


class Outcome(StrEnum):
    ALLOW = "allow"
    CONFIRM = "confirm"
    DENY = "deny"


# Predicates -----------------------------------------------------------------------------------

_SECRET_FIELD_WORDS = ("token", "password", "secret", "credential", "api_key", "private_key")
_FIELD_SELECTORS = ("include", "fields", "reveal", "expand")
_AUTHORITY_KEYS = frozenset(
    {"lease", "lease_token", "fence", "fence_token", "fencing_token", "authority_token"}
)
_PERMISSION_KEYS = frozenset(
    {"permissions", "acl", "grants", "roles", "scopes", "credentials", "password"}
)
_DESTRUCTIVE_FLAGS = ("force", "purge", "hard")
_DESTRUCTIVE_VERBS = frozenset({"delete", "purge", "drop", "destroy", "wipe", "reset"})
_PUBLICATION_PREFIXES = ("deploy.", "publish.")
# Run kinds that are deployments or publications, and the argument that records an artifact as
# published outside (runtime.tools.runs).
_PUBLICATION_RUN_KINDS = frozenset({"deploy", "publish"})
_PUBLICATION_TARGET = "publish_to"


def _walk(value: Any) -> Iterator[tuple[str | None, Any]]:
    """Every (key, value) pair at any depth; list items come with key None."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield key, item
            yield from _walk(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield None, item
            yield from _walk(item)


def _other(op: Operation, key: str, own: str | None, what: str) -> str | None:
    value = op.target[key]
    if value != own:
        return f"{what} {value!r} is outside this persona's binding ({own or 'no ' + key})"
    return None


def _cross_workspace(op: Operation, binding: Binding) -> str | None:
    return _other(op, "workspace", binding.workspace, "workspace")


def _cross_project(op: Operation, binding: Binding) -> str | None:
    return _other(op, "project", binding.project, "project")


def _cross_persona(op: Operation, binding: Binding) -> str | None:
    return _other(op, "persona", binding.persona, "persona")


def _path_escape(op: Operation, binding: Binding) -> str | None:
    if op.escapes:
        return f"path {op.arguments.get('path')!r} leads outside the persona's workspace"
    return None


def _foreign_queue(op: Operation, binding: Binding) -> str | None:
    queue = op.arguments.get("queue")
    if queue is not None and queue not in binding.queues:
        return f"queue {queue!r} is not bound to this persona ({', '.join(binding.queues)})"
    return None


def _foreign_surface(op: Operation, binding: Binding) -> str | None:
    surface = op.arguments.get("binding")
    if op.action.startswith("human.") and surface is not None and surface not in binding.surfaces:
        bound = ", ".join(binding.surfaces) or "none"
        return f"human surface {surface!r} is not bound to this persona ({bound})"
    return None


def _secret_path(op: Operation, binding: Binding) -> str | None:
    if op.action == "workspace.write":
        return None
    for path in touched_paths(op):
        if location := credential_location(path):
            return f"{path!r} looks like secret credential material ({location.reason})"
    return None


def _secret_fields(op: Operation, binding: Binding) -> str | None:
    for key in _FIELD_SELECTORS:
        selected = op.arguments.get(key)
        names = selected if isinstance(selected, list) else [selected]
        for name in names:
            if isinstance(name, str) and any(w in name.lower() for w in _SECRET_FIELD_WORDS):
                return f"{key} asks for {name!r}, a secret credential value"
    return None


# Argument strings already read and found to hold no secret: the same keys and short values come
# with call after call. Only strings found clean are kept, so no secret lingers in them.
_CLEAN_KEPT = 4096
_CLEAN_LENGTH = 256
_clean: dict[str, None] = {}


def _secret_in(text: str) -> str | None:
    if text in _clean:
        return None
    kind = find_secret(text)
    if kind is None and len(text) <= _CLEAN_LENGTH:
        if len(_clean) >= _CLEAN_KEPT:
            _clean.clear()
        _clean[text] = None
    return kind


def _secret_values(op: Operation, binding: Binding) -> str | None:
    for key, value in _walk(op.arguments):
        if isinstance(key, str) and (kind := _secret_in(key)):
            return f"an argument's key looks like a secret credential value ({kind})"
        if isinstance(value, str) and (kind := _secret_in(value)):
            where = f"argument {key!r}" if key else "an argument"
            return f"{where} carries what looks like a secret credential value ({kind})"
    return None


def _authority_path(op: Operation, binding: Binding) -> str | None:
    for path in touched_paths(op):
        if is_authority_path(path):
            return f"{path!r} is lease, fence or authority material"
    return None


def _authority_values(op: Operation, binding: Binding) -> str | None:
    for key, _ in _walk(op.arguments):
        if isinstance(key, str) and key.lower() in _AUTHORITY_KEYS:
            return f"argument {key!r} carries lease, fence or authority material"
    return None


def _declared(boundary: Boundary) -> Callable[[Operation, Binding], str | None]:
    def test(op: Operation, binding: Binding) -> str | None:
        if op.declared_boundary == boundary:
            return f"{op.tool} crosses the {boundary.value} boundary by definition"
        return None

    return test


def _credential_file_write(op: Operation, binding: Binding) -> str | None:
    paths = credential_files_written(op)
    return f"writing {paths[0]!r} changes credential material" if paths else None


def _permission_arguments(op: Operation, binding: Binding) -> str | None:
    keys = sorted(key for key in op.arguments if key.lower() in _PERMISSION_KEYS)
    if keys:
        return f"argument {keys[0]!r} changes credentials or permissions"
    return None


def _delete(op: Operation, binding: Binding) -> str | None:
    if op.action == "workspace.write" and op.arguments.get("mode") == "delete":
        return f"deleting {op.arguments.get('path')!r} cannot be undone"
    return None


def _destructive_flags(op: Operation, binding: Binding) -> str | None:
    flags = [flag for flag in _DESTRUCTIVE_FLAGS if op.arguments.get(flag) is True]
    if flags:
        return f"{flags[0]}=true makes {op.tool} destructive"
    if op.action.rsplit(".", 1)[-1] in _DESTRUCTIVE_VERBS:
        return f"{op.action} is destructive"
    return None


def _publication(op: Operation, binding: Binding) -> str | None:
    if op.declared_boundary == Boundary.EXTERNAL_PUBLICATION:
        return f"{op.tool} publishes or deploys outside the persona"
    if op.action.startswith(_PUBLICATION_PREFIXES):
        return f"{op.action} publishes or deploys outside the persona"
    kind = op.arguments.get("kind")
    if op.action == "runs.create" and kind in _PUBLICATION_RUN_KINDS:
        return f"a {kind} run deploys or publishes outside the persona"
    if op.action == "runs.record_artifact" and op.arguments.get(_PUBLICATION_TARGET):
        return "recording an artifact as published outside the persona publishes it"
    return None


# The table ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Example:
    """A call as a persona would make it: a tool name and its arguments."""

    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    outcome: Outcome
    boundary: Boundary
    description: str
    test: Callable[[Operation, Binding], str | None]
    match: tuple[Example, ...]
    not_match: tuple[Example, ...]


EXAMPLE_PERSONA = "00000000-0000-4000-8000-000000000001"
OTHER_PERSONA = "00000000-0000-4000-8000-000000000002"
EXAMPLE_BINDING = Binding(
    persona=EXAMPLE_PERSONA,
    workspace="work",
    project="core",
    queues=("reviews",),
    mutable_paths=("QUEUE.md", "DECISIONS.md", "FINDINGS.md", "memory/**"),
    surfaces=("teams:chat/ops",),
)

E = Example
PRIVATE_KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\n"

RULES: tuple[Rule, ...] = (
    # Deny: whatever the stamp or the prompt registry says.
    Rule(
        "cross-workspace", Outcome.DENY, Boundary.CROSS_SCOPE,
        "The call names a workspace other than the persona's own.",
        _cross_workspace,
        match=(E("workspace_read", {"path": "QUEUE.md", "workspace": "home"}),),
        not_match=(
            E("workspace_read", {"path": "QUEUE.md", "workspace": "work"}),
            E("workspace_read", {"path": "QUEUE.md"}),
        ),
    ),
    Rule(
        "cross-project", Outcome.DENY, Boundary.CROSS_SCOPE,
        "The call names a project other than the persona's own.",
        _cross_project,
        match=(
            E("workspace_list", {"project": "web"}),
            E("workspace_list", {"project": None}),
        ),
        not_match=(E("workspace_list", {"project": "core"}), E("workspace_list")),
    ),
    Rule(
        "cross-persona", Outcome.DENY, Boundary.CROSS_SCOPE,
        "The call names another persona's workspace or records.",
        _cross_persona,
        match=(E("workspace_stat", {"path": "QUEUE.md", "persona": OTHER_PERSONA}),),
        not_match=(E("workspace_stat", {"path": "QUEUE.md", "persona": EXAMPLE_PERSONA}),),
    ),
    Rule(
        "path-escape", Outcome.DENY, Boundary.CROSS_SCOPE,
        "A path that leaves the workspace root: '..', absolute, or a symlink pointing outside.",
        _path_escape,
        match=(
            E("workspace_read", {"path": f"../{OTHER_PERSONA}/QUEUE.md"}),
            E("workspace_read", {"path": "/etc/passwd"}),
            E("workspace_write", {"path": "memory/../../QUEUE.md", "content": "x"}),
        ),
        not_match=(
            E("workspace_read", {"path": "./memory//notes.md"}),
            E("workspace_read", {"path": "memory/v1..v2.md"}),
        ),
    ),
    Rule(
        "foreign-queue", Outcome.DENY, Boundary.CROSS_SCOPE,
        "A queue that is not among the persona's bound queues.",
        _foreign_queue,
        match=(E("list_todos", {"queue": "deploys"}),),
        not_match=(E("list_todos", {"queue": "reviews"}),),
    ),
    Rule(
        "foreign-surface", Outcome.DENY, Boundary.CROSS_SCOPE,
        "A human surface that is not among the persona's bound surfaces.",
        _foreign_surface,
        match=(
            E("send_human_message", {"binding": "teams:chat/finance", "text": "hi"}),
            E("get_human_surface_status", {"binding": "teams:chat/finance"}),
        ),
        not_match=(E("send_human_message", {"binding": "teams:chat/ops", "text": "hi"}),),
    ),
    Rule(
        "secret-path", Outcome.DENY, Boundary.SECRET_CREDENTIAL_VALUES,
        "Reading, listing or sending a file that looks like secret credential material.",
        _secret_path,
        match=(
            E("workspace_read", {"path": "memory/.env"}),
            E("workspace_read", {"path": ".envrc"}),
            E("workspace_read", {"path": ".kube/config"}),
            E("workspace_read", {"path": "infra/prod.tfvars"}),
            E("workspace_hash", {"path": "deploy/id_ed25519"}),
            E("workspace_list", {"path": ".ssh"}),
            E("workspace_list", {"path": "home/.config/gcloud"}),
            E("send_human_file", {"path": "certs/server.pem"}),
        ),
        not_match=(
            E("workspace_read", {"path": "memory/environment.md"}),
            E("workspace_read", {"path": "memory/secretary-notes.md"}),
            E("workspace_read", {"path": "infra/main.tf"}),
            E("workspace_read", {"path": "docs/kube-config.md"}),
        ),
    ),
    Rule(
        "secret-fields", Outcome.DENY, Boundary.SECRET_CREDENTIAL_VALUES,
        "A field selector asking for a token, password or other secret value.",
        _secret_fields,
        match=(E("get_human_surface_status", {"include": ["status", "bot_token"]}),),
        not_match=(E("get_human_surface_status", {"include": ["status", "latency"]}),),
    ),
    Rule(
        "secret-values", Outcome.DENY, Boundary.SECRET_CREDENTIAL_VALUES,
        "An argument carrying a credential value (runtime.credentials), on its way out.",
        _secret_values,
        match=(
            E("send_broker_message", {"body": f"here you go: {PRIVATE_KEY}"}),
            E("report_task", {"task": "t1", "notes": ["key AKIAIOSFODNN7EXAMPLE"]}),
            E("trigger_webhook", {"webhook": "ci", "payload": {PRIVATE_KEY: "as a key"}}),
            E("send_broker_message", {"body": 'db_password = "Vq8!mZr2#Lw"'}),
            E("send_broker_message", {"body": "mirror: https://ci:Vq8mZr2Lw@git.example.org/"}),
        ),
        not_match=(
            E("send_broker_message", {"body": "rotate the AWS key next week"}),
            E("report_task", {"task": "t1", "notes": ["AKIA is the key prefix"]}),
            E("send_broker_message", {"body": "the password policy now asks for 12 characters"}),
            E("send_broker_message", {"body": "mirror: https://user:<password>@git.example.org/"}),
        ),
    ),
    Rule(
        "authority-path", Outcome.DENY, Boundary.AUTHORITY_MATERIAL_EXPORT,
        "Any call on a lease, fence or authority file.",
        _authority_path,
        match=(
            E("workspace_read", {"path": "memory/session.lease"}),
            E("workspace_write", {"path": "memory/worker.fence", "content": "7"}),
        ),
        not_match=(E("workspace_read", {"path": "memory/release-notes.md"}),),
    ),
    Rule(
        "authority-values", Outcome.DENY, Boundary.AUTHORITY_MATERIAL_EXPORT,
        "An argument carrying a lease, fence or authority token, at any depth.",
        _authority_values,
        match=(E("send_broker_message", {"body": "hi", "meta": {"fence_token": "41"}}),),
        not_match=(E("send_broker_message", {"body": "hi", "meta": {"topic": "fence repair"}}),),
    ),
    # Confirm: routed to the bound authority unless an exact choice was learned.
    Rule(
        "declared-credential-change", Outcome.CONFIRM, Boundary.CREDENTIAL_OR_PERMISSION_CHANGE,
        "A tool whose purpose is a credential or permission change.",
        _declared(Boundary.CREDENTIAL_OR_PERMISSION_CHANGE),
        match=(E("register_webhook", {"webhook": "ci"}),),
        not_match=(E("list_todos", {"queue": "reviews"}),),
    ),
    Rule(
        "credential-file-write", Outcome.CONFIRM, Boundary.CREDENTIAL_OR_PERMISSION_CHANGE,
        "Writing a file that looks like credential material.",
        _credential_file_write,
        match=(E("workspace_write", {"path": "memory/.env", "content": "MODE=dev"}),),
        not_match=(E("workspace_write", {"path": "memory/env-notes.md", "content": "MODE"}),),
    ),
    Rule(
        "permission-arguments", Outcome.CONFIRM, Boundary.CREDENTIAL_OR_PERMISSION_CHANGE,
        "A call that sets permissions, roles, grants or credentials.",
        _permission_arguments,
        match=(E("assign_task", {"task": "t1", "assignee": "p2", "permissions": ["merge"]}),),
        not_match=(E("assign_task", {"task": "t1", "assignee": "p2"}),),
    ),
    Rule(
        "workspace-delete", Outcome.CONFIRM, Boundary.DESTRUCTIVE,
        "Deleting a workspace file.",
        _delete,
        match=(E("workspace_write", {"path": "memory/old.md", "mode": "delete"}),),
        not_match=(E("workspace_write", {"path": "memory/old.md", "mode": "replace"}),),
    ),
    Rule(
        "destructive-flags", Outcome.CONFIRM, Boundary.DESTRUCTIVE,
        "force/purge/hard flags, or an action that deletes, drops or wipes.",
        _destructive_flags,
        match=(E("advance_run", {"run": "r1", "state": "cancelled", "force": True}),),
        not_match=(E("advance_run", {"run": "r1", "state": "cancelled", "force": False}),),
    ),
    Rule(
        "publication", Outcome.CONFIRM, Boundary.EXTERNAL_PUBLICATION,
        "Deployment or publication outside the persona.",
        _publication,
        match=(
            E("trigger_webhook", {"webhook": "prod-deploy"}),
            E("create_run", {"title": "v2 to prod", "kind": "deploy"}),
            E("create_run", {"title": "v2 docs", "kind": "publish"}),
            E("record_artifact", {"run": "r1", "name": "app.whl", "publish_to": "https://x.org/"}),
        ),
        not_match=(
            E("send_broker_message", {"body": "deploy went fine"}),
            E("create_run", {"title": "deploy scripts lint", "kind": "test"}),
            E("record_artifact", {"run": "r1", "name": "app.whl", "publish_to": ""}),
            E("record_artifact", {"run": "r1", "name": "app.whl"}),
        ),
    ),
)  # fmt: skip

RULES_BY_ID: dict[str, Rule] = {rule.id: rule for rule in RULES}
