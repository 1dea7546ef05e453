"""query_graph_context: read-only, bounded, confined to the namespace and the persona's lineage."""

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext

from personas.models import PersonaClass
from runtime.models import ConversationArchive
from runtime.tools.graph import MAX_DEPTH, MAX_NODES, archive_conversation
from runtime.tools.work import create_todo
from tests.factories import address, make_agent, make_owner
from tests.runtime_support import call, standing_persona
from tests.tools_support import every_tool, ok, refused

pytestmark = pytest.mark.django_db

WHEN = "2026-11-29T09:00:00Z"


def member(owner, agent, persona_class: str, path: str, namespace: str, **fields):
    return standing_persona(
        owner,
        agent=agent,
        persona_class=persona_class,
        extra=every_tool(persona_class),
        address=address(path),
        graph_namespace=namespace,
        **fields,
    )


@pytest.fixture
def project():
    """A core team sharing namespace work/core, a web lead in work/web, a workspace coordinator
    in namespace work, and another owner whose personas also say work/core."""
    owner = make_owner()
    agent = make_agent(owner)
    lead = member(owner, agent, PersonaClass.PROJECT_LEAD, "work/core/lead", "work/core")
    deputy = member(owner, agent, PersonaClass.CODER_DEPUTY, "work/core/deputy", "work/core")
    web = member(owner, agent, PersonaClass.PROJECT_LEAD, "work/web/lead", "work/web")
    coordinator = member(owner, agent, PersonaClass.TEAM_COORDINATOR, "work/coordinator", "work")
    stranger_owner = make_owner()
    stranger = member(
        stranger_owner,
        make_agent(stranger_owner),
        PersonaClass.PROJECT_LEAD,
        "work/core/lead",
        "work/core",
    )
    todo = create_todo(owner=owner, queue="reviews", title="review #1")
    ok(call(deputy, "claim", {"task": str(todo.uuid)}))
    ok(call(deputy, "create_run", {"title": "tests", "kind": "test", "task": str(todo.uuid)}))
    ok(call(web, "create_run", {"title": "web build", "kind": "build"}))
    ok(call(stranger, "raise_decision", {"title": "stranger's decision"}))
    return {
        "lead": lead,
        "deputy": deputy,
        "web": web,
        "coordinator": coordinator,
        "stranger": stranger,
        "todo": todo,
    }


def graph(persona, **arguments) -> dict:
    return ok(call(persona, "query_graph_context", arguments))


def titles(result: dict) -> set[str]:
    return {node.get("title") or node.get("name") for node in result["nodes"]}


def test_the_graph_holds_the_namespaces_personas_agents_tasks_decisions_and_runs(project) -> None:
    """V1-STD-5: a project graph of personas, agents, tasks, decisions and runs."""
    ok(call(project["lead"], "raise_decision", {"title": "Split the parser?"}))
    result = graph(project["lead"], depth=4)
    assert result["namespace"] == "work/core"
    kinds = {node["kind"] for node in result["nodes"]}
    assert kinds == {"persona", "agent", "task", "decision", "run"}
    assert {"review #1", "tests", "Split the parser?"} <= titles(result)
    edges = {
        (e["from"].split(":")[0], e["relation"], e["to"].split(":")[0]) for e in result["edges"]
    }
    assert ("run", "for_task", "task") in edges
    assert ("task", "assigned_to", "persona") in edges
    assert ("persona", "runs_on", "agent") in edges


def test_the_graph_never_leaves_the_namespace_or_the_owner(project) -> None:
    """V1-STD-5, V1-GB-6: other namespaces and other owners' records are not in the graph."""
    result = graph(project["lead"], depth=MAX_DEPTH, max_nodes=MAX_NODES)
    ids = {node["id"] for node in result["nodes"]}
    assert f"persona:{project['deputy'].uuid}" in ids
    assert f"persona:{project['web'].uuid}" not in ids
    assert f"persona:{project['coordinator'].uuid}" not in ids
    assert f"persona:{project['stranger'].uuid}" not in ids
    assert not {"web build", "stranger's decision"} & titles(result)
    refused(
        call(project["lead"], "query_graph_context", {"start": f"persona:{project['web'].uuid}"}),
        "out_of_scope",
    )
    stranger_todo = create_todo(owner=project["stranger"].agent.owner, queue="q", title="t")
    refused(
        call(project["lead"], "query_graph_context", {"start": f"task:{stranger_todo.uuid}"}),
        "not_found",
    )


def test_a_wider_namespace_sees_the_namespaces_below_it_and_not_the_reverse(project) -> None:
    """V1-STD-5: namespace work covers work/core and work/web; work/core does not cover work."""
    wide = graph(project["coordinator"], depth=MAX_DEPTH, max_nodes=MAX_NODES)
    ids = {node["id"] for node in wide["nodes"]}
    for name in ("lead", "deputy", "web"):
        assert f"persona:{project[name].uuid}" in ids
    assert "web build" in titles(wide)
    assert f"persona:{project['stranger'].uuid}" not in ids
    start = f"persona:{project['coordinator'].uuid}"
    refused(call(project["lead"], "query_graph_context", {"start": start}), "out_of_scope")


def test_requests_above_the_bounds_are_clamped_and_say_so(project) -> None:
    """V1-STD-5: depth and node count are bounded; a clamp is reported, never silent."""
    result = graph(project["lead"], depth=50, max_nodes=10_000, time_budget_ms=10**9)
    assert result["limits"]["depth"] == MAX_DEPTH
    assert result["limits"]["max_nodes"] == MAX_NODES
    assert result["clamped"]["depth"] == {"requested": 50, "used": MAX_DEPTH}
    assert result["clamped"]["max_nodes"] == {"requested": 10_000, "used": MAX_NODES}
    assert "time_budget_ms" in result["clamped"]


def test_a_walk_stopped_by_a_bound_says_which(project, settings) -> None:
    """V1-STD-5: node count and time budget truncate the walk and report it."""
    small = graph(project["lead"], depth=MAX_DEPTH, max_nodes=2)
    assert len(small["nodes"]) == 2
    assert small["truncated"] == ["max_nodes"]
    assert all(
        e["from"] in {n["id"] for n in small["nodes"]}
        and e["to"] in {n["id"] for n in small["nodes"]}
        for e in small["edges"]
    )
    only_start = graph(project["lead"], depth=0)
    assert [n["id"] for n in only_start["nodes"]] == [f"persona:{project['lead'].uuid}"]
    assert only_start["truncated"] == []
    settings.VIRGO_GRAPH_TIME_BUDGET_MS = 0
    out_of_time = graph(project["lead"], depth=MAX_DEPTH)
    assert out_of_time["truncated"] == ["time_budget"]
    assert len(out_of_time["nodes"]) == 1


def test_the_query_is_read_only(project) -> None:
    """V1-STD-5: the whole call, handler included, writes nothing."""
    with CaptureQueriesContext(connection) as queries:
        graph(project["lead"], depth=MAX_DEPTH)
    writes = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))
    ]
    assert writes == []


def test_bad_graph_arguments_are_refused(project) -> None:
    for arguments in (
        {"start": "persona"},
        {"start": "secret:abc"},
        {"start": "task:not-a-uuid"},
        {"depth": -1},
        {"max_nodes": 0},
        {"kinds": ["persona", "credentials"]},
    ):
        refused(call(project["lead"], "query_graph_context", arguments), "invalid_arguments")


def test_the_persona_reads_its_own_archive_lineage(project) -> None:
    """V1-STD-6: the persona's own conversation-archive lineage through the graph service."""
    lead = project["lead"]
    first = archive_conversation(persona=lead, title="kickoff", started_at=WHEN)
    second = archive_conversation(persona=lead, title="design", started_at=WHEN, parent=first)
    third = archive_conversation(persona=lead, title="review", started_at=WHEN, parent=second)
    result = graph(lead, start=f"archive:{third.uuid}", kinds=["archive"], depth=MAX_DEPTH)
    assert [n["title"] for n in result["nodes"]] == ["review", "design", "kickoff"]
    assert {(e["from"], e["relation"], e["to"]) for e in result["edges"]} >= {
        (f"archive:{third.uuid}", "continues", f"archive:{second.uuid}"),
        (f"archive:{second.uuid}", "continues", f"archive:{first.uuid}"),
    }
    from_self = graph(lead, kinds=["persona", "archive"], depth=1)
    assert {n["title"] for n in from_self["nodes"] if n["kind"] == "archive"} == {
        "kickoff",
        "design",
        "review",
    }


def test_another_personas_archives_stay_out_of_scope(project) -> None:
    """V1-STD-6: never another persona's archive, even one sharing the namespace."""
    lead, deputy = project["lead"], project["deputy"]
    mine = archive_conversation(persona=lead, title="mine", started_at=WHEN)
    theirs = archive_conversation(persona=deputy, title="theirs", started_at=WHEN)
    refused(call(lead, "query_graph_context", {"start": f"archive:{theirs.uuid}"}), "out_of_scope")
    everything = graph(lead, depth=MAX_DEPTH, max_nodes=MAX_NODES)
    archives = {n["title"] for n in everything["nodes"] if n["kind"] == "archive"}
    assert archives == {"mine"}
    deputy_view = graph(deputy, depth=MAX_DEPTH, max_nodes=MAX_NODES)
    assert {n["title"] for n in deputy_view["nodes"] if n["kind"] == "archive"} == {"theirs"}
    with pytest.raises(ValidationError):
        archive_conversation(persona=lead, title="x", started_at=WHEN, parent=theirs)
    ConversationArchive.objects.filter(pk=mine.pk).update(parent=theirs)
    walked = graph(lead, start=f"archive:{mine.uuid}", depth=MAX_DEPTH)
    assert "theirs" not in titles(walked)


@pytest.mark.parametrize("start", ["agent:²", "agent:-1", "agent:1e3", "task:not-a-uuid", "nope:1"])
def test_a_malformed_start_node_is_an_argument_error(project, start: str) -> None:
    """V1-STD-5: a start the graph cannot name is refused clearly, never a server error."""
    result = refused(
        call(project["lead"], "query_graph_context", {"start": start}), "invalid_arguments"
    )
    assert "start must be" in result["reason"]
