"""The active stamp of a persona, as every runtime consumer reads it: from the file, verified.

The bytes of the active generation's CAPABILITY-STAMP.json are read on every load and hashed;
they must equal the hash of the generation's stored stamp (the immutable row, stamps.models), so
an altered file is refused, not trusted, whatever else in the database was changed beside it,
and its persona is quarantined (stamps.quarantine).
Only then are the three projections derived (stamps.projections), from those exact bytes.
Validation of a given hash is done once per process: the same bytes always validate the same way.

A process keeps each persona's verified stamp under its change token (virgo.persona_tokens), read
before the database is: while the token is unchanged, no generation, standing or revocation of the
persona has changed, so a call reads only the token and the file's bytes, and compares them with
the bytes kept (VX-REMOTE-2). A token that moved, a file that differs or is gone, or an entry older
than VIRGO_CARD_PROCESS_CACHE_SECONDS takes the whole load again. Inside a transaction nothing is
kept or used: what it reads may yet be rolled back, and its token moves would be too.
"""

import hashlib
import time
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, NoReturn

import rfc8785
from django.core.signals import setting_changed
from django.db import connections, router
from django.db.models import F

from personas.models import Generation, GrantProposal, Persona
from runtime.operations import Binding
from runtime.tools.workspace import Workspace, workspace_root
from stamps.integrity import stamp_file_messages
from stamps.models import StampNotVerifiable, stored_stamp_of
from stamps.problems import StampRejected
from stamps.projections import HandlerRule, project
from stamps.quarantine import FoundBy, is_quarantined, materialise, quarantine, settle
from stamps.storage import stamp_path
from stamps.validation import validate_stamp
from virgo import persona_tokens
from virgo.canonical import MalformedStamp, parse_strict, stamp_bytes
from virgo.persona_tokens import Token


class StampUnavailable(Exception):
    """The persona has no usable stamp: nothing may be served or launched for it.

    `code` is what a refused tool call says: `revoked` for a revoked persona or generation.
    `quarantined`: the generation is quarantined, or its file was just found at fault (which
    quarantines it, unless the load was a dry run).
    """

    def __init__(
        self, reason: str, code: str = "stamp_unavailable", *, quarantined: bool = False
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code
        self.quarantined = quarantined


@dataclass(frozen=True, slots=True)
class StampTool:
    name: str
    action: str
    access: str
    scope: dict[str, Any]
    boundary: str | None


@dataclass(frozen=True)
class ActiveStamp:
    persona_uuid: str
    generation: int
    data: bytes
    document: dict[str, Any]
    stamp_hash: str
    mcp_tools: tuple[str, ...]
    handlers: dict[str, HandlerRule]
    allowlist: tuple[str, ...]

    @cached_property
    def tools(self) -> dict[str, StampTool]:
        """The handler table, indexed by tool name (the name a consumer is called with)."""
        return {
            rule.tool: StampTool(rule.tool, action, rule.access, rule.scope, rule.boundary)
            for action, rule in self.handlers.items()
        }

    @property
    def persona_class(self) -> str:
        return self.document["persona"]["class"]

    @property
    def human_owner(self) -> str:
        return self.document["authority"]["human"]["owner"]

    @property
    def owning_lead(self) -> str | None:
        return self.document["authority"]["owning_lead"]

    @cached_property
    def profile_hash(self) -> str:
        """What personas of one class with the same tools share: the class overlay's key."""
        profile = {
            "class": self.persona_class,
            "tools": sorted([tool.name, tool.action, tool.access] for tool in self.tools.values()),
        }
        return hashlib.sha256(rfc8785.dumps(profile)).hexdigest()

    def binding_for(self, tool: StampTool) -> Binding:
        """The explicit binding the handler authorizes this tool within: the tool's own scope."""
        workspace = self.document["bindings"]["workspace"]
        return Binding(
            persona=self.persona_uuid,
            workspace=tool.scope["workspace"],
            project=tool.scope["project"],
            queues=tuple(tool.scope.get("queues", ())),
            mutable_paths=tuple(workspace["mutable_paths"]),
            surfaces=tuple(tool.scope.get("surfaces", ())),
        )

    def workspace_root(self) -> Path:
        """The directory of the persona's workspace binding."""
        binding = self.document["bindings"]["workspace"]
        return workspace_root(
            workspace=binding["workspace"],
            project=binding["project"],
            persona_uuid=self.persona_uuid,
        )

    def workspace_for(self, tool: StampTool) -> Workspace:
        """The persona's workspace as this tool may touch it.

        A writing tool may write only the paths of its scope; a reading tool reports which paths
        of the binding are mutable.
        """
        binding = self.document["bindings"]["workspace"]
        writable = tool.scope.get("paths", ()) if tool.action == "workspace.write" else ()
        return Workspace(
            root=self.workspace_root(),
            mutable_paths=tuple(writable or binding["mutable_paths"]),
            readable_paths=tuple(tool.scope.get("paths", ())),
        )


_validated: dict[str, tuple[str, ...]] = {}


@dataclass(frozen=True, slots=True)
class _Kept:
    token: str | None
    expires: float
    path: Path
    stamp: ActiveStamp


# How many personas' stamps one process keeps; a stamp is a few KB.
MAX_KEPT = 4096
_kept: dict[str, _Kept] = {}


def load_active_stamp(persona: Persona, *, dry_run: bool = False) -> ActiveStamp:
    """The verified stamp of the persona's current generation, or StampUnavailable saying why:
    the one this process keeps, while the persona's token and the file's bytes are unchanged,
    else read_active_stamp's."""
    key = str(persona.uuid)
    if connections[router.db_for_read(Generation)].in_atomic_block:
        return read_active_stamp(persona, dry_run=dry_run)
    token = persona_tokens.read(key)
    kept = _kept.get(key)
    if kept is not None and kept.token == token and kept.expires > time.monotonic():
        try:
            data = kept.path.read_bytes()
        except OSError:
            data = None
        if data == kept.stamp.data:
            return kept.stamp
    stamp = read_active_stamp(persona, dry_run=dry_run)
    if token is not Token.UNREAD:
        if key not in _kept and len(_kept) >= MAX_KEPT:
            _kept.pop(next(iter(_kept)))
        _kept[key] = _Kept(
            token=token,
            expires=time.monotonic() + persona_tokens.kept_seconds(),
            path=stamp_path(persona.uuid, stamp.generation),
            stamp=stamp,
        )
    return stamp


def _forget_kept(**kwargs: Any) -> None:
    _kept.clear()


setting_changed.connect(_forget_kept)


def read_active_stamp(persona: Persona, *, dry_run: bool = False) -> ActiveStamp:
    """The verified stamp of the persona's current generation, from the database and the file,
    or StampUnavailable saying why.

    A file this machine does not have yet is materialised from the stored stamp (the immutable
    row) and served: stamp files are per machine, written where a persona runs (VX-SCALE-2). A
    file that exists and differs, or any other fault of the file, quarantines the generation
    (stamps.quarantine, VX-OPS-4) before it is refused, so its card is withdrawn too and the
    next load refuses at once, naming the reason.

    `dry_run` (runtime.explain) reaches the same answer and changes nothing: a missing file is
    read from the stored stamp, not written, and a fault is refused without quarantining.
    """
    label = f"persona {persona.uuid}"
    # The persona's current generation as committed, whatever the caller's instance remembers.
    generation = (
        Generation.objects.filter(persona_id=persona.pk, number=F("persona__generation"))
        .select_related("persona", "stamp")
        .first()
    )
    if generation is None:
        raise StampUnavailable(f"{label} has no current generation")
    revoked = revocation_of(generation)
    if revoked:
        raise StampUnavailable(f"{label} {revoked}", code="revoked")
    if generation.standing is not True or generation.persona.standing is not True:
        raise StampUnavailable(
            f"{label} is not standing (generation {generation.number}): "
            f"{why_not_standing(generation)}",
            quarantined=is_quarantined(generation),
        )
    try:
        stored = stored_stamp_of(generation)
    except StampNotVerifiable as exc:
        if not dry_run:
            _quarantine(generation, str(exc))
        raise StampUnavailable(
            f"{label} (generation {generation.number}): {exc}", quarantined=True
        ) from None
    path = stamp_path(persona.uuid, generation.number)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        try:
            data = stored.data if dry_run else materialise(generation, stored)
        except OSError as exc:
            reason = f"{label}: stamp file {path} is missing and cannot be written: {exc}"
            raise StampUnavailable(reason) from None
    except OSError as exc:
        reason = f"{label}: stamp file {path} cannot be read: {exc.strerror}"
        raise StampUnavailable(reason) from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != stored.stamp_hash:
        _refuse(
            generation,
            f"{label}: stamp file {path} was altered (sha256 {digest}, stored {stored.stamp_hash})",
            dry_run=dry_run,
        )
    try:
        document = parse_strict(data)
    except MalformedStamp as exc:
        _refuse(generation, f"{label}: stamp file {path} is malformed: {exc}", dry_run=dry_run)
    if digest not in _validated:
        try:
            validate_stamp(document)
        except StampRejected as exc:
            _refuse(generation, f"{label}: stamp file {path} is invalid: {exc}", dry_run=dry_run)
        _validated[digest] = ()
    if document["persona"]["id"] != str(persona.uuid):
        _refuse(
            generation, f"{label}: stamp file {path} belongs to another persona", dry_run=dry_run
        )
    projections = project(data)
    return ActiveStamp(
        persona_uuid=str(persona.uuid),
        generation=generation.number,
        data=data,
        document=document,
        stamp_hash=digest,
        mcp_tools=projections.mcp_tools,
        handlers=projections.handlers,
        allowlist=projections.allowlist,
    )


def composed_stamp(persona: Persona, number: int, document: dict[str, Any]) -> ActiveStamp:
    """A stamp the factory composed and nobody wrote (the one a grant proposal would make), as
    the consumers would read it once written: its canonical bytes and their projections. Only
    ever decided under as a dry run (runtime.handler.decide's `under`)."""
    data = stamp_bytes(document)
    projections = project(data)
    return ActiveStamp(
        persona_uuid=str(persona.uuid),
        generation=number,
        data=data,
        document=document,
        stamp_hash=hashlib.sha256(data).hexdigest(),
        mcp_tools=projections.mcp_tools,
        handlers=projections.handlers,
        allowlist=projections.allowlist,
    )


MISSING_TOOL = "not standing: missing tool "


def why_not_standing(generation: Generation) -> str:
    """Why the generation does not stand, in the owner's words (VX-OPS-11): a grant waiting for
    their approval says which proposal and where to approve it; the tools a class misses are
    one list, not a line each."""
    proposal = (
        GrantProposal.objects.filter(
            persona_id=generation.persona_id, status=GrantProposal.Status.PENDING
        )
        .order_by("-pk")
        .first()
    )
    if proposal is not None and proposal.decidable:
        return (
            f"its grant waits for your approval: proposal {proposal.pk}, approve it at "
            f"{proposal.review_url}"
        )
    missing = [
        r[len(MISSING_TOOL) :]
        for r in generation.not_standing_reasons
        if r.startswith(MISSING_TOOL)
    ]
    others = [r for r in generation.not_standing_reasons if not r.startswith(MISSING_TOOL)]
    if missing:
        others.append(f"missing the tools its class requires: {', '.join(missing)}")
    return "; ".join(others) or "its stamp is not built yet"


def revocation_of(generation: Generation) -> str:
    """In words, the revocation of the generation or of its whole persona; empty if none."""
    persona = generation.persona
    if persona.revoked_at is not None:
        return (
            f"is revoked (the whole persona, at {persona.revoked_at.isoformat()}, reason "
            f"{persona.revocation_reason}): nothing runs for it again"
        )
    if generation.revoked_at is not None:
        return (
            f"is revoked (generation {generation.number}, at "
            f"{generation.revoked_at.isoformat()}, reason {generation.revocation_reason}): "
            "nothing runs for it until its owner makes a new generation"
        )
    return ""


def _refuse(generation: Generation, reason: str, *, dry_run: bool) -> NoReturn:
    if not dry_run:
        _quarantine(generation, reason.partition(": ")[2])
    raise StampUnavailable(reason, quarantined=True) from None


def _quarantine(generation: Generation, reason: str) -> None:
    """Quarantine for every fault the full verification names, or for `reason` when it names
    none (a stored stamp of another persona is only seen here)."""
    found = [message for message in stamp_file_messages(generation) if message.is_serious()]
    if found:
        settle(generation, found, found_by=FoundBy.LOAD)
    else:
        quarantine(generation, [reason], found_by=FoundBy.LOAD)
