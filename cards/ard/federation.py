"""Federated search (ARD §8 `federation: auto`, VX-DISC-5): the peers' entries after this
registry's own, each shown only once it verifies (cards.ard.foreign).

The peers are the ARD registries an operator told this installation of (cards.ard.peers:
`virgo peers add`, the admin's Federation peers), each with the credential it answers to,
sealed at rest. A search asks
every enabled peer at once, with `federation: none` so that no search goes round in a circle,
and waits for them no longer than VIRGO_ARD_FEDERATION_SECONDS in all, reading at most
VIRGO_ARD_FEDERATION_BYTES of each answer. A peer that is slow, down, over budget or answers
what is not ARD is left out, as is every entry of a peer that does not verify; the search
itself always answers. A shown entry's `source` is the peer it came from. Nothing a peer
serves can stand in for a persona of this installation: an entry naming one of its personas,
or a card on its origin, is left out, and of two peers naming one identifier the first wins.
"""

import json
import logging
import time
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from cards import sealing
from cards.ard import entries
from cards.ard.foreign import Fetcher, Unverified, json_object, verified
from cards.models import FederationPeer
from personas.models import Persona
from virgo.public_url import origin_of

logger = logging.getLogger("virgo.federation")

_MAX_PEERS_AT_ONCE = 8


@dataclass(frozen=True)
class Peer:
    """What a search needs of a peer: read in the request's thread, used in the pool's."""

    url: str
    label: str
    authorization: str | None


def enabled_peers() -> list[Peer]:
    """The peers to ask, credentials opened; one that cannot be opened is left out, loudly."""
    peers = []
    for row in FederationPeer.objects.filter(enabled=True).order_by("added_at", "pk"):
        authorization = None
        if row.credential_sealed:
            try:
                secret = sealing.unseal(row.url, row.credential_sealed, sealing.PEER_CREDENTIAL)
            except sealing.KeyCannotBeOpened as refused:
                logger.warning("federation peer %s left out: %s", row.label, refused)
                continue
            authorization = f"{row.scheme} {secret.decode()}"
        peers.append(Peer(row.url, row.label, authorization))
    return peers


def federated(
    query: dict[str, Any], page_size: int, peers: list[Peer] | None = None
) -> list[dict[str, Any]]:
    """At most `page_size` verified entries of the peers, in the peers' order, each labelled
    with its source; never one that names a persona of this installation."""
    peers = enabled_peers() if peers is None else peers
    if not peers or page_size <= 0:
        return []
    deadline = time.monotonic() + settings.VIRGO_ARD_FEDERATION_SECONDS
    pool = ThreadPoolExecutor(max_workers=min(len(peers), _MAX_PEERS_AT_ONCE))
    try:
        asked = [pool.submit(_ask, peer, query, page_size, deadline) for peer in peers]
        wait(asked, timeout=max(0.0, deadline - time.monotonic()))
    finally:
        # A peer still answering past the deadline is not waited for; its fetches end by it.
        pool.shutdown(wait=False, cancel_futures=True)
    answers = []
    for peer, future in zip(peers, asked, strict=True):
        # A peer still queued at the deadline (more peers than run at once) was cancelled.
        if not future.done() or future.cancelled():
            logger.warning("federation peer %s left out: no answer within the budget", peer.label)
        elif isinstance(failure := future.exception(), Unverified):
            logger.warning("federation peer %s left out: %s", peer.label, failure)
        elif failure is not None:
            # Not a peer's fault but Virgo's: left out as well, with the traceback to fix it.
            logger.error("federation peer %s left out", peer.label, exc_info=failure)
        else:
            answers.append(future.result())
    return _merged(answers, page_size)


def check_peer(peer: Peer, query: dict[str, Any], page_size: int = 10) -> str:
    """What asking `peer` now gives, in one line for its operator."""
    deadline = time.monotonic() + settings.VIRGO_ARD_FEDERATION_SECONDS
    try:
        results = _search(peer, query, page_size, deadline)
    except Unverified as failed:
        return f"left out: {failed}"
    shown, left_out = _verified_entries(peer, results[:page_size], deadline)
    reasons = "".join(f"\n  left out: {reason}" for reason in left_out)
    return f"answered {len(results)} entries, {len(shown)} verified{reasons}"


def _ask(
    peer: Peer, query: dict[str, Any], page_size: int, deadline: float
) -> list[dict[str, Any]]:
    """The peer's verified entries, each with its `source`; Unverified when it fails whole."""
    results = _search(peer, query, page_size, deadline)
    shown, left_out = _verified_entries(peer, results[:page_size], deadline)
    for reason in left_out:
        logger.warning("federation peer %s: an entry left out: %s", peer.label, reason)
    return shown


def _verified_entries(
    peer: Peer, results: list[Any], deadline: float
) -> tuple[list[dict[str, Any]], list[str]]:
    fetcher = Fetcher(deadline, peer_origin=origin_of(peer.url))
    shown, left_out = [], []
    for entry in results:
        try:
            shown.append({**verified(entry, fetcher), "source": peer.url})
        except Unverified as unverified:
            left_out.append(str(unverified))
    return shown, left_out


def _search(peer: Peer, query: dict[str, Any], page_size: int, deadline: float) -> list[Any]:
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if peer.authorization:
        headers["Authorization"] = peer.authorization
    document = json_object(
        peer.url + "search",
        what="federation peer",
        deadline=deadline,
        limit=settings.VIRGO_ARD_FEDERATION_BYTES,
        operator_chosen=True,
        method="POST",
        headers=headers,
        content=json.dumps({"query": query, "federation": "none", "pageSize": page_size}).encode(),
    )
    results = document.get("results")
    if not isinstance(results, list):
        raise Unverified(f"{peer.url}search did not answer ARD search results")
    return results


def _merged(answers: Iterable[list[dict[str, Any]]], page_size: int) -> list[dict[str, Any]]:
    own_origin = origin_of(settings.VIRGO_PUBLIC_BASE_URL)
    candidates = [entry for answer in answers for entry in answer]
    ours = _local_identifiers(candidates)
    seen: set[str] = set()
    merged = []
    for entry in candidates:
        urn = entry["identifier"]
        if urn in seen or urn in ours or origin_of(entry["url"]) == own_origin:
            continue
        seen.add(urn)
        merged.append(entry)
    return merged[:page_size]


def _local_identifiers(candidates: list[dict[str, Any]]) -> set[str]:
    """The candidates' identifiers that name a persona of this installation: whatever its
    publisher segment says, its uuid is this installation's to answer for."""
    named: dict[uuid.UUID, list[str]] = {}
    for entry in candidates:
        parsed = entries.parse_identifier(entry["identifier"])
        try:
            persona_uuid = uuid.UUID(parsed[1]) if parsed is not None else None
        except ValueError:
            continue
        if persona_uuid is not None:
            named.setdefault(persona_uuid, []).append(entry["identifier"])
    if not named:
        return set()
    local = Persona.objects.filter(uuid__in=named).values_list("uuid", flat=True)
    return {urn for persona_uuid in local for urn in named[persona_uuid]}
