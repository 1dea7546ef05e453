"""The normal form of a tool call: what the classifier judges, the prompt registry keys a learned
choice on and the records keep.

`normalise` splits a call by the tool's declaration (runtime.tools.params `Key`): its target
(where it acts) and its shape (what it does: every other argument, by value or by fingerprint,
and what the tool resolves for the call). Together they are the key of a learned choice and what
the human asked to confirm is shown; the classifier's rules (runtime.rules) read the arguments
themselves.
"""

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from personas.catalogue import VERBS_BY_NAME, Boundary
from runtime.credentials import is_secret_path
from runtime.redaction import (
    CREDENTIAL_FILE_CONTENT,
    redact_secrets,
    redacted,
)
from runtime.tools.params import ArgumentError, Key, Param, fingerprint, parse
from runtime.tools.workspace import (
    TOOL_ARGUMENTS,
    InvalidArgument,
    PathEscape,
    Workspace,
    normalise_path,
)


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
        if credential_files_written(self) and "content" in self.arguments:
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
    look_only: bool = False,
) -> Operation:
    """The normal form of one call. Raises InvalidOperation for arguments that make no sense.

    A path that escapes the workspace is not an invalid argument: it is recorded as an escape so
    the classifier refuses it loudly as cross-scope access. `workspace`, when given, lets the
    normaliser see symlinks on disk; without it only the spelling of the path is judged.
    `declaration` is what the tool takes (the workspace tools' own is known here); without one,
    every argument is shape, by fingerprint. `look_only` looks at the workspace without making
    its root (runtime.explain changes nothing on disk).
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
                _, resolved_path = workspace.resolve_inside(values["path"], create=not look_only)
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


def touched_paths(op: Operation) -> list[str]:
    """The workspace paths the call names: as given, and as it resolved on disk."""
    path = op.arguments.get("path")
    return [p for p in (path, op.resolved_path) if isinstance(p, str) and p]


def credential_files_written(op: Operation) -> list[str]:
    """The credential files a workspace write would change (their content is never kept)."""
    if op.action != "workspace.write":
        return []
    return [path for path in touched_paths(op) if is_secret_path(path)]
