"""What the `virgo` commands share about agents and personas (VX-OPS-8): naming one on the
command line, and listing them.

An agent or a persona is named the same way by every command: its id, a persona's uuid, or its
name when that is unambiguous (personas.selectors resolves it, within the scope the command
passes). A name that answers to more than one, or to none, ends the command in one line with
status 2, as a usage mistake does.

A list is a table for a person (the ids first, since the other commands take them) and, with
`--json`, a list of objects for a script; an empty list says so in one line.
"""

import json
from collections.abc import Callable, Sequence
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError, OutputWrapper
from django.db.models import Count, QuerySet

from personas.models import Agent, Persona
from personas.selectors import (
    AmbiguousReference,
    UnknownReference,
    agent_by_reference,
    persona_by_reference,
)

# The status of a command given an argument it cannot use, as argparse exits on a bad option.
EXIT_USAGE = 2


def agent_argument(reference: str, *, among: QuerySet[Agent], flag: str = "") -> Agent:
    try:
        return agent_by_reference(reference, among=among)
    except (UnknownReference, AmbiguousReference) as problem:
        raise _usage(flag, problem) from None


# The personas `launch`, `mcp` and `explain` may name: any, since whoever runs them holds the
# installation's database and keys (the stamp, not the command line, is what confines a persona).
ANY_PERSONA = Persona.objects.select_related("agent__owner")


def persona_argument(reference: str, *, among: QuerySet[Persona], flag: str = "") -> Persona:
    try:
        return persona_by_reference(reference, among=among)
    except (UnknownReference, AmbiguousReference) as problem:
        raise _usage(flag, problem) from None


def user_argument(username: str, *, flag: str) -> Any:
    try:
        return get_user_model().objects.get_by_natural_key(username)
    except get_user_model().DoesNotExist:
        raise _usage(flag, LookupError(f"no user {username!r}; create one first")) from None


def _usage(flag: str, problem: LookupError) -> CommandError:
    return CommandError(f"{flag}: {problem}" if flag else str(problem), returncode=EXIT_USAGE)


def agent_documents(agents: QuerySet[Agent]) -> list[dict[str, Any]]:
    """One object per agent, by id: what `virgo agent list --json` prints."""
    return [
        {
            "id": agent.pk,
            "name": agent.name,
            "owner": agent.owner.get_username(),
            "personas": agent.persona_count,
        }
        for agent in agents.select_related("owner")
        .annotate(persona_count=Count("personas"))
        .order_by("pk")
    ]


def persona_documents(personas: QuerySet[Persona]) -> list[dict[str, Any]]:
    """One object per persona, by id: what `virgo persona list --json` prints."""
    return [
        {
            "id": persona.pk,
            "uuid": str(persona.uuid),
            "name": persona.name,
            "agent": {"id": persona.agent_id, "name": persona.agent.name},
            "owner": persona.agent.owner.get_username(),
            "address": persona.address.path,
            "class": persona.persona_class,
            "generation": persona.generation,
            "standing": persona.standing,
            "discoverable": persona.discoverable,
            "revoked": persona.is_revoked,
        }
        for persona in personas.select_related("agent__owner", "address").order_by("pk")
    ]


def agent_row(document: dict[str, Any]) -> list[str]:
    return [
        str(document["id"]),
        document["name"],
        document["owner"],
        str(document["personas"]),
    ]


AGENT_HEADINGS = ("ID", "NAME", "OWNER", "PERSONAS")


def persona_row(document: dict[str, Any]) -> list[str]:
    # A standing of None is a stamp still owed: neither standing nor refused yet.
    standing = {True: "yes", False: "no", None: "owed"}[document["standing"]]
    return [
        str(document["id"]),
        document["name"],
        f"{document['agent']['name']} ({document['agent']['id']})",
        document["owner"],
        document["address"],
        document["class"],
        str(document["generation"]),
        standing,
        "yes" if document["discoverable"] else "no",
        "REVOKED" if document["revoked"] else "no",
    ]


PERSONA_HEADINGS = (
    "ID",
    "NAME",
    "AGENT",
    "OWNER",
    "ADDRESS",
    "CLASS",
    "GEN",
    "STANDING",
    "DISCOVERABLE",
    "REVOKED",
)


def write_list(
    out: OutputWrapper,
    documents: list[dict[str, Any]],
    *,
    as_json: bool,
    headings: Sequence[str],
    row: Callable[[dict[str, Any]], list[str]],
    empty: str,
) -> None:
    """`documents` as JSON, or as a table of `row(document)` under `headings`, or `empty`."""
    if as_json:
        # ASCII only: a name is the owner's text, or a remote card's (`import-card`), and a
        # control character left raw (C1's CSI among them) would reach the reader's terminal.
        out.write(json.dumps(documents, indent=2))
        return
    if not documents:
        out.write(empty)
        return
    rows = [
        list(headings),
        *([_printable(cell) for cell in row(document)] for document in documents),
    ]
    widths = [max(len(cells[column]) for cells in rows) for column in range(len(headings))]
    for cells in rows:
        out.write(
            "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()
        )


def _printable(cell: str) -> str:
    # Escape what a terminal would act on rather than show (a name written to move the cursor
    # or recolour the rows could make one persona pass for another).
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in cell)
