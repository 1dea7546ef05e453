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
"""

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from a2a.client.card_resolver import A2ACardResolver, parse_agent_card
from a2a.client.errors import AgentCardResolutionError
from a2a.types.a2a_pb2 import AgentCard
from asgiref.sync import async_to_sync
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from google.protobuf.json_format import ParseError

from personas import services
from personas.models import Agent, GrantProposal, Persona, PersonaClass, Skill
from stamps.profiles import class_may_have, required_tools
from virgo import outbound

CARD_TIMEOUT = 5.0
CARD_LIMIT = 256 * 1024
WELL_KNOWN_PATH = "/.well-known/agent-card.json"
NAME_LIMIT = Persona._meta.get_field("name").max_length or 120


class CardImportError(ValueError):
    """The card could not be read or used; the message names the field and the reason."""


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
                raise CardImportError(f"url: the card is larger than {self._limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class GuardedTransport(httpx.AsyncBaseTransport):
    """Sends each request to the address virgo.outbound checked for its URL, pinned (Host and
    TLS server name kept), and bounds what comes back."""

    def __init__(self, limit: int = CARD_LIMIT) -> None:
        self._inner = httpx.AsyncHTTPTransport()
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
            problem = f"url: the card is sent {encoding}-encoded; only an uncompressed card is read"
        elif length.isdigit() and int(length) > self._limit:
            problem = f"url: the card is larger than {self._limit} bytes ({length})"
        if problem:
            await response.aclose()
            raise CardImportError(problem)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_BoundedStream(response.stream, self._limit),
            extensions=response.extensions,
        )


def _card_location(url: str) -> tuple[str, str]:
    """The resolver's base URL and path: a URL with no path means the card's well-known path."""
    parts = httpx.URL(url)
    if parts.path in ("", "/") and not parts.query:
        return url.rstrip("/"), WELL_KNOWN_PATH
    return url, ""


async def _resolve(url: str) -> AgentCard:
    base, path = _card_location(url)
    async with httpx.AsyncClient(
        transport=GuardedTransport(),
        timeout=CARD_TIMEOUT,
        follow_redirects=False,
        headers={"Accept": "application/json", "Accept-Encoding": "identity"},
    ) as client:
        resolver = A2ACardResolver(client, base, agent_card_path=path)
        return await asyncio.wait_for(resolver.get_agent_card(), CARD_TIMEOUT)


def _resolution_problem(error: AgentCardResolutionError) -> str:
    cause = error.__cause__
    if isinstance(cause, httpx.HTTPStatusError):
        return f"url: answered HTTP {cause.response.status_code}, not a card"
    if isinstance(cause, json.JSONDecodeError):
        return f"card: not JSON ({cause.msg} at line {cause.lineno})"
    if isinstance(cause, ParseError):
        return f"card: not an A2A agent card ({cause})"
    if isinstance(cause, httpx.TimeoutException):
        return f"url: no answer within {CARD_TIMEOUT:g} s"
    if isinstance(cause, httpx.RequestError):
        return f"url: could not be fetched ({type(cause).__name__})"
    return f"url: {error}"


def fetch_card(url: str) -> AgentCard:
    """The card at `url` (http or https), through the SDK's resolver and the outbound guard."""
    try:
        card: AgentCard = async_to_sync(_resolve)(url)
    except outbound.DestinationRefused as refused:
        raise CardImportError(str(refused)) from None
    except httpx.InvalidURL as invalid:
        # A host such as 0177.0.0.1 (octal to some resolvers): httpx refuses to parse it.
        raise CardImportError(f"url: {url!r} is not a URL ({invalid})") from None
    except AgentCardResolutionError as error:
        raise CardImportError(_resolution_problem(error)) from None
    except TimeoutError:
        raise CardImportError(f"url: no complete answer within {CARD_TIMEOUT:g} s") from None
    except UnicodeDecodeError:
        raise CardImportError("card: not UTF-8 JSON") from None
    return _checked(card)


def parse_card(data: bytes) -> AgentCard:
    """A card from its JSON bytes (v1.0, or 0.3 mapped by the SDK)."""
    if len(data) > CARD_LIMIT:
        raise CardImportError(f"file: the card is larger than {CARD_LIMIT} bytes")
    try:
        document: Any = json.loads(data)
    except UnicodeDecodeError:
        raise CardImportError("card: not UTF-8 JSON") from None
    except json.JSONDecodeError as error:
        raise CardImportError(f"card: not JSON ({error.msg} at line {error.lineno})") from None
    try:
        card = parse_agent_card(document)
    except ParseError as error:
        raise CardImportError(f"card: not an A2A agent card ({error})") from None
    return _checked(card)


def read_card_file(path: Path) -> AgentCard:
    try:
        with path.open("rb") as file:
            data = file.read(CARD_LIMIT + 1)
    except OSError as error:
        raise CardImportError(f"file: cannot read {path} ({error.strerror})") from None
    return parse_card(data)


def load_card(source: str) -> AgentCard:
    """The card at an http(s) URL, or in a file; any other scheme is refused."""
    if source.lower().startswith(("http://", "https://")):
        return fetch_card(source)
    if "://" in source:
        scheme = source.split("://", 1)[0]
        raise CardImportError(f"url: only http(s) URLs are fetched, not {scheme!r}")
    return read_card_file(Path(source))


def _checked(card: AgentCard) -> AgentCard:
    """What makes the parsed message a card: the SDK ignores unknown fields, so `{}` parses."""
    if not card.name.strip():
        raise CardImportError("card.name: missing; this is not an A2A agent card")
    if not card.supported_interfaces:
        raise CardImportError(
            "card.supportedInterfaces: missing (or url, in a 0.3 card); "
            "this is not an A2A agent card"
        )
    if len(card.name) > NAME_LIMIT:
        raise CardImportError(f"card.name: longer than the {NAME_LIMIT} characters a persona has")
    for index, skill in enumerate(card.skills):
        if not (skill.id.strip() or skill.name.strip()):
            raise CardImportError(f"card.skills[{index}]: has neither an id nor a name")
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
    for card_skill in card.skills:
        skill = _match(card_skill.id, card_skill.name, skill_map)
        reason = None
        if skill is None:
            reason = "no skill of Virgo's skill map has this id or name"
        else:
            outside = [v for v in skill.required_verbs if v not in agent.granted_verbs]
            barred = [v for v in skill.required_verbs if not class_may_have(persona_class, v)]
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


def import_card(
    card: AgentCard,
    *,
    agent: Agent,
    actor: AbstractBaseUser | AnonymousUser,
    persona_class: str,
    address: Any,
) -> CardImport:
    """The draft persona the card describes, on the actor's own agent, and its grant proposal.

    Its verb subset is the class's required tools (without them no persona of the class stands)
    and the verbs of the mapped skills. Raises PermissionDenied for another owner's agent,
    ValidationError (field and reason) for what the records refuse, CardImportError when the
    agent's grant lacks a required tool; nothing is written then.
    """
    if not actor.is_authenticated or agent.owner_id != actor.pk:
        raise PermissionDenied("only the agent's owner may make a persona on it")
    if persona_class not in PersonaClass.values:
        raise ValidationError(
            {"persona_class": [f"one of {', '.join(PersonaClass.values)}, not {persona_class!r}"]}
        )
    required = required_tools(persona_class)
    lacking = [verb for verb in required if verb not in agent.granted_verbs]
    if lacking:
        raise CardImportError(
            f"agent: {agent.name!r}'s grant lacks the required tools of a {persona_class}: "
            f"{', '.join(lacking)}"
        )
    mapping = map_skills(
        card,
        agent=agent,
        persona_class=persona_class,
        skill_map=list(services.current_skill_map().skills),
    )
    with transaction.atomic():
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
    assert change.proposal is not None
    return CardImport(change.persona, change.proposal, mapping)
