"""Run and artifact tools: read for all in scope; write for a lead, and a deputy on its task."""

import pytest

from personas.models import PersonaClass
from runtime import confirmations
from runtime.models import Artifact, DecisionRecord, Run
from runtime.tools.work import create_todo
from stamps.profiles import CLASSES
from tests.factories import address
from tests.runtime_support import call, correlation, standing_persona
from tests.tools_support import make_team, ok, refused

pytestmark = pytest.mark.django_db


def assigned_todo(team, persona) -> str:
    todo = create_todo(owner=team.owner, queue="reviews", title="fix flaky test")
    ok(call(persona, "claim", {"task": str(todo.uuid)}))
    return str(todo.uuid)


@pytest.mark.parametrize("persona_class", CLASSES)
def test_every_class_lists_and_reads_the_runs_of_its_scope(persona_class: str) -> None:
    """V1-MAT-1: runs and artifacts are at least R for every class."""
    team = make_team()
    run = ok(call(team.lead, "create_run", {"title": "nightly", "kind": "build"}))["run"]
    web = standing_persona(
        team.owner,
        agent=team.agent,
        persona_class=PersonaClass.PROJECT_LEAD,
        address=address("work/web/lead"),
    )
    other = ok(call(web, "create_run", {"title": "web build", "kind": "build"}))["run"]
    ok(call(make_team().lead, "create_run", {"title": "not ours", "kind": "build"}))
    persona = team.of(persona_class)
    listed = {r["title"] for r in ok(call(persona, "list_runs"))["runs"]}
    in_project = persona_class in (PersonaClass.PROJECT_LEAD, PersonaClass.CODER_DEPUTY)
    assert listed == ({"nightly"} if in_project else {"nightly", "web build"})
    got = ok(call(persona, "get_run", {"run": run["id"]}))
    assert got["run"]["state"] == "created"
    assert got["events"][0]["kind"] == "state"
    if in_project:
        refused(call(persona, "get_run", {"run": other["id"]}), "out_of_scope")


def test_a_lead_drives_a_run_through_its_states_with_events_and_artifacts() -> None:
    """V1-MAT-1: runs R/W for the lead."""
    team = make_team()
    run = ok(call(team.lead, "create_run", {"title": "release build", "kind": "build"}))["run"]
    rid = run["id"]
    ok(call(team.lead, "advance_run", {"run": rid, "state": "running"}))
    ok(call(team.lead, "append_run_event", {"run": rid, "message": "compiled", "data": {"n": 3}}))
    artifact = ok(
        call(
            team.lead,
            "record_artifact",
            {
                "run": rid,
                "name": "virgo-2.4.whl",
                "kind": "wheel",
                "location": "worktrees/core/dist/virgo-2.4.whl",
                "sha256": "A" * 64,
                "size": 123456,
            },
        )
    )["artifact"]
    assert (artifact["sha256"], artifact["published_to"]) == ("a" * 64, None)
    ok(call(team.lead, "advance_run", {"run": rid, "state": "succeeded", "note": "all green"}))
    assert call(team.lead, "advance_run", {"run": rid, "state": "running"})["code"] == "conflict"
    assert call(team.lead, "append_run_event", {"run": rid, "message": "late"})["code"] == (
        "conflict"
    )
    got = ok(call(team.deputy, "get_run", {"run": rid}))
    assert [e["seq"] for e in got["events"]] == [1, 2, 3, 4, 5]
    assert [e["kind"] for e in got["events"]] == ["state", "state", "log", "artifact", "state"]
    assert got["run"]["finished_at"] is not None
    assert [a["name"] for a in got["artifacts"]] == ["virgo-2.4.whl"]


def test_a_deputy_writes_runs_only_for_its_assigned_task() -> None:
    """V1-MAT-1: 'R/W (assigned task)' for a coder deputy."""
    team = make_team()
    refused(call(team.deputy, "create_run", {"title": "t", "kind": "test"}), "not_authorized")
    unassigned = str(create_todo(owner=team.owner, queue="reviews", title="not mine").uuid)
    refused(
        call(team.deputy, "create_run", {"title": "t", "kind": "test", "task": unassigned}),
        "not_authorized",
    )
    task = assigned_todo(team, team.deputy)
    run = ok(call(team.deputy, "create_run", {"title": "t", "kind": "test", "task": task}))["run"]
    ok(call(team.deputy, "advance_run", {"run": run["id"], "state": "running"}))
    ok(call(team.deputy, "append_run_event", {"run": run["id"], "message": "12 passed"}))
    ok(call(team.deputy, "record_artifact", {"run": run["id"], "name": "junit.xml"}))
    leads = ok(call(team.lead, "create_run", {"title": "lead's", "kind": "build"}))["run"]
    for tool, arguments in (
        ("advance_run", {"run": leads["id"], "state": "running"}),
        ("append_run_event", {"run": leads["id"], "message": "x"}),
        ("record_artifact", {"run": leads["id"], "name": "x"}),
    ):
        refused(call(team.deputy, tool, arguments), "not_authorized")
    assert Run.objects.get(uuid=leads["id"]).state == Run.State.CREATED
    ok(call(team.deputy, "complete", {"task": task}))
    refused(
        call(team.deputy, "create_run", {"title": "again", "kind": "test", "task": task}),
        "conflict",
    )


def test_a_deputys_run_is_closed_to_it_once_the_task_is_reassigned() -> None:
    team = make_team()
    task = assigned_todo(team, team.deputy)
    run = ok(call(team.deputy, "create_run", {"title": "t", "kind": "test", "task": task}))["run"]
    ok(call(team.lead, "assign_task", {"task": task, "assignee": str(team.lead.uuid)}))
    refused(
        call(team.deputy, "advance_run", {"run": run["id"], "state": "running"}), ("not_authorized")
    )


@pytest.mark.parametrize("persona_class", [PersonaClass.SECRETARY, PersonaClass.TEAM_COORDINATOR])
def test_secretary_and_coordinator_only_read_runs(persona_class: str) -> None:
    """V1-MAT-1: runs and artifacts are R for secretary and team coordinator."""
    team = make_team()
    for tool in ("create_run", "advance_run", "append_run_event", "record_artifact"):
        refused(call(team.of(persona_class), tool, {"title": "x", "kind": "build"}), "not_granted")


@pytest.mark.parametrize("persona", ["lead", "deputy"])
@pytest.mark.parametrize("kind", ["deploy", "publish"])
def test_a_deploy_or_publish_run_waits_for_the_bound_human(persona: str, kind: str) -> None:
    """V1-GB-3, V1-CONF-1, V1-CONF-2: a deployment/publication run is held, routed to the bound
    human authority, recorded before it runs, then runs exactly once."""
    team = make_team()
    who = getattr(team, persona)
    arguments = {"title": f"{kind} 2.4", "kind": kind}
    if persona == "deputy":
        arguments["task"] = assigned_todo(team, who)
    cid = correlation()
    held = call(who, "create_run", arguments, cid)
    assert (held["code"], held["boundary"]) == (
        "confirmation_required",
        "external-publication-or-deployment",
    )
    assert not Run.objects.filter(kind=kind).exists()
    record = DecisionRecord.objects.get(correlation_id=cid)
    assert record.authority_user == team.owner
    assert record.operation["shape"]["arguments"]["kind"] == kind
    confirmations.decide(record=record, approve=True, user=team.owner)
    first = ok(call(who, "create_run", arguments, cid))
    again = ok(call(who, "create_run", arguments, cid))
    assert first == again
    assert Run.objects.filter(kind=kind).count() == 1


def test_an_artifact_published_outside_waits_for_the_bound_human() -> None:
    """V1-GB-3: recording an artifact as published outside is publication; recording it is not."""
    team = make_team()
    rid = ok(call(team.lead, "create_run", {"title": "docs", "kind": "build"}))["run"]["id"]
    ok(call(team.lead, "record_artifact", {"run": rid, "name": "site.tar"}))
    cid = correlation()
    arguments = {"run": rid, "name": "site.tar", "publish_to": "https://docs.example.org/2.4/"}
    held = call(team.lead, "record_artifact", arguments, cid)
    assert held["boundary"] == "external-publication-or-deployment"
    assert Artifact.objects.count() == 1
    record = DecisionRecord.objects.get(correlation_id=cid)
    confirmations.decide(record=record, approve=False, user=team.owner)
    assert call(team.lead, "record_artifact", arguments, cid)["code"] == "denied"
    assert Artifact.objects.count() == 1


def test_bad_run_arguments_fail_without_writing() -> None:
    team = make_team()
    for arguments in (
        {"title": "x"},
        {"title": "x", "kind": "Deploy"},
        {"title": "x", "kind": "build", "force": True},
        {"title": " ", "kind": "build"},
    ):
        result = call(team.lead, "create_run", arguments)
        assert result["ok"] is False, arguments
    rid = ok(call(team.lead, "create_run", {"title": "x", "kind": "build"}))["run"]["id"]
    for arguments in (
        {"run": rid, "name": "a", "sha256": "xyz"},
        {"run": rid, "name": ""},
        {"run": rid, "name": "a", "size": -1},
    ):
        refused(call(team.lead, "record_artifact", arguments), "invalid_arguments")
    refused(
        call(team.lead, "append_run_event", {"run": rid, "kind": "state", "message": "x"}),
        ("invalid_arguments"),
    )
    assert not Artifact.objects.exists()
