"""Every tool of every class's stamp, called through handle(), does real work on the models.

The human-surface tools (virgo-channel) are proven by their own tests; everything else a class
may be granted is called here, and every tool outside the stamp is refused.
"""

from collections.abc import Callable
from typing import Any

import pytest

from personas.catalogue import VERB_NAMES, VERBS_BY_NAME
from personas.models import Persona, PersonaClass
from runtime.models import (
    Artifact,
    CoordinationMessage,
    Decision,
    Presence,
    Run,
    RunEvent,
    Task,
    TaskReport,
    WakeMarker,
    Webhook,
    WebhookDelivery,
)
from runtime.stamp import load_active_stamp
from runtime.tools import decisions as decision_services
from runtime.tools.graph import archive_conversation
from runtime.tools.work import create_todo
from stamps.profiles import CLASSES, HUMAN_SURFACE_BUNDLES
from tests.runtime_support import call
from tests.tools_support import (
    HookServer,
    Team,
    allow_loopback,
    confirmed,
    make_team,
    ok,
    refused,
)

pytestmark = pytest.mark.django_db


def non_human_tools(persona: Persona) -> set[str]:
    stamp = load_active_stamp(persona)
    return {
        name for name in stamp.mcp_tools if VERBS_BY_NAME[name].bundle not in HUMAN_SURFACE_BUNDLES
    }


class Session:
    """Calls each tool once, in an order where every call has something real to work on."""

    def __init__(self, team: Team, persona: Persona, hook_url: str) -> None:
        self.team, self.persona, self.hook_url = team, persona, hook_url
        self.peer = team.deputy if persona != team.deputy else team.lead
        self.called: dict[str, dict[str, Any]] = {}
        self.ids: dict[str, str] = {}
        self.stamp = set(load_active_stamp(persona).mcp_tools)

    def use(self, tool: str, arguments: dict[str, Any] | Callable[[], dict[str, Any]]) -> None:
        if tool not in self.stamp:
            return
        args = arguments() if callable(arguments) else arguments
        if load_active_stamp(self.persona).tools[tool].access == "confirm":
            result = ok(confirmed(self.persona, tool, args))
        else:
            result = ok(call(self.persona, tool, args))
        self.called[tool] = result


def prepare(team: Team, persona: Persona) -> dict[str, str]:
    """What is there before the persona wakes: a message, todos, a decision and a run."""
    ids: dict[str, str] = {}
    sender = team.lead if persona != team.lead else team.deputy
    sent = ok(
        call(sender, "send_broker_message", {"recipient": str(persona.uuid), "body": "wake up"})
    )
    ids["message"] = sent["message"]
    ids["todo"] = str(create_todo(owner=team.owner, queue="reviews", title="review #1").uuid)
    ids["spare"] = str(create_todo(owner=team.owner, queue="reviews", title="review #2").uuid)
    ids["lead_run"] = ok(call(team.lead, "create_run", {"title": "nightly", "kind": "build"}))[
        "run"
    ]["id"]
    archive_conversation(persona=persona, title="yesterday", started_at="2026-11-29T09:00:00Z")
    return ids


@pytest.mark.parametrize("persona_class", CLASSES)
def test_every_tool_of_the_class_stamp_works_through_the_handler(
    persona_class: str, settings
) -> None:
    """V1-MAT-1, V1-STD-3, V1-STD-4, V1-STD-5, V1-STD-6, V1-STD-7, V1-INV-1: each non-human tool
    of the class's stamp, called through handle(), returns real results from the models."""
    allow_loopback(settings)
    team = make_team()
    persona = team.of(persona_class)
    ids = prepare(team, persona)
    with HookServer() as hook:
        session = Session(team, persona, hook.url)
        s = session.use
        s("workspace_write", {"path": "QUEUE.md", "content": "- [ ] review #1\n"})
        s("workspace_list", {})
        s("workspace_stat", {"path": "QUEUE.md"})
        s("workspace_hash", {"path": "QUEUE.md"})
        s("workspace_read", {"path": "QUEUE.md"})
        s("reconcile_wake", {})
        s("list_coordination_messages", {})
        s("ack_coordination_message", {"message": ids["message"]})
        s("lookup_sender", {"message": ids["message"]})
        s("send_broker_message", {"recipient": str(session.peer.uuid), "body": "on it"})
        s("set_summary", {"summary": "Reviews pull requests for core."})
        s("set_activity", {"activity": "reviewing #1", "state": "busy"})
        s("list_peers", {})
        s("list_todos", {"queue": "reviews"})
        s("claim", {"task": ids["todo"]})
        s("list_tasks", {})
        s("get_task", {"task": ids["todo"]})
        s("report_task", {"task": ids["todo"], "notes": "halfway", "status": "progress"})
        s("assign_task", {"task": ids["spare"], "assignee": str(session.peer.uuid)})
        s("create_for", {"recipient": str(session.peer.uuid), "title": "look at #3"})
        s("raise_decision", {"title": "Merge #1?", "options": ["merge", "hold"]})
        decision = session.called["raise_decision"]["decision"]["id"]
        s("list_decisions", {})
        s("resolve_decision", lambda: resolution_for(team, persona, decision))
        s("list_runs", {})
        s("get_run", {"run": ids["lead_run"]})
        s("create_run", {"title": "tests of #1", "kind": "test", "task": ids["todo"]})
        run = session.called.get("create_run", {}).get("run", {}).get("id", "")
        s("append_run_event", {"run": run, "message": "collected 212 tests"})
        s("record_artifact", {"run": run, "name": "junit.xml", "kind": "report"})
        s("advance_run", {"run": run, "state": "running"})
        s("query_graph_context", {"depth": 2})
        s("register_webhook", {"webhook": "staging", "url": hook.url})
        s("trigger_webhook", {"webhook": "staging", "payload": {"ref": "main"}})
        s("complete", {"task": ids["todo"], "notes": "approved"})
        assert set(session.called) == non_human_tools(persona)
    results = session.called
    assert results["workspace_read"]["content"] == "- [ ] review #1\n"
    assert CoordinationMessage.objects.get(uuid=ids["message"]).acked_at is not None
    assert WakeMarker.objects.get(persona=persona).wakes == 1
    assert results["lookup_sender"]["verified"] == {
        "peer": True,
        "agent": True,
        "instance_current": True,
    }
    assert Presence.objects.get(persona=persona).state == "busy"
    assert {p["peer_id"] for p in results["list_peers"]["peers"]} >= {str(session.peer.uuid)}
    assert [t["id"] for t in results["list_todos"]["todos"]] == [ids["todo"], ids["spare"]]
    assert Task.objects.get(uuid=ids["todo"]).state == Task.State.DONE
    assert TaskReport.objects.filter(task__uuid=ids["todo"], by=persona).count() == 2
    if "assign_task" in results:
        assert Task.objects.get(uuid=ids["spare"]).assignee == session.peer
    if "create_for" in results:
        assert Task.objects.filter(created_by=persona, for_persona=session.peer).exists()
    assert Decision.objects.get(uuid=decision).raised_by == persona
    if "resolve_decision" in results:
        assert Decision.objects.get(uuid=decision).resolution == "merge"
    assert results["get_run"]["run"]["id"] == ids["lead_run"]
    if "create_run" in results:
        created = Run.objects.get(uuid=run)
        assert created.state == Run.State.RUNNING
        assert RunEvent.objects.filter(run=created).count() == 4
        assert Artifact.objects.get(run=created).name == "junit.xml"
    graph_ids = {node["id"] for node in results["query_graph_context"]["nodes"]}
    assert f"persona:{persona.uuid}" in graph_ids
    assert any(node.startswith("archive:") for node in graph_ids)
    assert Webhook.objects.get(persona=persona).url == hook.url
    assert WebhookDelivery.objects.get().outcome == WebhookDelivery.Outcome.DELIVERED
    [delivered] = hook.received
    assert delivered["json"]["payload"] == {"ref": "main"}


def resolution_for(team: Team, persona: Persona, decision_id: str) -> dict[str, Any]:
    """The authorization each class needs: none for a lead, the human's or the lane's otherwise."""
    decision = Decision.objects.get(uuid=decision_id)
    if persona.persona_class == PersonaClass.SECRETARY:
        instruction = decision_services.record_human_decision(
            user=team.owner, decision=decision, resolution="merge"
        )
        return {"decision": decision_id, "instruction": str(instruction.uuid)}
    if persona.persona_class == PersonaClass.TEAM_COORDINATOR:
        lane = decision_services.bind_lane(
            actor=team.owner, coordinator=persona, approver=team.owner
        )
        approval = decision_services.approve_in_lane(
            user=team.owner, lane=lane, decision=decision, resolution="merge"
        )
        return {"decision": decision_id, "approval": str(approval.uuid)}
    return {"decision": decision_id, "resolution": "merge"}


@pytest.mark.parametrize("persona_class", CLASSES)
def test_every_tool_outside_the_class_stamp_is_refused(persona_class: str) -> None:
    """V1-CONS-2, V1-POL-2, V1-MAT-1: a tool the stamp lacks is refused, whatever it is."""
    team = make_team()
    persona = team.of(persona_class)
    granted = set(load_active_stamp(persona).mcp_tools)
    outside = sorted(VERB_NAMES - granted)
    assert outside, "every class lacks some tool of the catalogue"
    for tool in outside:
        refused(call(persona, tool, {}), "not_granted")


def test_a_coder_deputy_lacks_resolve_and_assign() -> None:
    """V1-MAT-1, V1-MAT-3: the deputy's stamp has neither; the handler refuses both."""
    team = make_team()
    granted = set(load_active_stamp(team.deputy).mcp_tools)
    assert {"resolve_decision", "assign_task", "create_for"}.isdisjoint(granted)
    for class_, persona in (("secretary", team.secretary), ("team-coordinator", team.coordinator)):
        tools = set(load_active_stamp(persona).mcp_tools)
        assert {"create_run", "advance_run", "append_run_event", "record_artifact"}.isdisjoint(
            tools
        ), class_
