"""The switchboard todo verbs over the task model, confined to the persona's queues (SPEC-0009)."""

import pytest

from runtime.models import DecisionRecord, Task, Webhook
from runtime.tools.work import create_todo
from tests.factories import DEPLOYER_VERBS, REVIEWER_VERBS, address, make_agent, make_owner
from tests.runtime_support import call, standing_persona
from tests.tools_support import make_team, ok, refused

pytestmark = pytest.mark.django_db


@pytest.fixture
def pair():
    """The scenario's two personas of one agent: a reviewer on reviews, a deployer on deploys."""
    owner = make_owner()
    agent = make_agent(owner)
    reviewer = standing_persona(
        owner,
        agent=agent,
        name="Reviewer",
        extra=tuple(REVIEWER_VERBS),
        queues=["reviews"],
        address=address("work/core/reviewer"),
    )
    deployer = standing_persona(
        owner,
        agent=agent,
        name="Deployer",
        extra=tuple(DEPLOYER_VERBS),
        queues=["deploys"],
        address=address("work/core/deployer"),
    )
    review = create_todo(owner=owner, queue="reviews", title="review #12")
    deploy = create_todo(owner=owner, queue="deploys", title="deploy 2.4")
    return reviewer, deployer, review, deploy


def state(task: Task) -> tuple[str, int | None]:
    task.refresh_from_db()
    return task.state, task.assignee_id


def assert_cross_queue_denial(result: dict) -> None:
    assert (result["ok"], result["code"], result["boundary"]) == (
        False,
        "boundary_denied",
        "cross-scope-access",
    )


def test_the_reviewer_cannot_act_on_the_deploys_queue_nor_use_the_deployers_verbs(pair) -> None:
    """S9-SCN-1, S9-REC-4: list, claim and complete in deploys are refused, and the webhook
    verbs are not the reviewer's; its own queue works."""
    reviewer, deployer, review, deploy = pair
    assert_cross_queue_denial(call(reviewer, "list_todos", {"queue": "deploys"}))
    listed = ok(call(reviewer, "list_todos"))["todos"]
    assert [t["id"] for t in listed] == [str(review.uuid)]
    refused(call(reviewer, "claim", {"task": str(deploy.uuid)}), "out_of_scope")
    ok(call(deployer, "claim", {"task": str(deploy.uuid)}))
    refused(call(reviewer, "complete", {"task": str(deploy.uuid)}), "out_of_scope")
    assert state(deploy) == (Task.State.CLAIMED, deployer.pk)
    for verb in ("register_webhook", "trigger_webhook"):
        refused(call(reviewer, verb, {"webhook": "prod"}), "not_granted")
    assert not DecisionRecord.objects.exists()
    ok(call(reviewer, "claim", {"task": str(review.uuid)}))
    ok(call(reviewer, "complete", {"task": str(review.uuid)}))
    assert state(review) == (Task.State.DONE, reviewer.pk)


def test_the_deployer_cannot_act_on_the_reviews_queue(pair) -> None:
    """S9-SCN-1: and vice versa: the deployer's verbs reach only deploys."""
    reviewer, deployer, review, deploy = pair
    assert_cross_queue_denial(call(deployer, "list_todos", {"queue": "reviews"}))
    assert [t["id"] for t in ok(call(deployer, "list_todos"))["todos"]] == [str(deploy.uuid)]
    refused(call(deployer, "claim", {"task": str(review.uuid)}), "out_of_scope")
    ok(call(reviewer, "claim", {"task": str(review.uuid)}))
    refused(call(deployer, "complete", {"task": str(review.uuid)}), "out_of_scope")
    refused(call(deployer, "get_task", {"task": str(review.uuid)}), "out_of_scope")
    assert state(review) == (Task.State.CLAIMED, reviewer.pk)
    held = call(deployer, "register_webhook", {"webhook": "prod", "url": "https://ci.example/h"})
    assert held["code"] == "confirmation_required"
    assert not Webhook.objects.exists()


def test_a_todo_is_claimed_once_and_completed_by_its_claimant() -> None:
    """S9-SCN-1, V1-STD-4: claim, list mine, complete; a second claimant gets a conflict."""
    team = make_team()
    todo = create_todo(owner=team.owner, queue="reviews", title="review #3")
    ok(call(team.deputy, "claim", {"task": str(todo.uuid)}))
    assert call(team.lead, "claim", {"task": str(todo.uuid)})["code"] == "conflict"
    refused(call(team.lead, "complete", {"task": str(todo.uuid)}), "not_authorized")
    mine = ok(call(team.deputy, "list_todos", {"state": "mine"}))["todos"]
    assert [(t["id"], t["relation"]) for t in mine] == [(str(todo.uuid), ["assignee"])]
    ok(call(team.deputy, "complete", {"task": str(todo.uuid), "notes": ["lgtm", "one nit"]}))
    assert call(team.deputy, "complete", {"task": str(todo.uuid)})["code"] == "conflict"
    report = todo.reports.get()
    assert (report.status, report.notes) == ("done", "lgtm\none nit")


def test_create_for_puts_a_todo_into_the_recipients_queue_for_it_alone() -> None:
    """S9-SCN-3 (behaviour of create_for), S9-SCN-1: delegation adds one open todo for the
    recipient in a queue it is bound to; nobody else on that queue may take it."""
    team = make_team()
    deployer = standing_persona(
        team.owner,
        agent=team.agent,
        extra=tuple(DEPLOYER_VERBS),
        queues=["deploys"],
        address=address("work/core/deployer"),
    )
    created = ok(
        call(team.lead, "create_for", {"recipient": str(deployer.uuid), "title": "ship 2.4"})
    )["todo"]
    assert (created["queue"], created["for"]["peer_id"], created["relation"]) == (
        "deploys",
        str(deployer.uuid),
        ["creator"],
    )
    todo = Task.objects.get(uuid=created["id"])
    assert [t["id"] for t in ok(call(deployer, "list_todos"))["todos"]] == [created["id"]]
    other = standing_persona(
        team.owner,
        agent=team.agent,
        extra=tuple(DEPLOYER_VERBS),
        queues=["deploys"],
        address=address("work/core/releaser"),
    )
    assert ok(call(other, "list_todos"))["todos"] == []
    refused(call(other, "claim", {"task": created["id"]}), "not_authorized")
    assert [t["id"] for t in ok(call(team.lead, "list_tasks"))["tasks"]] == [created["id"]]
    ok(call(deployer, "claim", {"task": created["id"]}))
    ok(call(deployer, "complete", {"task": created["id"]}))
    assert ok(call(team.lead, "get_task", {"task": created["id"]}))["task"]["state"] == "done"
    assert state(todo) == (Task.State.DONE, deployer.pk)


def test_create_for_is_confined_to_the_recipients_queues_and_the_same_owner() -> None:
    """S9-SCN-1, V1-GB-6."""
    team = make_team()
    stranger = make_team()
    lead = str(team.lead.uuid)
    refused(
        call(team.coordinator, "create_for", {"recipient": lead, "title": "x", "for_queue": "ops"}),
        "out_of_scope",
    )
    refused(
        call(team.coordinator, "create_for", {"recipient": str(stranger.lead.uuid), "title": "x"}),
        "not_found",
    )
    refused(call(team.lead, "create_for", {"recipient": lead, "title": "x"}), "invalid_arguments")
    assert_cross_queue_denial(
        call(team.coordinator, "create_for", {"recipient": lead, "title": "x", "queue": "ops"})
    )
    assert not Task.objects.exists()


def test_a_recipient_on_several_queues_is_named_a_queue() -> None:
    team = make_team(queues=["reviews", "triage"])
    lead = str(team.lead.uuid)
    refused(
        call(team.coordinator, "create_for", {"recipient": lead, "title": "x"}), "invalid_arguments"
    )
    todo = ok(
        call(
            team.coordinator,
            "create_for",
            {"recipient": lead, "title": "x", "for_queue": "triage"},
        )
    )["todo"]
    assert todo["queue"] == "triage"


def test_a_coder_deputy_cannot_delegate() -> None:
    """V1-MAT-1: create_for belongs to the tasks: assign bundle, '-' for a coder deputy."""
    team = make_team()
    refused(
        call(team.deputy, "create_for", {"recipient": str(team.lead.uuid), "title": "x"}),
        "not_granted",
    )


def test_todos_of_another_owner_are_never_seen_or_taken() -> None:
    team = make_team()
    theirs = create_todo(owner=make_owner(), queue="reviews", title="not yours")
    assert ok(call(team.deputy, "list_todos"))["todos"] == []
    refused(call(team.deputy, "claim", {"task": str(theirs.uuid)}), "not_found")
    assert state(theirs) == (Task.State.OPEN, None)
