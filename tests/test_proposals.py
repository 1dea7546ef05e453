"""Grants widen only when the owner approves a diff; narrowing applies at once (issue 16).

Every write here goes through the real API (token or session with CSRF), the real services and
the stamp build; the runtime is read through the stamp it loads and the MCP server through the
`mcp` SDK's own client.
"""

from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from mcp import ClientSession
from mcp.shared.memory import create_connected_server_and_client_session
from rest_framework.test import APIClient

from personas import services
from personas.models import GrantProposal, Persona, PersonaClass
from runtime.mcp_server import build_server
from runtime.stamp import load_active_stamp
from stamps.storage import stamp_path
from tests.factories import (
    make_agent,
    make_owner,
    register_surfaces,
    run_on_commit,
    standing_verbs,
)
from tests.owner_clients import csrf_token, session_client, token_client
from tests.runtime_support import standing_persona

pytestmark = pytest.mark.django_db

# A coder deputy's class tools: list_todos is granted to the agent but not yet to the persona.
ADDED = "list_todos"


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, settings: Any) -> Path:
    settings.VIRGO_HOME = tmp_path / "home"
    return settings.VIRGO_HOME


@pytest.fixture
def persona() -> Persona:
    persona = standing_persona(extra=("claim",), discoverable=True)
    assert ADDED not in persona.verb_subset
    return persona


def url(persona: Persona) -> str:
    return f"/api/personas/{persona.uuid}/"


def mcp_tools(persona: Persona) -> list[str]:
    server = build_server(persona)

    async def main() -> list[str]:
        async with create_connected_server_and_client_session(server) as session:
            return [tool.name for tool in (await session.list_tools()).tools]

    return async_to_sync(main)()


def mcp_call(persona: Persona, name: str, arguments: dict[str, Any]) -> Any:
    server = build_server(persona)

    async def main() -> Any:
        async with create_connected_server_and_client_session(server) as session:
            assert isinstance(session, ClientSession)
            return await session.call_tool(name, arguments)

    return async_to_sync(main)()


def snapshot(persona: Persona, client: APIClient) -> dict[str, Any]:
    """What runs and what is advertised: generation, stamp file, card, runtime and MCP tools."""
    persona = Persona.objects.get(pk=persona.pk)
    card = client.get(persona.card_path)
    assert card.status_code == 200
    return {
        "generation": persona.generation,
        "stamp": stamp_path(persona.uuid, persona.generation).read_bytes(),
        "card": card.content,
        "etag": card["ETag"],
        "runtime": sorted(load_active_stamp(persona).tools),
        "mcp": mcp_tools(persona),
    }


def propose(persona: Persona, **changes: Any) -> dict[str, Any]:
    with run_on_commit():
        response = token_client(persona.agent.owner).patch(url(persona), changes, format="json")
    assert response.status_code == 202, response.content
    return response.json()


def decide(persona: Persona, proposal: dict[str, Any], decision: str) -> Any:
    client = session_client(persona.agent.owner)
    token = csrf_token(client)
    with run_on_commit():
        return client.post(f"{proposal['url']}{decision}/", HTTP_X_CSRFTOKEN=token)


def test_a_token_write_that_adds_a_verb_waits_and_after_approval_the_tool_works_over_mcp(
    persona: Persona, client: APIClient
) -> None:
    """VX-REV-1: a token's write that adds a verb is a proposal (202, its id and URL): the
    stamp, the card and the runtime stay as they were; once the owner approves with their own
    session and CSRF, the new generation is built and the tool works through the MCP server."""
    before = snapshot(persona, client)
    assert ADDED not in before["mcp"]

    body = propose(persona, verb_subset=[*persona.verb_subset, ADDED])

    proposal = GrantProposal.objects.get(pk=body["id"])
    assert body["url"].endswith(f"/api/proposals/{proposal.pk}/")
    assert body["status"] == "pending" and body["via"] == "api"
    assert body["diff"]["tools_added"] == [ADDED]
    assert snapshot(persona, client) == before
    assert Persona.objects.get(pk=persona.pk).verb_subset == persona.verb_subset

    approved = decide(persona, body, "approve")
    assert approved.status_code == 200, approved.content
    after = snapshot(persona, client)
    assert after["generation"] == before["generation"] + 1
    assert ADDED in after["runtime"] and ADDED in after["mcp"]
    assert after["card"] != before["card"]
    listed = mcp_call(Persona.objects.get(pk=persona.pk), ADDED, {"queue": "reviews"})
    assert listed.isError is False, listed.content
    assert listed.structuredContent["ok"] is True
    # The stamp built is the very one the proposal showed.
    generation = Persona.objects.get(pk=persona.pk).generations.get(number=after["generation"])
    assert generation.stamp_hash == body["diff"]["next_stamp_hash"]


@pytest.mark.parametrize(
    "change",
    ["queue", "binding", "allow"],
    ids=["adds a queue", "adds a human-surface binding", "confirm becomes allow"],
)
def test_every_kind_of_widening_is_a_proposal(change: str, client: APIClient) -> None:
    """VX-REV-1: a queue, a human-surface binding, or `confirm` turned into `allow` each wait."""
    persona = standing_persona(extra=("claim",), ask_first_verbs=["claim"], discoverable=True)
    register_surfaces(persona.agent.owner, ["teams:chat/ops"])
    before = snapshot(persona, client)
    changes = {
        "queue": {"queues": ["reviews", "triage"]},
        "binding": {"human_surface_bindings": ["teams:chat/ops"]},
        "allow": {"ask_first_verbs": []},
    }[change]
    body = propose(persona, **changes)
    expected = {
        "queue": "adds queue triage",
        "binding": "adds human-surface binding teams:chat/ops",
        "allow": "claim: confirm becomes allow",
    }[change]
    assert expected in body["diff"]["widening"]
    assert snapshot(persona, client) == before


def test_a_narrowing_write_applies_at_once(persona: Persona, client: APIClient) -> None:
    """VX-REV-2: removing a verb, or turning `allow` into `confirm`, is made at once (200)."""
    before = snapshot(persona, client)
    owner = token_client(persona.agent.owner)
    with run_on_commit():
        removed = owner.patch(
            url(persona),
            {"verb_subset": [v for v in persona.verb_subset if v != "claim"]},
            format="json",
        )
    assert removed.status_code == 200, removed.content
    assert removed.json()["generation"] == before["generation"] + 1
    with run_on_commit():
        asks = owner.patch(url(persona), {"ask_first_verbs": ["workspace_write"]}, format="json")
    assert asks.status_code == 200, asks.content
    after = snapshot(persona, client)
    assert after["generation"] == before["generation"] + 2
    assert "claim" not in after["runtime"] and "claim" not in after["mcp"]
    assert load_active_stamp(Persona.objects.get(pk=persona.pk)).document["tools"]
    assert not GrantProposal.objects.exists()


def test_a_stale_proposal_says_so_and_cannot_be_approved(
    persona: Persona, client: APIClient
) -> None:
    """VX-REV-1, VX-REV-3: a later change makes a pending proposal stale; approving it is a 409
    and changes nothing."""
    body = propose(persona, verb_subset=[*persona.verb_subset, ADDED])
    with run_on_commit():
        narrowed = token_client(persona.agent.owner).patch(
            url(persona),
            {"verb_subset": [v for v in persona.verb_subset if v != "claim"]},
            format="json",
        )
    assert narrowed.status_code == 200
    before = snapshot(persona, client)

    shown = token_client(persona.agent.owner).get(body["url"])
    assert shown.json()["status"] == "stale"
    refused = decide(persona, body, "approve")
    assert refused.status_code == 409, refused.content
    assert refused.json()["code"] == "stale"
    assert snapshot(persona, client) == before
    assert GrantProposal.objects.get(pk=body["id"]).status == GrantProposal.Status.STALE


def test_a_proposal_whose_next_composition_moved_is_stale(persona: Persona) -> None:
    """VX-REV-1: approval needs the very composition the diff showed, not only the same
    generation number (here the owner's identity, named on the card, changed meanwhile)."""
    owner = persona.agent.owner
    proposal = services.persona_submit(
        persona=persona,
        actor=owner,
        via=GrantProposal.Via.CLI,
        verb_subset=[*persona.verb_subset, ADDED],
    ).proposal
    assert proposal is not None
    # Written without its follow-up work, so the generation has not moved on yet.
    services.owner_identity_update(user=owner, display_name="Renamed", organization="Other")
    with pytest.raises(services.StaleProposal):
        services.proposal_approve(proposal=proposal, actor=owner)
    proposal.refresh_from_db()
    assert proposal.status == GrantProposal.Status.STALE
    assert Persona.objects.get(pk=persona.pk).generation == persona.generation


def test_rejection_changes_nothing_and_is_recorded(persona: Persona, client: APIClient) -> None:
    """VX-REV-3: a rejected proposal leaves everything as it was and records who decided, when;
    it cannot be approved afterwards."""
    before = snapshot(persona, client)
    body = propose(persona, verb_subset=[*persona.verb_subset, ADDED])
    rejected = decide(persona, body, "reject")
    assert rejected.status_code == 200
    assert rejected.json()["status"] == "rejected"
    assert rejected.json()["decided_by"] == persona.agent.owner.pk
    assert rejected.json()["decided_at"]
    assert snapshot(persona, client) == before
    assert decide(persona, body, "approve").status_code == 409
    assert snapshot(persona, client) == before


def test_a_proposal_records_who_through_what_and_its_diff(persona: Persona) -> None:
    """VX-REV-3: proposer, channel, base generation, the grant diff (tools, skills, stamp
    hashes), then who decided and when, and the generation it made."""
    current = persona.generations.get(number=persona.generation)
    body = propose(persona, verb_subset=[*persona.verb_subset, ADDED, "complete"])
    proposal = GrantProposal.objects.get(pk=body["id"])
    assert proposal.proposed_by == persona.agent.owner
    assert proposal.via == GrantProposal.Via.API
    assert proposal.base_generation == persona.generation
    diff = proposal.diff
    assert diff["tools_added"] == sorted([ADDED, "complete"])
    assert diff["tools_removed"] == []
    assert diff["skills_added"] == ["work-todos"]
    assert diff["current_stamp_hash"] == current.stamp_hash
    assert diff["next_stamp_hash"] and diff["next_stamp_hash"] != current.stamp_hash
    assert decide(persona, body, "approve").status_code == 200
    proposal.refresh_from_db()
    assert (proposal.status, proposal.decided_by) == ("approved", persona.agent.owner)
    assert proposal.decided_at is not None
    assert proposal.applied_generation == persona.generation + 1


def test_a_token_cannot_approve_what_it_proposed(persona: Persona, client: APIClient) -> None:
    """VX-REV-1: deciding needs the owner's own session; the owner's token gets 403."""
    before = snapshot(persona, client)
    body = propose(persona, verb_subset=[*persona.verb_subset, ADDED])
    with run_on_commit():
        refused = token_client(persona.agent.owner).post(f"{body['url']}approve/")
    assert refused.status_code == 403
    assert refused.json()["code"] == "session_required"
    assert snapshot(persona, client) == before
    assert GrantProposal.objects.get(pk=body["id"]).status == GrantProposal.Status.PENDING


def test_a_session_without_csrf_cannot_approve(persona: Persona) -> None:
    """VX-REV-1: the owner's session decides only with its CSRF token."""
    body = propose(persona, verb_subset=[*persona.verb_subset, ADDED])
    response = session_client(persona.agent.owner).post(f"{body['url']}approve/")
    assert response.status_code == 403
    assert GrantProposal.objects.get(pk=body["id"]).status == GrantProposal.Status.PENDING


def test_another_owner_can_see_or_decide_none_of_it(persona: Persona, client: APIClient) -> None:
    """VX-REV-1, VX-REV-3: another owner (a moderator too) gets 404 for the proposal in the API
    and in the admin, sees none in the lists, and approving it changes nothing."""
    body = propose(persona, verb_subset=[*persona.verb_subset, ADDED])
    before = snapshot(persona, client)
    for intruder in (make_owner(), make_owner(is_superuser=True)):
        api = session_client(intruder)
        token = csrf_token(api)
        assert api.get(body["url"]).status_code == 404
        assert api.get("/api/proposals/").json()["results"] == []
        for decision in ("approve", "reject"):
            response = api.post(f"{body['url']}{decision}/", HTTP_X_CSRFTOKEN=token)
            assert response.status_code == 404
        page = f"/admin/personas/grantproposal/{body['id']}/change/"
        assert api.get(page).status_code == 404
        assert api.post(page, {"decision": "approve"}, HTTP_X_CSRFTOKEN=token).status_code == 404
        listed = api.get("/admin/personas/grantproposal/").content.decode()
        assert f"/grantproposal/{body['id']}/" not in listed
    assert snapshot(persona, client) == before
    assert GrantProposal.objects.get(pk=body["id"]).status == GrantProposal.Status.PENDING


def test_a_class_change_that_brings_tools_is_a_proposal() -> None:
    """VX-REV-1: a class change that brings the class's tools and lifts a class condition
    widens the grant; it waits, and the persona keeps its class until approved."""
    owner = make_owner()
    persona = standing_persona(owner, agent=make_agent(owner))
    change = services.persona_submit(
        persona=persona,
        actor=owner,
        via=GrantProposal.Via.API,
        persona_class=PersonaClass.PROJECT_LEAD,
        verb_subset=standing_verbs(PersonaClass.PROJECT_LEAD),
    )
    assert change.proposal is not None
    diff = change.proposal.diff
    assert {"resolve_decision", "assign_task"} <= set(diff["tools_added"])
    assert {"tool": "create_run", "condition": "assigned-task"} in diff["conditions_lifted"]
    assert Persona.objects.get(pk=persona.pk).persona_class == PersonaClass.CODER_DEPUTY
