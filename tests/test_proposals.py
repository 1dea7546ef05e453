"""Grants widen only when the owner approves a diff; narrowing applies at once (issue 16).

Every write here goes through the real API (token or session with CSRF), the real services and
the stamp build; the runtime is read through the stamp it loads and the MCP server through the
`mcp` SDK's own client.
"""

import io
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command
from mcp import ClientSession
from mcp.shared.memory import create_connected_server_and_client_session
from rest_framework.test import APIClient

from personas import services
from personas.models import GrantProposal, Persona, PersonaClass
from runtime.snapshot import export_persona
from runtime.stamp import StampUnavailable, load_active_stamp
from serving.mcp_server import build_server
from stamps.storage import stamp_path
from tests.factories import (
    CLASS_ADDRESSES,
    address,
    make_agent,
    make_owner,
    register_surfaces,
    run_on_commit,
    standing_verbs,
)
from tests.grant_support import ADDED, new_persona
from tests.owner_clients import csrf_token, form_data, session_client, token_client
from tests.runtime_support import standing_persona

pytestmark = pytest.mark.django_db


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
    other = services.organization_claim(owner=owner, domain="other.example")
    services.organization_approve(claim=other, actor=services.INSTALLATION)
    services.owner_identity_update(user=owner, organization_domain=other)
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


# Creating a persona through a channel (VX-REV-1) -------------------------------------------------


def nothing_stands(persona: Persona) -> None:
    """Nothing of the persona runs or is advertised: no standing, no stamp file, no card, and
    the runtime refuses it."""
    persona = Persona.objects.get(pk=persona.pk)
    assert (persona.standing, persona.verb_subset, persona.queues) == (False, [], [])
    assert not list(stamp_path(persona.uuid, 1).parents[1].glob("*/CAPABILITY-STAMP.json"))
    assert APIClient().get(persona.card_path).status_code == 404
    with pytest.raises(StampUnavailable):
        load_active_stamp(persona)


@pytest.mark.parametrize("by", ["token", "session"])
def test_a_persona_created_through_the_api_grants_nothing_until_the_owner_approves(
    by: str,
) -> None:
    """VX-REV-1: POST /api/personas/ with a token (a leaked one, say), or even the owner's own
    session, answers 202 with the proposal (id, url, Location): the persona exists granting
    nothing, with no stamp file and no card (404), and the runtime refuses it. Once the owner
    approves with their session and CSRF it stands and its tools work through the MCP server."""
    owner = make_owner()
    agent = make_agent(owner)
    client = token_client(owner)
    headers = {}
    if by == "session":
        client = session_client(owner)
        headers = {"HTTP_X_CSRFTOKEN": csrf_token(client)}
    with run_on_commit():
        response = client.post("/api/personas/", new_persona(agent), format="json", **headers)
    assert response.status_code == 202, response.content
    body = response.json()
    proposal = GrantProposal.objects.get(pk=body["id"])
    assert response["Location"] == body["url"]
    assert body["url"].endswith(f"/api/proposals/{proposal.pk}/")
    assert (body["status"], body["via"], body["base_generation"]) == ("pending", "api", 1)
    assert ADDED in body["diff"]["tools_added"]
    assert body["review_url"].endswith(f"/admin/personas/grantproposal/{proposal.pk}/change/")
    persona = Persona.objects.get(uuid=body["persona"])
    assert persona.system_prompt == new_persona(agent)["system_prompt"]
    nothing_stands(persona)

    approved = decide(persona, body, "approve")
    assert approved.status_code == 200, approved.content
    persona.refresh_from_db()
    assert persona.standing is True and persona.generation == 2
    assert stamp_path(persona.uuid, 2).exists()
    assert APIClient().get(persona.card_path).status_code == 404  # not listed: owner-only
    assert ADDED in load_active_stamp(persona).tools and ADDED in mcp_tools(persona)
    listed = mcp_call(persona, ADDED, {"queue": "reviews"})
    assert listed.isError is False, listed.content
    assert persona.generations.get(number=2).stamp_hash == body["diff"]["next_stamp_hash"]


def test_a_created_persona_listed_at_once_shows_no_card_until_approved() -> None:
    """VX-REV-1: `discoverable: true` on a token's create lists nothing that stands: the card
    is 404 to everyone, and the directory shows nothing, until the owner approves."""
    owner = make_owner()
    body = new_persona(make_agent(owner), discoverable=True)
    with run_on_commit():
        response = token_client(owner).post("/api/personas/", body, format="json")
    assert response.status_code == 202, response.content
    persona = Persona.objects.get(uuid=response.json()["persona"])
    assert persona.discoverable is True
    nothing_stands(persona)
    peer = token_client(make_owner())
    assert peer.get("/api/directory/").json()["results"] == []
    assert decide(persona, response.json(), "approve").status_code == 200
    assert APIClient().get(Persona.objects.get(pk=persona.pk).card_path).status_code == 200
    [listed] = peer.get("/api/directory/").json()["results"]
    assert str(persona.uuid) in str(listed)


def test_another_owner_cannot_approve_a_created_personas_grant() -> None:
    """VX-REV-1, VX-REV-3: another owner (a moderator too) gets 404 deciding a creation's
    proposal, and it stays pending with nothing standing."""
    owner = make_owner()
    with run_on_commit():
        response = token_client(owner).post(
            "/api/personas/", new_persona(make_agent(owner)), format="json"
        )
    body = response.json()
    persona = Persona.objects.get(uuid=body["persona"])
    for intruder in (make_owner(), make_owner(is_superuser=True)):
        api = session_client(intruder)
        token = csrf_token(api)
        with run_on_commit():
            refused = api.post(f"{body['url']}approve/", HTTP_X_CSRFTOKEN=token)
        assert refused.status_code == 404
        page = f"/admin/personas/grantproposal/{body['id']}/change/"
        assert api.post(page, {"decision": "approve"}, HTTP_X_CSRFTOKEN=token).status_code == 404
    assert GrantProposal.objects.get(pk=body["id"]).status == GrantProposal.Status.PENDING
    nothing_stands(persona)


def test_virgo_persona_add_leaves_a_pending_proposal_and_nothing_standing() -> None:
    """VX-REV-1: `virgo persona add` (a CLI write) creates the persona granting nothing and
    prints its proposal and review URL; the owner's approval in the admin makes it stand."""
    owner = make_owner("cli-owner")
    agent = make_agent(owner, name="main")
    out = io.StringIO()
    with run_on_commit():
        call_command(
            "persona", "add", "--owner", "cli-owner", "--agent", "main", "--name", "Added",
            "--class", PersonaClass.CODER_DEPUTY, "--prompt", "You review pull requests.",
            "--address", address(CLASS_ADDRESSES[PersonaClass.CODER_DEPUTY]).path,
            "--queues", "reviews", stdout=out, stderr=out,
        )  # fmt: skip
    persona = Persona.objects.get(agent=agent, name="Added")
    [proposal] = persona.proposals.all()
    assert (proposal.status, proposal.via, proposal.proposed_by) == ("pending", "cli", owner)
    assert f"proposal {proposal.pk}" in out.getvalue()
    assert proposal.review_url in out.getvalue()
    nothing_stands(persona)

    client = session_client(owner)
    page = f"/admin/personas/grantproposal/{proposal.pk}/change/"
    with run_on_commit():
        client.post(page, {"decision": "approve"}, HTTP_X_CSRFTOKEN=csrf_token(client))
    persona.refresh_from_db()
    assert GrantProposal.objects.get(pk=proposal.pk).status == GrantProposal.Status.APPROVED
    assert persona.standing is True and "list_todos" not in load_active_stamp(persona).tools


def test_the_admins_add_form_leaves_a_pending_proposal_and_nothing_standing() -> None:
    """VX-REV-1: even the owner's own add form in the admin creates the persona granting
    nothing and sends the owner to its proposal's diff page (the grant it would add); listing
    it at once lists nothing that stands. Confirmed there, it stands with that grant and its
    card is served."""
    owner = make_owner()
    agent = make_agent(owner)
    wanted = new_persona(agent)
    client = session_client(owner, enforce_csrf_checks=False)
    add = f"/admin/personas/persona/add/?agent={agent.pk}"
    data = {**form_data(client.get(add), "persona_form"), "_save": "Save"}
    data.update(
        name=wanted["name"],
        system_prompt=wanted["system_prompt"],
        persona_class=wanted["persona_class"],
        address=str(address(wanted["address"]).pk),
        verb_subset=wanted["verb_subset"],
        queues=wanted["queues"],
        discoverable="on",
    )
    with run_on_commit():
        response = client.post(add, data, follow=True)
    persona = Persona.objects.get(agent=agent, name="Created")
    [proposal] = persona.proposals.all()
    review = f"/admin/personas/grantproposal/{proposal.pk}/change/"
    assert response.redirect_chain[-1][0] == review
    assert "granting nothing yet" in response.content.decode()
    assert (proposal.status, proposal.via, proposal.proposed_by) == ("pending", "admin", owner)
    assert set(proposal.diff["tools_added"]) >= set(wanted["verb_subset"])
    assert persona.discoverable is True
    nothing_stands(persona)

    with run_on_commit():
        client.post(review, {"decision": "approve"})
    persona.refresh_from_db()
    assert GrantProposal.objects.get(pk=proposal.pk).status == GrantProposal.Status.APPROVED
    assert (persona.standing, persona.verb_subset) == (True, wanted["verb_subset"])
    assert ADDED in load_active_stamp(persona).tools
    assert APIClient().get(persona.card_path).status_code == 200


def test_a_snapshot_import_leaves_a_pending_proposal_and_nothing_standing(tmp_path: Path) -> None:
    """VX-REV-1: `virgo persona import` of a persona that stood creates a new one granting
    nothing, reports its proposal, and leaves nothing standing until the owner approves."""
    source = standing_persona(extra=(ADDED,))
    archive = export_persona(source, tmp_path / "p.tar.gz")
    target = make_agent(source.agent.owner)
    out = io.StringIO()
    copy = address("work/core/copy").path
    with run_on_commit():
        call_command(
            "persona", "import", str(archive), "--agent", str(target.pk), "--address", copy,
            stdout=out,
        )  # fmt: skip
    persona = Persona.objects.get(agent=target)
    [proposal] = persona.proposals.all()
    assert (proposal.status, proposal.via) == ("pending", "import")
    assert proposal.changes["verb_subset"] == source.verb_subset
    assert f"proposal {proposal.pk}" in out.getvalue() and proposal.review_url in out.getvalue()
    nothing_stands(persona)
    with run_on_commit():
        services.proposal_approve(proposal=proposal, actor=source.agent.owner)
    assert ADDED in load_active_stamp(Persona.objects.get(pk=persona.pk)).tools


def test_a_created_persona_that_would_not_stand_is_refused_naming_the_field() -> None:
    """VX-GRANT-4: a creation that would not stand even with its grant (here one class tool
    short) is refused at the door (422 naming verb_subset and the missing tool), and nothing of
    it is written: no persona, no generation, no proposal."""
    owner = make_owner()
    verbs = standing_verbs(PersonaClass.CODER_DEPUTY, ADDED)
    short = [verb for verb in verbs if verb != "workspace_list"]
    client = token_client(owner)
    with run_on_commit():
        created = client.post(
            "/api/personas/", new_persona(make_agent(owner), verb_subset=short), format="json"
        )
    assert created.status_code == 422, created.content
    assert created.json() == {
        "verb_subset": [
            "the persona would not stand: missing tools a coder-deputy needs: workspace_list"
        ]
    }
    assert not Persona.objects.exists()
    assert not GrantProposal.objects.exists()
