"""A draft persona from an existing A2A agent card (`virgo persona import-card`, the admin page).

The card is fetched with the a2a-sdk's own resolver (`A2ACardResolver`) over an httpx client
whose transport is Virgo's outbound guard: every request goes to an address `virgo.outbound`
checked and pinned (loopback, private, link-local and metadata addresses refused unless
VIRGO_OUTBOUND_ALLOWED_NETWORKS allows them; a name that resolves elsewhere a moment later
changes nothing), within CARD_TIMEOUT seconds and CARD_LIMIT bytes counted as the body streams
in. A file is read with the same bound. v1.0 and 0.3 cards are both read through the SDK's
`parse_agent_card`, which maps 0.3's fields onto 1.0's.

Each card skill is matched to a skill of Virgo's verb->skill map (by id, then by name, case
ignored); the verbs it requires are taken when the agent's grant has them all and the class may
have them. The persona is a draft (`personas.services.persona_draft`): name and description from
the card, no system prompt (its owner writes it), not discoverable, its grant a proposal waiting
for its owner. The card's provider is never read: a card names whoever its author liked, and the
persona's provider is its owner's identity like every other persona's.

Every refusal is one CardImportError naming one field (the input, `url` or `file`, or the card's
own field as `card.<path>`) and the reason, before anything is written (VX-GRANT-4): a URL the
HTTP client cannot parse, an answer that is not application/json, bytes that are not UTF-8 JSON,
an array or a string, JSON nested deeper than CARD_DEPTH (before any JSON decoder or the SDK
recurses into it), a shape the SDK's 0.3 mapping would trip on, what the SDK's parse refuses,
and what a persona cannot take (a name too long, a NUL, too many skills).
"""

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Any

import httpx
from a2a.client.card_resolver import A2ACardResolver, parse_agent_card
from a2a.client.errors import AgentCardResolutionError
from a2a.types.a2a_pb2 import AgentCard
from asgiref.sync import async_to_sync
from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils.module_loading import import_string
from google.protobuf.json_format import ParseError

from personas import audit, services
from personas.models import Agent, AuditEvent, GrantProposal, Persona, PersonaClass, Skill
from virgo import auditing, outbound

CARD_TIMEOUT = 5.0
CARD_LIMIT = 256 * 1024
# Arrays and objects inside one another. A v1.0 card needs about 8 (securityRequirements inside a
# skill); extension params are free-form, and Python's JSON decoder recurses once per level.
CARD_DEPTH = 32
URL_LIMIT = 2048
SKILL_LIMIT = 100
SKILL_TEXT_LIMIT = 200
WELL_KNOWN_PATH = "/.well-known/agent-card.json"
NAME_LIMIT = Persona._meta.get_field("name").max_length or 120

logger = logging.getLogger(__name__)


class CardImportError(ValueError):
    """The card could not be read or used: one field and the reason, `str()` as `field: reason`
    on one line. The field is the input (`url`, `file`, `agent`) or the card's own field
    (`card`, `card.name`, `card.skills[2]`)."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = " ".join(reason.split())
        super().__init__(f"{field}: {self.reason}")


@dataclass(frozen=True, slots=True)
class UnmappedSkill:
    id: str
    name: str
    reason: str


@dataclass(frozen=True, slots=True)
class SkillMapping:
    """What the card's skills come to on an agent: the verbs taken and the skills left out."""

    verbs: tuple[str, ...]
    mapped: tuple[tuple[str, str], ...]  # (card skill id, Virgo skill slug)
    unmapped: tuple[UnmappedSkill, ...]


@dataclass(frozen=True, slots=True)
class CardImport:
    persona: Persona
    proposal: GrantProposal
    mapping: SkillMapping


# Reading the card ------------------------------------------------------------------------------


class _BoundedStream(httpx.AsyncByteStream):
    """The response body, refused once it passes `limit` bytes: never read whole first."""

    def __init__(self, inner: httpx.AsyncByteStream, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                raise CardImportError("url", f"the card is larger than {self._limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class GuardedTransport(httpx.AsyncBaseTransport):
    """Sends each request to the address virgo.outbound checked for its URL, pinned (Host and
    TLS server name kept), and bounds what comes back."""

    def __init__(self, limit: int = CARD_LIMIT) -> None:
        self._inner = httpx.AsyncHTTPTransport(verify=outbound.tls_verify())
        self._limit = limit

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        target = await asyncio.to_thread(outbound.destination, str(request.url), what="url")
        request.url = target.pinned
        request.headers["Host"] = target.host_header
        request.extensions = {**request.extensions, **target.extensions}
        response = await self._inner.handle_async_request(request)
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        length = response.headers.get("content-length", "")
        problem = None
        if encoding not in ("", "identity"):
            # Decompressed, a small body can be any size: only what is counted is read.
            problem = f"the card is sent {encoding}-encoded; only an uncompressed card is read"
        elif length.isdigit() and int(length) > self._limit:
            problem = f"the card is larger than {self._limit} bytes ({length})"
        elif response.is_success:
            problem = _content_type_problem(response.headers.get("content-type", ""))
        if problem:
            await response.aclose()
            raise CardImportError("url", problem)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        stream = _BoundedStream(response.stream, self._limit)
        if not response.is_success:
            # The resolver reads only the status of a refusal.
            return httpx.Response(
                status_code=response.status_code,
                headers=response.headers,
                stream=stream,
                extensions=response.extensions,
            )
        try:
            body = b"".join([chunk async for chunk in stream])
        finally:
            await response.aclose()
        # Vetted here, before the resolver decodes it: nesting, size and shape the JSON decoder
        # or the SDK's own mapping would fail on with something other than their usual errors.
        read_document(body)
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            content=body,
            extensions=response.extensions,
        )


def _content_type_problem(content_type: str) -> str | None:
    """A card is served as application/json (A2A); application/<anything>+json is JSON too."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    ):
        return None
    if not media:
        return "answered no Content-Type; a card is served as application/json"
    return f"answered Content-Type {media}, not application/json"


def checked_url(url: str) -> httpx.URL:
    """The URL as the HTTP client will send it, or the reason it cannot be sent.

    httpx refuses some spellings of a host only when a request is built (an octal IPv4 address,
    a character IDNA does not allow, a malformed A-label) and the port only when it connects: each
    is refused here, by the field, before the outbound guard or the SDK's resolver sees it.
    """
    if len(url) > URL_LIMIT:
        raise CardImportError("url", f"longer than {URL_LIMIT} characters")
    try:
        parts = httpx.URL(url)
        host, port = parts.host, parts.port  # .host decodes IDNA: what fails there fails now
    except (httpx.InvalidURL, UnicodeError, ValueError, TypeError) as error:
        raise CardImportError(
            "url", f"{url!r} is not a URL the client can send to ({error})"
        ) from None
    if parts.scheme not in ("http", "https"):
        shown = f", not {parts.scheme!r}" if parts.scheme else ""
        raise CardImportError("url", f"only http(s) URLs are fetched{shown}")
    if not host:
        raise CardImportError("url", "has no host")
    if port is not None and not 0 < port < 65536:
        raise CardImportError("url", f"port {port} is not a TCP port (1 to 65535)")
    return parts


def _card_location(url: str) -> tuple[str, str]:
    """The resolver's base URL and path: a URL with no path means the card's well-known path."""
    parts = checked_url(url)
    if parts.path in ("", "/") and not parts.query:
        return url.rstrip("/"), WELL_KNOWN_PATH
    return url, ""


async def _resolve(base: str, path: str) -> AgentCard:
    async with httpx.AsyncClient(
        transport=GuardedTransport(),
        timeout=CARD_TIMEOUT,
        follow_redirects=False,
        headers={"Accept": "application/json", "Accept-Encoding": "identity"},
    ) as client:
        resolver = A2ACardResolver(client, base, agent_card_path=path)
        return await asyncio.wait_for(resolver.get_agent_card(), CARD_TIMEOUT)


def _resolution_problem(error: AgentCardResolutionError) -> CardImportError:
    cause = error.__cause__
    if isinstance(cause, httpx.HTTPStatusError):
        return CardImportError("url", f"answered HTTP {cause.response.status_code}, not a card")
    if isinstance(cause, json.JSONDecodeError):
        return CardImportError("card", f"not JSON ({cause.msg} at line {cause.lineno})")
    if isinstance(cause, ParseError):
        return _sdk_problem(cause)
    if isinstance(cause, httpx.TimeoutException):
        return CardImportError("url", f"no answer within {CARD_TIMEOUT:g} s")
    if isinstance(cause, httpx.RequestError):
        return CardImportError("url", f"could not be fetched ({type(cause).__name__})")
    return CardImportError("url", str(error))


def fetch_card(url: str) -> AgentCard:
    """The card at `url` (http or https), through the SDK's resolver and the outbound guard."""
    base, path = _card_location(url)
    try:
        card: AgentCard = async_to_sync(_resolve)(base, path)
    except CardImportError:
        raise
    except outbound.DestinationRefused as refused:
        field, _, reason = str(refused).partition(": ")
        raise CardImportError(field, reason) from None
    except AgentCardResolutionError as error:
        raise _resolution_problem(error) from None
    except TimeoutError:
        raise CardImportError("url", f"no complete answer within {CARD_TIMEOUT:g} s") from None
    except Exception as error:
        # The fetch talks to a stranger's server through httpx, httpcore and anyio; whatever
        # else they raise (an ExceptionGroup from a connect, an error of the TLS layer) is still
        # this URL failing to give a card, not a fault of the import. Logged whole, answered
        # as one line.
        logger.warning("card import: fetching %s failed", url, exc_info=True)
        raise CardImportError("url", f"could not be fetched ({type(error).__name__})") from None
    return _checked(card)


# Linear, with no backtracking to speak of: escapes go first, so a string is `"[^"]*"`. (Matching
# a string with its escapes in one expression backtracks quadratically on `"\\` repeated.)
_ESCAPE = re.compile(r"\\.", re.DOTALL)
_STRING = re.compile(r'"[^"]*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _deeper_than(text: str, limit: int) -> bool:
    """Whether JSON text nests arrays and objects deeper than `limit`, found without decoding it
    (a bracket inside a string does not count)."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", _ESCAPE.sub("", text)))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > limit


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if value is None:
        return "null"
    return "a number"


def _objects(value: Any, field: str) -> None:
    if not isinstance(value, list):
        raise CardImportError(field, f"a list of objects is expected, not {_kind(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise CardImportError(f"{field}[{index}]", f"an object is expected, not {_kind(item)}")


def _shape(document: dict[str, Any]) -> None:
    """What the SDK's 0.3 mapping (a2a.client.card_resolver.parse_agent_card) reads before its
    own parse, in the shape it reads it: any other shape fails inside the mapping with a
    TypeError that names no field."""
    for field in ("skills", "additionalInterfaces", "security"):
        if field in document:
            _objects(document[field], f"card.{field}")
    for index, skill in enumerate(document.get("skills", [])):
        if "security" in skill:
            _objects(skill["security"], f"card.skills[{index}].security")
    schemes = document.get("securitySchemes", {})
    if not isinstance(schemes, dict):
        raise CardImportError(
            "card.securitySchemes", f"an object is expected, not {_kind(schemes)}"
        )
    for name, scheme in schemes.items():
        if not isinstance(scheme, dict):
            raise CardImportError(
                f"card.securitySchemes.{name}", f"an object is expected, not {_kind(scheme)}"
            )
    capabilities = document.get("capabilities", {})
    if not isinstance(capabilities, dict):
        raise CardImportError(
            "card.capabilities", f"an object is expected, not {_kind(capabilities)}"
        )


def read_document(data: bytes, *, source: str = "url") -> dict[str, Any]:
    """The card's JSON object from its bytes, bounded in size and nesting before it is decoded;
    `source` is the input that carried it (`url` or `file`)."""
    if len(data) > CARD_LIMIT:
        raise CardImportError(source, f"the card is larger than {CARD_LIMIT} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CardImportError("card", "not UTF-8 JSON") from None
    if _deeper_than(text, CARD_DEPTH):
        raise CardImportError(
            "card", f"nested deeper than {CARD_DEPTH} levels of arrays and objects"
        )
    try:
        document: Any = json.loads(text)
    except json.JSONDecodeError as error:
        raise CardImportError("card", f"not JSON ({error.msg} at line {error.lineno})") from None
    except ValueError as error:
        # An integer of more than 4,300 digits (Python's own bound) is not a JSONDecodeError.
        raise CardImportError("card", f"not JSON that can be read ({error})") from None
    if not isinstance(document, dict):
        raise CardImportError("card", f"a JSON object is expected, not {_kind(document)}")
    _shape(document)
    return document


_SDK_FIELD = re.compile(r"Failed to parse (\w+) field: (.*)", re.DOTALL)


def _sdk_problem(error: ParseError) -> CardImportError:
    """The SDK's (protobuf's) refusal, its chain of "Failed to parse X field: " read as the
    card's field path."""
    path, reason = ["card"], str(error)
    while match := _SDK_FIELD.fullmatch(reason):
        path.append(match[1])
        reason = match[2]
    if len(path) == 1:
        return CardImportError("card", f"not an A2A agent card ({reason})")
    return CardImportError(".".join(path), reason.rstrip("."))


def parse_card(data: bytes, *, source: str = "file") -> AgentCard:
    """A card from its JSON bytes (v1.0, or 0.3 mapped by the SDK)."""
    document = read_document(data, source=source)
    try:
        card = parse_agent_card(document)
    except ParseError as error:
        raise _sdk_problem(error) from None
    return _checked(card)


def read_card_file(path: Path) -> AgentCard:
    try:
        with path.open("rb") as file:
            data = file.read(CARD_LIMIT + 1)
    except OSError as error:
        raise CardImportError("file", f"cannot read {path} ({error.strerror})") from None
    except ValueError as error:  # a NUL in the path
        raise CardImportError("file", f"cannot read {str(path)!r} ({error})") from None
    return parse_card(data, source="file")


def load_card(source: str) -> AgentCard:
    """The card at an http(s) URL, or in a file; any other scheme is refused."""
    if source.lower().startswith(("http://", "https://")):
        return fetch_card(source)
    if "://" in source:
        scheme = source.split("://", 1)[0]
        raise CardImportError("url", f"only http(s) URLs are fetched, not {scheme!r}")
    return read_card_file(Path(source))


def _checked(card: AgentCard) -> AgentCard:
    """What makes the parsed message a card (the SDK ignores unknown fields, so `{}` parses) that
    a persona can take."""
    if not card.name.strip():
        raise CardImportError("card.name", "missing; this is not an A2A agent card")
    if not card.supported_interfaces:
        raise CardImportError(
            "card.supportedInterfaces",
            "missing (or url, in a 0.3 card); this is not an A2A agent card",
        )
    if len(card.name) > NAME_LIMIT:
        raise CardImportError("card.name", f"longer than the {NAME_LIMIT} characters a persona has")
    # No database Virgo runs on keeps a NUL in text (PostgreSQL refuses it); the API refuses it
    # in the same fields (virgo.api.ANY_TEXT).
    for field, text in (("card.name", card.name), ("card.description", card.description)):
        if "\x00" in text:
            raise CardImportError(field, "must not contain a NUL character")
    if len(card.skills) > SKILL_LIMIT:
        raise CardImportError("card.skills", f"more than {SKILL_LIMIT} skills")
    for index, skill in enumerate(card.skills):
        if not (skill.id.strip() or skill.name.strip()):
            raise CardImportError(f"card.skills[{index}]", "has neither an id nor a name")
        for field, text in (("id", skill.id), ("name", skill.name)):
            if len(text) > SKILL_TEXT_LIMIT:
                raise CardImportError(
                    f"card.skills[{index}].{field}", f"longer than {SKILL_TEXT_LIMIT} characters"
                )
    return card


# Mapping its skills ----------------------------------------------------------------------------


def _match(card_id: str, card_name: str, skill_map: list[Skill]) -> Skill | None:
    by_id = {skill.slug.casefold(): skill for skill in skill_map}
    by_name = {skill.name.casefold(): skill for skill in skill_map}
    if card_id.strip() and card_id.strip().casefold() in by_id:
        return by_id[card_id.strip().casefold()]
    if card_name.strip():
        return by_name.get(card_name.strip().casefold())
    return None


def map_skills(
    card: AgentCard, *, agent: Agent, persona_class: str, skill_map: list[Skill]
) -> SkillMapping:
    """Each card skill as a skill of the map whose verbs the agent's grant and the class allow."""
    verbs: set[str] = set()
    mapped: list[tuple[str, str]] = []
    unmapped: list[UnmappedSkill] = []
    refused = import_string(settings.VIRGO_CLASS_REFUSALS)(persona_class)
    for card_skill in card.skills:
        skill = _match(card_skill.id, card_skill.name, skill_map)
        reason = None
        if skill is None:
            reason = "no skill of Virgo's skill map has this id or name"
        else:
            outside = [v for v in skill.required_verbs if v not in agent.granted_verbs]
            barred = [v for v in skill.required_verbs if v in refused]
            if outside:
                reason = (
                    f"skill {skill.slug!r} needs verbs outside agent {agent.name!r}'s grant: "
                    f"{', '.join(outside)}"
                )
            elif barred:
                reason = (
                    f"skill {skill.slug!r} needs verbs a {persona_class} may not have: "
                    f"{', '.join(barred)}"
                )
        if reason is not None:
            unmapped.append(UnmappedSkill(card_skill.id, card_skill.name, reason))
            continue
        assert skill is not None
        verbs.update(skill.required_verbs)
        mapped.append((card_skill.id or card_skill.name, skill.slug))
    return SkillMapping(tuple(sorted(verbs)), tuple(mapped), tuple(unmapped))


# The draft -------------------------------------------------------------------------------------


@audit.action
def import_card(
    card: AgentCard,
    *,
    agent: Agent,
    actor: AbstractBaseUser | AnonymousUser,
    persona_class: str,
    address: Any,
    source: str = "",
) -> CardImport:
    """The draft persona the card describes, on the actor's own agent, and its grant proposal.

    Its verb subset is the class's required tools (without them no persona of the class stands)
    and the verbs of the mapped skills. Raises PermissionDenied for another owner's agent,
    ValidationError (field and reason) for what the records refuse, CardImportError when the
    agent's grant lacks a required tool; nothing is written then. `source` (the URL or file it
    came from) is kept in the audit event.
    """
    if not actor.is_authenticated or agent.owner_id != actor.pk:
        raise PermissionDenied("only the agent's owner may make a persona on it")
    if persona_class not in PersonaClass.values:
        raise ValidationError(
            {"persona_class": [f"one of {', '.join(PersonaClass.values)}, not {persona_class!r}"]}
        )
    required = import_string(settings.VIRGO_CLASS_REQUIRED_TOOLS)(persona_class)
    lacking = [verb for verb in required if verb not in agent.granted_verbs]
    if lacking:
        raise CardImportError(
            "agent",
            f"{agent.name!r}'s grant lacks the required tools of a {persona_class}: "
            f"{', '.join(lacking)}",
        )
    mapping = map_skills(
        card,
        agent=agent,
        persona_class=persona_class,
        skill_map=list(services.current_skill_map().skills),
    )
    with transaction.atomic(), auditing.channel(auditing.IMPORT):
        change = services.persona_draft(
            agent=agent,
            actor=actor,
            via=GrantProposal.Via.IMPORT,
            without_prompt=True,
            name=card.name.strip(),
            description=card.description.strip(),
            persona_class=persona_class,
            address=address,
            verb_subset=sorted(set(required) | set(mapping.verbs)),
        )
        audit.record(
            AuditEvent.Kind.CARD_IMPORTED,
            actor=actor,
            persona=change.persona,
            data={
                "name": change.persona.name,
                "persona": str(change.persona.uuid),
                "source": source or "(not said)",
                "skills_taken": [slug for _, slug in mapping.mapped],
                "skills_left_out": len(mapping.unmapped),
                "held": True,
            },
        )
    assert change.proposal is not None
    return CardImport(change.persona, change.proposal, mapping)
