"""The one entry point of every tool call, whichever consumer it came from.

`handle(persona, tool_name, arguments, correlation_id)`:

1. loads the persona's active stamp, verified against its immutable stored stamp row;
2. refuses a tool the stamp does not grant;
3. normalises the call into an Operation by the tool's declaration (what it resolves for the
   call included, runtime.operations) and classifies it (runtime.policy);
4. refuses a deny boundary loudly, whatever the stamp or the prompt registry says;
5. for a confirm boundary or `access: confirm`: refuses arguments the tool would refuse (nobody
   is asked about a call that cannot run), applies an exact learned choice of the prompt
   registry if there is one, else writes a pending decision record routed to the authority and
   stops there; nothing runs before that record exists;
6. otherwise runs the implementation bound to the tool's handler action.

Steps 1-5 up to the point of effect are `decide()`, which writes nothing: runtime.explain asks
it the same question with `dry_run`, so what it answers is what handle() does.

A correlation id that already has a decision record resumes that record: approved and not yet
run, the operation runs now, exactly once; run before, the recorded result comes back.

"Loud" refusal: a structured result `{ok: false, code, boundary, reason}`, a RefusalRecord row and
a WARNING log line. A tool whose handler action has no implementation yet is refused the same
way; it never answers with a made-up success. An error of the operating system (a name too long,
a full disk, a file too large, a permission) is such a result too, never an exception out of
handle(): its code says what kind (`_OS_ERROR_CODES`), `errno` names it, and `retryable` says
whether the same call may succeed later. Records and log lines hold the operation as
`Operation.recorded()` gives it: secret values and credential-file content only as a marker.
"""

import dataclasses
import errno
import logging
import re
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from personas.catalogue import Boundary
from personas.models import Persona
from runtime import audit_trail, confirmations, registry, tracing
from runtime.models import DecisionRecord, PromptRegistryEntry, RefusalRecord
from runtime.operations import InvalidOperation, Operation, normalise
from runtime.policy import Verdict, classify
from runtime.redaction import redact_text
from runtime.rules import Outcome
from runtime.stamp import ActiveStamp, StampTool, StampUnavailable, load_active_stamp
from runtime.tools.toolkit import Arguments, Invalid, Tool, ToolCall
from runtime.tools.workspace import (
    AgentConfiguration,
    AuthorityPath,
    HardLinked,
    InvalidArgument,
    NotMutable,
    OutOfScope,
    PathEscape,
    SecretPath,
    SymlinkWrite,
    WorkspaceError,
)
from stamps.registry import HANDLERS

logger = logging.getLogger("virgo.runtime")

Result = dict[str, Any]
_CORRELATION_ID = re.compile(r"^[A-Za-z0-9._:@/+=-]{1,200}$")

# Errors a tool raises that are refusals of where it was pointed, not failures of the work.
_REFUSING_ERRORS: dict[type[WorkspaceError], Boundary | None] = {
    PathEscape: Boundary.CROSS_SCOPE,
    SecretPath: Boundary.SECRET_CREDENTIAL_VALUES,
    AuthorityPath: Boundary.AUTHORITY_MATERIAL_EXPORT,
    # Another name of the file may be outside the binding: its scope cannot be shown.
    HardLinked: Boundary.CROSS_SCOPE,
    NotMutable: None,
    AgentConfiguration: None,
    SymlinkWrite: None,
    OutOfScope: None,
}

_OS_ERROR_CODES = {
    errno.ENAMETOOLONG: "name_too_long",
    errno.EACCES: "permission_denied",
    errno.EPERM: "permission_denied",
    errno.EROFS: "read_only",
    errno.ENOSPC: "no_space",
    errno.EDQUOT: "no_space",
    errno.EFBIG: "file_too_large",
    errno.ENOTDIR: "wrong_kind",
    errno.EISDIR: "wrong_kind",
    errno.ELOOP: "path_escape",
    errno.EIO: "io_error",
}
# Conditions of the machine, not of the call: the same call may succeed once they pass.
_TRANSIENT_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EAGAIN, errno.EINTR, errno.EBUSY,
     errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ETIMEDOUT}
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Context:
    persona: Persona
    tool_name: str
    correlation_id: str
    stamp: ActiveStamp | None = None
    tool: StampTool | None = None
    op: Operation | None = None


@dataclass(frozen=True, slots=True)
class Stop:
    """Where the decision ends a call before anything runs, and in which words.

    `recorded` is False for a failure of the arguments a confirmation would ask about (the
    caller's mistake, answered but not recorded as a refusal); `os_error` is the disk's answer
    while the call was read.
    """

    code: str
    reason: str
    verdict: Verdict | None = None
    recorded: bool = True
    os_error: OSError | None = None
    # A stamp the load found unusable because its generation is (or, loading for real, would
    # be) quarantined: what runtime.explain tells apart from a stamp not built or not standing.
    quarantined: bool = False


@dataclass(frozen=True, slots=True)
class Decision:
    """Everything handle() decides about a call before it has any effect.

    `refusal` ends the call whatever else is known (the stamp, the tool, the arguments, a deny
    boundary). Past it, `call` and `verdict` are set; a correlation id that already has a
    decision record resumes that record before `held` (no implementation, arguments the tool
    refuses, no authority to ask) is applied. For a confirmation, `authority` is who would be
    asked and `learned` the exact learned choice that answers instead, if any.
    """

    context: _Context
    refusal: Stop | None = None
    verdict: Verdict | None = None
    call: ToolCall | None = None
    held: Stop | None = None
    authority: confirmations.Authority | None = None
    learned: PromptRegistryEntry | None = None


def decide(
    persona: Persona,
    tool_name: str,
    arguments: dict[str, Any] | None,
    correlation_id: str,
    *,
    dry_run: bool = False,
    under: ActiveStamp | None = None,
) -> Decision:
    """The decision phase of handle(), up to the point of effect: it writes nothing.

    `dry_run` (runtime.explain) also leaves the machine as it found it: the stamp is read
    without materialising or quarantining its file, and the workspace is looked at without its
    root being made. A real call does both on the way, as it always has.

    `under` (a dry run only) is a stamp to decide under in place of the persona's active one:
    the stamp a grant proposal would make, which runtime.vectors replays a persona's vectors
    against before anything is approved.
    """
    if under is not None and not dry_run:
        raise ValueError("only a dry run decides under a stamp other than the active one")
    context = _Context(persona, str(tool_name), str(correlation_id))
    if not isinstance(correlation_id, str) or not _CORRELATION_ID.match(correlation_id):
        return Decision(
            context, Stop("invalid_correlation_id", "correlation id must be 1-200 safe chars")
        )
    try:
        stamp = under or load_active_stamp(persona, dry_run=dry_run)
    except StampUnavailable as exc:
        return Decision(context, Stop(exc.code, exc.reason, quarantined=exc.quarantined))
    context = _Context(persona, tool_name, correlation_id, stamp)
    tool = stamp.tools.get(tool_name)
    if tool is None:
        return Decision(
            context,
            Stop("not_granted", f"tool {tool_name} is not granted to persona {persona.uuid}"),
        )
    binding, space = stamp.binding_for(tool), stamp.workspace_for(tool)
    context = _Context(persona, tool_name, correlation_id, stamp, tool)
    declared = _declared(tool.action)
    try:
        op = normalise(
            tool=tool.name,
            action=tool.action,
            arguments=arguments,
            binding=binding,
            workspace=space,
            declaration=declared.params if declared else None,
            look_only=dry_run,
        )
    except InvalidArgument as exc:
        return Decision(context, Stop(InvalidOperation.code, exc.reason))
    except OSError as exc:
        # Looking at the path on disk (creating the workspace root, resolving symlinks).
        return Decision(context, Stop("os_error", str(exc), os_error=exc))
    if declared is not None and declared.resolve is not None:
        op = op.with_resolved(declared.resolve(persona, op.arguments))
    context = _Context(persona, tool_name, correlation_id, stamp, tool, op)
    verdict = classify(op, binding, access=tool.access)
    if verdict.outcome is Outcome.DENY:
        return Decision(context, Stop("boundary_denied", verdict.reason, verdict), verdict)
    call = ToolCall(persona, stamp, tool, binding, space, op, correlation_id)
    decision = Decision(context, verdict=verdict, call=call)
    if HANDLERS.implementation(tool.action) is None:
        return dataclasses.replace(
            decision,
            held=Stop(
                "not_implemented",
                f"tool {tool_name} ({tool.action}) has no bound implementation in this runtime",
            ),
        )
    if declared is not None:
        # Nobody is asked about a call that cannot run, and explain foresees the tool's refusal
        # of its arguments: the parse the tool makes first, made here once more.
        try:
            Arguments(call, declared.params)
        except Invalid as exc:
            return dataclasses.replace(decision, held=Stop(exc.code, exc.reason, recorded=False))
    if verdict.outcome is not Outcome.CONFIRM:
        return decision
    try:
        authority = confirmations.route(stamp=stamp, persona=persona, verdict=verdict)
    except StampUnavailable as exc:
        # The stamp routes confirmations to nobody who may answer them: nothing can be asked.
        return dataclasses.replace(decision, held=Stop("stamp_unavailable", exc.reason, verdict))
    learned = registry.lookup(persona=persona, stamp=stamp, op=op)
    return dataclasses.replace(decision, authority=authority, learned=learned)


def handle(
    persona: Persona, tool_name: str, arguments: dict[str, Any] | None, correlation_id: str
) -> Result:
    decision = tracing.decided(decide(persona, tool_name, arguments, correlation_id))
    context = decision.context
    if decision.refusal is not None:
        return _stop(context, decision.refusal)
    call, verdict = decision.call, decision.verdict
    assert call is not None and verdict is not None
    # get(), not first(): an ORDER BY compiled on every call costs more than its query.
    try:
        existing = DecisionRecord.objects.get(correlation_id=correlation_id)
    except DecisionRecord.DoesNotExist:
        pass
    else:
        return _resume(context, existing, call)
    if decision.held is not None:
        return _stop(context, decision.held)
    if verdict.outcome is Outcome.CONFIRM:
        return _confirm(context, decision)
    return _execute(context, call)


# One span per call when tracing is configured (runtime.tracing). Wrapped here, not decorated:
# `make mutation`'s mutmut leaves decorated functions unmutated.
handle = tracing.traced_handle(handle)


def _stop(context: _Context, stop: Stop) -> Result:
    if stop.os_error is not None:
        return _os_failure(context, stop.os_error)
    if not stop.recorded:
        return _failure(context, stop.code, stop.reason)
    return _refuse(context, stop.code, stop.reason, stop.verdict)


def _declared(action: str) -> Tool | None:
    """The bound implementation with its declaration, if the action has one."""
    implementation = HANDLERS.implementation(action)
    return implementation if isinstance(implementation, Tool) else None


def _confirm(context: _Context, decision: Decision) -> Result:
    call, verdict, authority = decision.call, decision.verdict, decision.authority
    assert call is not None and verdict is not None and authority is not None
    entry = decision.learned
    try:
        with transaction.atomic():
            record = confirmations.request_confirmation(
                persona=call.persona,
                stamp=call.stamp,
                op=call.op,
                verdict=verdict,
                correlation_id=call.correlation_id,
                authority=authority,
            )
    except IntegrityError:
        # A concurrent call with the same correlation id wrote the record first: resume it.
        return _resume(
            context, DecisionRecord.objects.get(correlation_id=call.correlation_id), call
        )
    with transaction.atomic():
        if entry is None:
            audit_trail.confirmation_requested(record, call.persona)
            confirmations.notify_authority(record)
            logger.warning(
                "held for confirmation tool=%s persona=%s correlation=%s authority=%s",
                call.tool.name,
                call.persona.uuid,
                call.correlation_id,
                record.authority_label,
            )
            return _pending(record)
        approve = entry.choice == PromptRegistryEntry.Choice.APPROVE
        record.decision = (
            DecisionRecord.Decision.APPROVED if approve else DecisionRecord.Decision.DENIED
        )
        record.decided_via = DecisionRecord.Via.PROMPT_REGISTRY
        record.registry_entry = entry
        record.decided_at = timezone.now()
        record.save(update_fields=["decision", "decided_via", "registry_entry", "decided_at"])
        audit_trail.learned_choice_used(record, call.persona, entry)
    if not approve:
        return _refuse(
            context,
            "denied_by_learned_choice",
            f"a learned choice refuses this exact operation ({verdict.reason})",
            verdict,
        )
    return _run_once(context, record, call)


def _resume(context: _Context, record: DecisionRecord, call: ToolCall) -> Result:
    if record.requester_id != call.persona.pk or record.operation_digest != (
        confirmations.operation_digest(call.op)
    ):
        asked = record.operation.get("shape", {}).get("resolved", {})
        changed = record.requester_id == call.persona.pk and asked != call.op.resolved
        what = (
            f"what {record.tool_name} stood for when it was asked ({asked}) has changed since"
            if changed
            else f"correlation id {call.correlation_id} belongs to a different operation"
        )
        return _refuse(context, "correlation_mismatch", what)
    if record.executed_at is not None:
        return record.result or {}
    if record.decision == DecisionRecord.Decision.PENDING:
        return _pending(record)
    if record.decision == DecisionRecord.Decision.DENIED:
        return _refuse(context, "denied", f"{record.authority_label} refused this operation")
    if record.stamp_hash != call.stamp.stamp_hash:
        return _refuse(
            context,
            "stamp_changed",
            "the persona's stamp changed since this operation was confirmed; ask again",
        )
    return _run_once(context, record, call)


def _run_once(context: _Context, record: DecisionRecord, call: ToolCall) -> Result:
    """Run an approved operation under its decision record; a second call gets the same result."""
    with transaction.atomic():
        record = DecisionRecord.objects.select_for_update().get(pk=record.pk)
        if record.executed_at is not None:
            return record.result or {}
        result = _execute(context, call)
        if result.get("retryable"):
            # Not run for sure (an unknown outcome at the hub): the next call tries again.
            return result
        record.result = result
        record.executed_at = timezone.now()
        record.save(update_fields=["result", "executed_at"])
    return result


def _execute(context: _Context, call: ToolCall) -> Result:
    implementation = HANDLERS.implementation(call.tool.action)
    if implementation is None:
        return _refuse(context, "not_implemented", f"{call.tool.action} has no implementation")
    try:
        result = implementation(call)
    except WorkspaceError as exc:
        for kind, boundary in _REFUSING_ERRORS.items():
            if isinstance(exc, kind):
                verdict = (
                    Verdict(Outcome.DENY, boundary, exc.code, exc.reason) if boundary else None
                )
                return _refuse(context, exc.code, exc.reason, verdict)
        # A tool may add what a caller needs beyond code and reason (status, retryable).
        return {**_failure(context, exc.code, exc.reason), **getattr(exc, "details", {})}
    except OSError as exc:
        return _os_failure(context, exc)
    return {
        "ok": True,
        "tool": call.tool.name,
        "correlation_id": call.correlation_id,
        "result": result,
    }


def _pending(record: DecisionRecord) -> Result:
    return {
        "ok": False,
        "code": "confirmation_required",
        "status": "pending",
        "tool": record.tool_name,
        "boundary": record.boundary or None,
        "reason": record.reason,
        "authority": record.authority_label,
        "correlation_id": record.correlation_id,
        "retry": "call again with the same correlation_id once the authority has answered",
    }


def _failure(context: _Context, code: str, reason: str) -> Result:
    return {
        "ok": False,
        "code": code,
        "boundary": None,
        "reason": reason,
        "tool": context.tool_name,
        "correlation_id": context.correlation_id,
    }


def _os_failure(context: _Context, exc: OSError) -> Result:
    """An OS error as a recorded result: the kind, the errno's name, the persona's own path.

    The message never carries the error's file name: that is the server's absolute path.
    """
    name = errno.errorcode.get(exc.errno or 0, "EUNKNOWN")
    path = context.op.target.get("path") if context.op else None
    where = f" on {path!r}" if path else ""
    reason = f"the file system refused {context.tool_name}{where}: {exc.strerror or name} ({name})"
    result = _refuse(context, _OS_ERROR_CODES.get(exc.errno or 0, "os_error"), reason)
    return {**result, "errno": name, "retryable": exc.errno in _TRANSIENT_ERRNOS}


def _refuse(context: _Context, code: str, reason: str, verdict: Verdict | None = None) -> Result:
    boundary = verdict.boundary.value if verdict and verdict.boundary else None
    reason = redact_text(reason)
    RefusalRecord.objects.create(
        persona=context.persona,
        tool_name=context.tool_name[:100],
        handler_action=context.tool.action if context.tool else "",
        code=code,
        boundary=boundary or "",
        rule=verdict.rule if verdict else "",
        reason=reason,
        operation=context.op.recorded() if context.op else None,
        stamp_hash=context.stamp.stamp_hash if context.stamp else "",
        correlation_id=context.correlation_id[:200],
    )
    audit_trail.call_refused(
        context.persona,
        context.tool_name[:100],
        code=code,
        reason=reason,
        boundary=boundary,
        rule=verdict.rule if verdict else "",
        correlation_id=context.correlation_id,
    )
    logger.warning(
        "refused tool=%s persona=%s code=%s boundary=%s correlation=%s: %s",
        context.tool_name,
        context.persona.uuid,
        code,
        boundary or "-",
        context.correlation_id,
        reason,
    )
    return {
        "ok": False,
        "code": code,
        "boundary": boundary,
        "reason": reason,
        "tool": context.tool_name,
        "correlation_id": context.correlation_id,
    }
