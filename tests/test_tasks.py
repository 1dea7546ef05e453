"""Task tools: list/get/report for work the persona owns; assign where the class allows."""

import pytest

from personas.models import PersonaClass
from runtime.models import DecisionRecord, Task, TaskReport
from runtime.tools.work import create_todo
from tests.factories import address, make_owner
from tests.runtime_support import call, standing_persona
from tests.tools_support import make_team, ok, refused

pytestmark = pytest.mark.django_db


def test_list_tasks_shows_the_work_the_persona_owns_and_nothing_else() -> None:
    """V1-STD-4: created, addressed or assigned; not everything in its queues."""
    team = make_team()
    claimed = create_todo(owner=team.owner, queue="reviews", title="claimed by the deputy")
    create_todo(owner=team.owner, queue="reviews", title="open in the queue")
    addressed = create_todo(
        owner=team.owner, queue="reviews", title="for the deputy", for_persona=team.deputy
    )
    ok(call(team.deputy, "claim", {"task": str(claimed.uuid)}))
    delegated = ok(
        call(team.lead, "create_for", {"recipient": str(team.deputy.uuid), "title": "delegated"})
    )["todo"]
    create_todo(owner=make_owner(), queue="reviews", title="another owner's")
    listed = ok(call(team.deputy, "list_tasks"))["tasks"]
    assert [(t["title"], t["relation"]) for t in listed] == [
        ("claimed by the deputy", ["assignee"]),
        ("for the deputy", ["for"]),
        ("delegated", ["for"]),
    ]
    assert [t["id"] for t in ok(call(team.lead, "list_tasks"))["tasks"]] == [delegated["id"]]
    assert str(addressed.uuid) in {t["id"] for t in listed}


def test_get_task_reaches_owned_work_and_the_personas_queues_only() -> None:
    """V1-STD-4, V1-GB-6: another queue is out of scope; another owner's task does not exist."""
    team = make_team()
    queued = create_todo(owner=team.owner, queue="reviews", title="in my queue")
    elsewhere = create_todo(owner=team.owner, queue="deploys", title="not my queue")
    theirs = create_todo(owner=make_owner(), queue="reviews", title="not my owner")
    assert ok(call(team.deputy, "get_task", {"task": str(queued.uuid)}))["task"]["relation"] == []
    refused(call(team.deputy, "get_task", {"task": str(elsewhere.uuid)}), "out_of_scope")
    refused(call(team.deputy, "get_task", {"task": str(theirs.uuid)}), "not_found")
    refused(call(team.deputy, "get_task", {"task": "review-1"}), "invalid_arguments")


def test_report_task_is_for_the_works_owner_and_done_is_the_assignees_word() -> None:
    """V1-STD-4: reports on owned work; get_task shows them in order."""
    team = make_team()
    todo = create_todo(owner=team.owner, queue="reviews", title="review #9")
    task_id = str(todo.uuid)
    refused(call(team.lead, "report_task", {"task": task_id, "notes": "hi"}), "not_authorized")
    ok(call(team.deputy, "claim", {"task": task_id}))
    ok(call(team.deputy, "report_task", {"task": task_id, "notes": "half", "status": "progress"}))
    ok(call(team.deputy, "report_task", {"task": task_id, "status": "blocked", "notes": "CI"}))
    refused(
        call(team.deputy, "report_task", {"task": task_id, "status": "finished"}),
        "invalid_arguments",
    )
    ok(call(team.deputy, "report_task", {"task": task_id, "status": "done", "notes": "merged"}))
    got = ok(call(team.deputy, "get_task", {"task": task_id}))
    assert got["task"]["state"] == "done"
    assert [(r["status"], r["notes"]) for r in got["reports"]] == [
        ("progress", "half"),
        ("blocked", "CI"),
        ("done", "merged"),
    ]
    assert call(team.deputy, "report_task", {"task": task_id, "notes": "more"})["code"] == (
        "conflict"
    )


def test_only_the_assignee_reports_a_task_done() -> None:
    team = make_team()
    delegated = ok(
        call(team.lead, "create_for", {"recipient": str(team.deputy.uuid), "title": "x"})
    )["todo"]
    refused(
        call(team.lead, "report_task", {"task": delegated["id"], "status": "done"}),
        "not_authorized",
    )
    ok(call(team.lead, "report_task", {"task": delegated["id"], "notes": "any news?"}))
    assert Task.objects.get(uuid=delegated["id"]).state == Task.State.OPEN
    assert TaskReport.objects.get().by == team.lead


@pytest.mark.parametrize(
    "persona_class",
    [PersonaClass.SECRETARY, PersonaClass.TEAM_COORDINATOR, PersonaClass.PROJECT_LEAD],
)
def test_assign_hands_a_queued_task_to_a_peer_bound_to_that_queue(persona_class: str) -> None:
    """V1-MAT-1: tasks: assign is W for secretary, coordinator and lead."""
    team = make_team()
    todo = create_todo(owner=team.owner, queue="reviews", title="review #4")
    assigned = ok(
        call(
            team.of(persona_class),
            "assign_task",
            {"task": str(todo.uuid), "assignee": "work/core/deputy"},
        )
    )["task"]
    assert (assigned["state"], assigned["assignee"]["peer_id"]) == (
        "assigned",
        str(team.deputy.uuid),
    )
    ok(call(team.deputy, "claim", {"task": str(todo.uuid)}))
    ok(call(team.deputy, "complete", {"task": str(todo.uuid)}))
    assert Task.objects.get(pk=todo.pk).assigned_by == team.of(persona_class)


def test_assign_refuses_an_assignee_not_bound_to_the_queue_and_tasks_out_of_reach() -> None:
    """V1-GB-6, S9-SCN-1: assignment never puts a persona on a queue its stamp does not bind."""
    team = make_team()
    deployer = standing_persona(
        team.owner, agent=team.agent, queues=["deploys"], address=address("work/core/deployer")
    )
    todo = create_todo(owner=team.owner, queue="reviews", title="review #5")
    refused(
        call(team.lead, "assign_task", {"task": str(todo.uuid), "assignee": str(deployer.uuid)}),
        "out_of_scope",
    )
    deploy = create_todo(owner=team.owner, queue="deploys", title="deploy")
    refused(
        call(team.lead, "assign_task", {"task": str(deploy.uuid), "assignee": str(deployer.uuid)}),
        "out_of_scope",
    )
    assert Task.objects.filter(assignee__isnull=False).count() == 0


def test_a_coder_deputy_cannot_assign() -> None:
    """V1-MAT-1: tasks: assign is '-' for a coder deputy."""
    team = make_team()
    todo = create_todo(owner=team.owner, queue="reviews", title="review #6")
    refused(
        call(team.deputy, "assign_task", {"task": str(todo.uuid), "assignee": "work/core/lead"}),
        "not_granted",
    )


def test_assigning_with_permissions_is_refused_not_put_to_the_human() -> None:
    """V1-GB-1, VX-SEC-2: permissions would be a permission change, but assign_task takes no
    such argument: the call is refused naming it, nothing is assigned and nobody is asked to
    approve a call that could not run (a tool taking permissions would ask: the rule table)."""
    team = make_team()
    todo = create_todo(owner=team.owner, queue="reviews", title="review #8")
    result = call(
        team.lead,
        "assign_task",
        {"task": str(todo.uuid), "assignee": "work/core/deputy", "permissions": ["merge"]},
    )
    assert (result["code"], result["boundary"]) == ("invalid_arguments", None)
    assert "permissions" in result["reason"]
    assert not DecisionRecord.objects.exists()
    assert Task.objects.get(pk=todo.pk).assignee is None
