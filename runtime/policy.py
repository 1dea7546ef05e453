"""The operation classifier: normalise a tool call, then decide allow, confirm or deny.

Policy shape (persona-capability-surface-v1): the default is positive. Only the six global
boundaries of `personas.catalogue.Boundary` stand in the way: three deny outright, three ask for
confirmation. `RULES` is the whole classifier as a table. Every row names its boundary and its
outcome, and carries examples that must match and neighbours that must not; the test suite runs
each of them, so the table documents itself and cannot drift from what the code does.

The classifier only ever narrows: a call that reaches it is already for a tool the stamp grants,
and nothing here can grant another.

The normal form (`normalise`) splits a call by the tool's declaration (runtime.params `Key`):
its target (where it acts) and its shape (what it does: every other argument, by value or by
fingerprint, and what the tool resolves for the call). Together they are the key of a learned
choice and what the human asked to confirm is shown; the rules read the arguments themselves.
"""

import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from personas.catalogue import VERBS_BY_NAME, Boundary
from runtime.params import ArgumentError, Key, Param, fingerprint, parse
from runtime.redaction import (
    CREDENTIAL_FILE_CONTENT,
    looks_secret,
    redact_secrets,
    redacted,
)
from runtime.workspace import (
    TOOL_ARGUMENTS,
    InvalidArgument,
    PathEscape,
    Workspace,
    is_authority_path,
    is_secret_path,
    normalise_path,
)


class Outcome(StrEnum):
    ALLOW = "allow"
    CONFIRM = "confirm"
    DENY = "deny"


class InvalidOperation(InvalidArgument):
    """The arguments do not describe an operation (wrong type, unknown key): nothing runs."""

    code = "invalid_arguments"


@dataclass(frozen=True, slots=True)
class Binding:
    """The explicit binding a persona acts within, read from its stamp."""

    persona: str
    workspace: str
    project: str | None
    queues: tuple[str, ...] = ()
    mutable_paths: tuple[str, ...] = ()
    surfaces: tuple[str, ...] = ()


# The keys that name the persona's own binding: always the start of an operation's target.
IDENTITY_KEYS = ("workspace", "project", "persona")


@dataclass(frozen=True, slots=True)
class Operation:
    """A tool call in normal form: the unit the classifier, the registry and records share.

    `target` is where it acts: the identity keys and the arguments declared `Key.TARGET`.
    `shape` is what it does: `{"arguments": {...}}` with every other argument given (declared
    `Key.VALUE`: as is; `Key.DIGEST` or not declared by the tool: by fingerprint), and
    `"resolved"` with what the tool read for the call (a webhook's URL). `arguments` is the
    call as given, identity keys filled in: what the rules judge and the tool runs with.
    """

    tool: str
    action: str
    target: dict[str, Any]
    shape: dict[str, Any]
    arguments: dict[str, Any]
    declared_boundary: Boundary | None = None
    escapes: bool = False
    resolved_path: str | None = None

    @property
    def resolved(self) -> dict[str, Any]:
        return self.shape.get("resolved", {})

    def with_resolved(self, values: Mapping[str, Any]) -> "Operation":
        """The operation with what its tool resolved for the call joined to its shape."""
        return dataclasses.replace(self, shape={**self.shape, "resolved": dict(values)})

    @property
    def scope_key(self) -> dict[str, Any]:
        """The target within the persona's own binding: what a learned choice is keyed on.

        The identity keys are left out because a learned choice is only ever consulted for an
        operation inside the binding (anything else is denied first), and the stamp hash that
        sits beside this key already pins the binding.
        """
        return {key: value for key, value in self.target.items() if key not in IDENTITY_KEYS}

    def as_json(self) -> dict[str, Any]:
        """The whole operation, real values and all: what its digest is taken of."""
        return {
            "tool": self.tool,
            "handler_action": self.action,
            "target": self.target,
            "shape": self.shape,
            "arguments": self.arguments,
        }

    def recorded(self) -> dict[str, Any]:
        """What is stored, sent and shown of the operation (VX-SEC-7): `as_json` with every
        value that looks like a secret, and the content of a credential-file write, replaced
        by its marker (runtime.redaction). Target and shape hold no such content, so a learned
        choice keyed from a record is keyed as the operation was."""
        data = self.as_json()
        if _credential_files_written(self) and "content" in self.arguments:
            data["arguments"] = {
                **self.arguments,
                "content": redacted(self.arguments["content"], CREDENTIAL_FILE_CONTENT),
            }
        return redact_secrets(data)


# Normalisation --------------------------------------------------------------------------------


def normalise(
    *,
    tool: str,
    action: str,
    arguments: Mapping[str, Any] | None,
    binding: Binding,
    workspace: Workspace | None = None,
    declaration: Sequence[Param] | None = None,
) -> Operation:
    """The normal form of one call. Raises InvalidOperation for arguments that make no sense.

    A path that escapes the workspace is not an invalid argument: it is recorded as an escape so
    the classifier refuses it loudly as cross-scope access. `workspace`, when given, lets the
    normaliser see symlinks on disk; without it only the spelling of the path is judged.
    `declaration` is what the tool takes (the workspace tools' own is known here); without one,
    every argument is shape, by fingerprint.
    """
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping) or not all(isinstance(k, str) for k in arguments):
        raise InvalidOperation("arguments must be an object with string keys")
    values = dict(arguments)
    target: dict[str, Any] = {
        "workspace": _identity(values, "workspace", binding.workspace),
        "project": _identity(values, "project", binding.project, nullable=True),
        "persona": _identity(values, "persona", binding.persona),
    }
    if action in TOOL_ARGUMENTS:
        declaration = TOOL_ARGUMENTS[action]
        values = _workspace_arguments(tool, action, values)
    else:
        # A null counts as not given, as the tool's parser counts it.
        values = {key: value for key, value in values.items() if value is not None}
    if not _plain_json(values):
        raise InvalidOperation("arguments must be plain JSON values")
    escapes = False
    resolved_path: str | None = None
    if "path" in values:
        try:
            values["path"] = normalise_path(values["path"], allow_root=action == "workspace.list")
        except PathEscape:
            escapes = True
        except InvalidArgument as exc:
            raise InvalidOperation(exc.reason) from None
        if not escapes and workspace is not None and values["path"]:
            try:
                _, resolved_path = workspace.resolve_inside(values["path"])
            except PathEscape:
                escapes = True
    target, shape = _split(values, declaration or (), target)
    verb = VERBS_BY_NAME.get(tool)
    return Operation(
        tool=tool,
        action=action,
        target=target,
        shape=shape,
        arguments={**values, **{key: target[key] for key in IDENTITY_KEYS}},
        declared_boundary=verb.boundary if verb else None,
        escapes=escapes,
        resolved_path=resolved_path,
    )


def _identity(values: dict[str, Any], key: str, own: str | None, *, nullable: bool = False) -> Any:
    value = values.pop(key, own)
    if value is None and nullable:
        return None
    if not isinstance(value, str) or not value:
        raise InvalidOperation(f"{key} must be a non-empty string")
    return value


def _workspace_arguments(tool: str, action: str, values: dict[str, Any]) -> dict[str, Any]:
    """Every argument of a workspace tool, checked by its declaration, defaults filled in.

    Parsed here rather than in the tool because what a workspace call does (a delete, a path)
    decides its classification.
    """
    params = TOOL_ARGUMENTS[action]
    try:
        given = parse(params, values, tool=tool)
    except ArgumentError as exc:
        raise InvalidOperation(str(exc)) from None
    return {param.name: given.get(param.name, param.absent()) for param in params}


_JSON_SAFE_INTEGER = 2**53 - 1


def _plain_json(value: Any) -> bool:
    """Whether the value has one canonical JSON form (RFC 8785), as keys and digests need."""
    if value is None or isinstance(value, str | bool):
        return True
    if isinstance(value, int):
        return abs(value) <= _JSON_SAFE_INTEGER
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list | tuple):
        return all(_plain_json(item) for item in value)
    if isinstance(value, Mapping):
        return all(isinstance(k, str) and _plain_json(v) for k, v in value.items())
    return False


def _split(
    values: dict[str, Any], declaration: Sequence[Param], identity: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Target and shape of the arguments given, each argument where its declaration puts it.

    Every argument is in one of them: a declared one as its `key` says; one the tool does not
    declare (the tool will refuse it) by fingerprint, so nothing given is left out of the key.
    """
    declared = {param.name: param for param in declaration}
    target = dict(identity)
    shaped: dict[str, Any] = {}
    for name, value in values.items():
        role = declared[name].key if name in declared else Key.DIGEST
        if role is Key.TARGET:
            target[name] = value
        elif role is Key.VALUE:
            shaped[name] = value
        else:
            shaped[name] = fingerprint(value)
    return target, {"arguments": shaped}


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
# published outside (runtime.runs).
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


def _paths(op: Operation) -> list[str]:
    path = op.arguments.get("path")
    return [p for p in (path, op.resolved_path) if isinstance(p, str) and p]


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
    for path in _paths(op):
        if is_secret_path(path):
            return f"{path!r} looks like secret credential material"
    return None


def _secret_fields(op: Operation, binding: Binding) -> str | None:
    for key in _FIELD_SELECTORS:
        selected = op.arguments.get(key)
        names = selected if isinstance(selected, list) else [selected]
        for name in names:
            if isinstance(name, str) and any(w in name.lower() for w in _SECRET_FIELD_WORDS):
                return f"{key} asks for {name!r}, a secret credential value"
    return None


def _secret_values(op: Operation, binding: Binding) -> str | None:
    for key, value in _walk(op.arguments):
        if isinstance(key, str) and looks_secret(key):
            return "an argument's key looks like a secret credential value"
        if isinstance(value, str) and looks_secret(value):
            where = f"argument {key!r}" if key else "an argument"
            return f"{where} carries what looks like a secret credential value"
    return None


def _authority_path(op: Operation, binding: Binding) -> str | None:
    for path in _paths(op):
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


def _credential_files_written(op: Operation) -> list[str]:
    if op.action != "workspace.write":
        return []
    return [path for path in _paths(op) if is_secret_path(path)]


def _credential_file_write(op: Operation, binding: Binding) -> str | None:
    paths = _credential_files_written(op)
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


@dataclass(frozen=True, slots=True)
class Verdict:
    outcome: Outcome
    boundary: Boundary | None
    rule: str
    reason: str


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
            E("workspace_hash", {"path": "deploy/id_ed25519"}),
            E("workspace_list", {"path": ".ssh"}),
            E("send_human_file", {"path": "certs/server.pem"}),
        ),
        not_match=(
            E("workspace_read", {"path": "memory/environment.md"}),
            E("workspace_read", {"path": "memory/secretary-notes.md"}),
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
        "An argument carrying a private key or an access token, on its way out.",
        _secret_values,
        match=(
            E("send_broker_message", {"body": f"here you go: {PRIVATE_KEY}"}),
            E("report_task", {"task": "t1", "notes": ["key AKIAIOSFODNN7EXAMPLE"]}),
            E("trigger_webhook", {"webhook": "ci", "payload": {PRIVATE_KEY: "as a key"}}),
        ),
        not_match=(
            E("send_broker_message", {"body": "rotate the AWS key next week"}),
            E("report_task", {"task": "t1", "notes": ["AKIA is the key prefix"]}),
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


def classify(op: Operation, binding: Binding, *, access: str = "allow") -> Verdict:
    """The verdict for one operation: the first deny, else the first confirm, else allow.

    `access` is the stamp's `access` of the tool: `confirm` asks even when no boundary does.
    """
    for outcome in (Outcome.DENY, Outcome.CONFIRM):
        for rule in RULES:
            if rule.outcome is outcome:
                reason = rule.test(op, binding)
                if reason:
                    return Verdict(outcome, rule.boundary, rule.id, reason)
    if access == "confirm":
        return Verdict(
            Outcome.CONFIRM,
            op.declared_boundary,
            "stamp-access-confirm",
            f"the stamp grants {op.tool} with access: confirm",
        )
    return Verdict(Outcome.ALLOW, None, "default-allow", "ordinary work inside the binding")


def classify_example(example: Example, *, binding: Binding = EXAMPLE_BINDING) -> Verdict:
    """Classify a table example as the persona of EXAMPLE_BINDING would call it."""
    verb = VERBS_BY_NAME[example.tool]
    op = normalise(
        tool=example.tool, action=verb.handler_action, arguments=example.arguments, binding=binding
    )
    return classify(op, binding)
