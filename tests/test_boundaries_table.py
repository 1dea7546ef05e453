"""The classifier table: every row's match examples match, its neighbours do not."""

import dataclasses
import hashlib
from typing import Any

import pytest

from personas.catalogue import VERBS_BY_NAME, Boundary
from runtime.operations import Binding, InvalidOperation, Operation, normalise, touched_paths
from runtime.policy import Verdict, classify, classify_example
from runtime.rules import (
    EXAMPLE_BINDING,
    EXAMPLE_PERSONA,
    OTHER_PERSONA,
    PRIVATE_KEY,
    RULES,
    RULES_BY_ID,
    Example,
    Outcome,
    Rule,
)
from runtime.tools.params import fingerprint

MATCHES = [(rule, example) for rule in RULES for example in rule.match]
NEIGHBOURS = [(rule, example) for rule in RULES for example in rule.not_match]


def _label(value: object) -> str:
    return value.id if isinstance(value, Rule) else getattr(value, "tool", "")


@pytest.mark.parametrize(("rule", "example"), MATCHES, ids=_label)
def test_each_rule_matches_its_examples(rule: Rule, example) -> None:
    """V1-GB-1, V1-GB-2, V1-GB-3, V1-GB-4, V1-GB-5, V1-GB-6: examples get the row's verdict."""
    verdict = classify_example(example)
    assert (verdict.rule, verdict.outcome, verdict.boundary) == (
        rule.id,
        rule.outcome,
        rule.boundary,
    )
    assert verdict.reason


@pytest.mark.parametrize(("rule", "example"), NEIGHBOURS, ids=_label)
def test_each_rule_leaves_its_neighbours_alone(rule: Rule, example) -> None:
    """V1-POL-1: the near neighbour of a refused call is not refused by that row."""
    verb = VERBS_BY_NAME[example.tool]
    op = normalise(
        tool=example.tool,
        action=verb.handler_action,
        arguments=example.arguments,
        binding=EXAMPLE_BINDING,
    )
    assert rule.test(op, EXAMPLE_BINDING) is None
    assert classify_example(example).rule != rule.id


def test_every_global_boundary_has_a_row_and_every_row_has_examples_on_both_sides() -> None:
    """V1-GB-1, V1-GB-2, V1-GB-3, V1-GB-4, V1-GB-5, V1-GB-6: all six covered, deny rows deny."""
    assert {rule.boundary for rule in RULES} == set(Boundary)
    for rule in RULES:
        assert rule.match and rule.not_match, rule.id
        assert (rule.outcome is Outcome.DENY) == rule.boundary.is_deny, rule.id
    assert len({rule.id for rule in RULES}) == len(RULES)


def test_deny_wins_over_confirm() -> None:
    """V1-GB-4 before V1-GB-1: writing a private key into a credential file is refused."""
    verdict = classify_example(
        Example(
            "workspace_write",
            {"path": "memory/.env", "content": "-----BEGIN RSA PRIVATE KEY-----\nabc"},
        )
    )
    assert (verdict.outcome, verdict.boundary) == (
        Outcome.DENY,
        Boundary.SECRET_CREDENTIAL_VALUES,
    )


def test_ordinary_recoverable_work_is_allowed_with_no_prompt() -> None:
    """V1-POL-1, V1-ACC-3: the default is positive."""
    for tool, arguments in [
        ("workspace_write", {"path": "QUEUE.md", "content": "- [ ] next"}),
        ("workspace_write", {"path": "memory/a.md", "content": "x", "mode": "append"}),
        ("workspace_read", {"path": "memory/a.md", "offset": 10, "length": 5}),
        ("workspace_list", {}),
    ]:
        assert classify_example(Example(tool, arguments)).outcome is Outcome.ALLOW


def test_access_confirm_in_the_stamp_asks_even_without_a_boundary() -> None:
    """V1-POL-2: a tool stamped `access: confirm` is asked about though no rule fires."""
    op = normalise(
        tool="report_task",
        action="tasks.report",
        arguments={"task": "t1"},
        binding=EXAMPLE_BINDING,
    )
    assert classify(op, EXAMPLE_BINDING).outcome is Outcome.ALLOW
    verdict = classify(op, EXAMPLE_BINDING, access="confirm")
    assert (verdict.outcome, verdict.rule) == (Outcome.CONFIRM, "stamp-access-confirm")


def test_a_scope_wide_persona_has_no_project() -> None:
    binding = Binding(persona="p", workspace="work", project=None)
    op = normalise(tool="workspace_list", action="workspace.list", arguments={}, binding=binding)
    assert op.target == {"workspace": "work", "project": None, "persona": "p", "path": ""}
    crossing = normalise(
        tool="workspace_list",
        action="workspace.list",
        arguments={"project": "core"},
        binding=binding,
    )
    assert classify(crossing, binding).rule == "cross-project"


@pytest.mark.parametrize(
    "arguments",
    [
        {"path": "QUEUE.md", "colour": "red"},
        {"path": "QUEUE.md", "offset": "10"},
        {"path": "QUEUE.md", "offset": True},
        {"path": "memory/\x00"},
        {"workspace": ""},
    ],
)
def test_nonsense_arguments_are_invalid_not_guessed(arguments: dict) -> None:
    with pytest.raises(InvalidOperation):
        normalise(
            tool="workspace_read",
            action="workspace.read",
            arguments=arguments,
            binding=EXAMPLE_BINDING,
        )


def test_an_argument_a_workspace_tool_does_not_take_is_refused_naming_the_tool() -> None:
    """VX-SEC-2: the declaration is the whole of what a tool takes; an argument outside it is
    refused, not keyed, and the error names the tool and the argument."""
    with pytest.raises(InvalidOperation) as refused:
        normalise(
            tool="workspace_read",
            action="workspace.read",
            arguments={"path": "notes.md", "follow": True},
            binding=EXAMPLE_BINDING,
        )
    assert str(refused.value).startswith("workspace_read does not take follow")


def test_the_key_holds_every_argument_as_its_declaration_says() -> None:
    """V1-PR-1, VX-SEC-2: the path is the target; the content is shape by fingerprint, so two
    writes of different text to one file are two operations; the mode is shape by value."""

    def op(**arguments):
        return normalise(
            tool="workspace_write",
            action="workspace.write",
            arguments=arguments,
            binding=EXAMPLE_BINDING,
        )

    a, b = op(path="memory/a.md", content="one"), op(path="memory/a.md", content="two")
    assert a.scope_key == b.scope_key == {"path": "memory/a.md"}
    assert a.shape == {
        "arguments": {
            "content": {"sha256": hashlib.sha256(b"one").hexdigest(), "bytes": 3},
            "mode": "replace",
            "expected_sha256": None,
        }
    }
    assert a.shape != b.shape
    deleting = op(path="memory/a.md", mode="delete")
    assert deleting.shape != a.shape
    assert op(path="memory/b.md", content="one").scope_key != a.scope_key


def test_an_argument_the_tool_does_not_declare_is_in_the_key_by_fingerprint() -> None:
    """VX-SEC-2: nothing given is left out of the key, declared or not."""
    op = normalise(
        tool="assign_task",
        action="tasks.assign",
        arguments={"task": "t1", "assignee": "p2", "permissions": ["merge"]},
        binding=EXAMPLE_BINDING,
    )
    assert op.shape["arguments"]["permissions"] == fingerprint(["merge"])
    assert op.shape["arguments"]["task"] == fingerprint("t1")


def unknown_tool_call(action: str, arguments: dict[str, Any]) -> Operation:
    """A call of a tool the catalogue does not know: only the rules' own tests judge it."""
    return normalise(
        tool="future_tool", action=action, arguments=arguments, binding=EXAMPLE_BINDING
    )


def test_secret_values_are_found_at_any_depth_and_the_reason_says_where() -> None:
    """V1-GB-4, VX-SEC-14: a secret is found as a key or a value however deep it sits in the
    arguments, and the refusal says which argument carries it and what kind of credential the
    detector took it for (VX-SEC-16: a Kingfisher rule's id, or a plugin's secret type)."""
    secret_values = RULES_BY_ID["secret-values"].test
    found = {
        "a key": {"meta": {"headers": {PRIVATE_KEY: "as a key"}}},
        "a value": {"meta": {"headers": {"auth": "AKIAIOSFODNN7EXAMPLE"}}},
        "a list item": {"notes": ["AKIAIOSFODNN7EXAMPLE"]},
        "a value in a list": {"notes": [{"auth": "AKIAIOSFODNN7EXAMPLE"}]},
    }
    reasons = {
        where: secret_values(unknown_tool_call("broker.send", arguments), EXAMPLE_BINDING)
        for where, arguments in found.items()
    }
    aws = "a secret credential value (betterleaks.aws-access-token)"
    assert reasons == {
        "a key": "an argument's key looks like a secret credential value (Private Key)",
        "a value": f"argument 'auth' carries what looks like {aws}",
        "a list item": f"an argument carries what looks like {aws}",
        "a value in a list": f"argument 'auth' carries what looks like {aws}",
    }
    clean = unknown_tool_call("broker.send", {"meta": {"headers": {"auth": "later"}}})
    assert secret_values(clean, EXAMPLE_BINDING) is None


@pytest.mark.parametrize("action", ["graph.drop", "repo.branch.delete", "purge"])
def test_an_action_named_for_destruction_asks_whatever_its_tool(action: str) -> None:
    """V1-GB-2: an action whose last part deletes, drops, purges... is destructive, for a tool
    the catalogue does not know as much as for one it does."""
    destructive = RULES_BY_ID["destructive-flags"].test
    reason = destructive(unknown_tool_call(action, {}), EXAMPLE_BINDING)
    assert reason == f"{action} is destructive"


@pytest.mark.parametrize("action", ["delete.archive", "graph.dropped"])
def test_only_the_last_part_of_an_action_names_it_destructive(action: str) -> None:
    """V1-GB-2: the verb is the action's last part: `delete.archive` archives."""
    destructive = RULES_BY_ID["destructive-flags"].test
    assert destructive(unknown_tool_call(action, {}), EXAMPLE_BINDING) is None


def test_recording_an_artifact_as_published_says_so() -> None:
    """V1-GB-3: the refusal names what the call would do."""
    publication = RULES_BY_ID["publication"].test
    call = unknown_tool_call(
        "runs.record_artifact", {"run": "r1", "name": "app.whl", "publish_to": "https://x.org/"}
    )
    assert publication(call, EXAMPLE_BINDING) == (
        "recording an artifact as published outside the persona publishes it"
    )


def test_a_refusal_out_of_scope_names_what_the_persona_is_bound_to() -> None:
    """V1-GB-6: the refusal of another workspace, project or persona, a foreign queue or a
    foreign human surface names the value asked for and every one the persona is bound to (or
    none)."""
    two = dataclasses.replace(
        EXAMPLE_BINDING, queues=("reviews", "deploys"), surfaces=("teams:chat/ops", "mail:ops")
    )
    bare = dataclasses.replace(EXAMPLE_BINDING, surfaces=())
    post = {"binding": "teams:chat/other", "text": "hi"}
    unprojected = dataclasses.replace(EXAMPLE_BINDING, project=None)
    reasons = [
        RULES_BY_ID["cross-workspace"].test(
            unknown_tool_call("todos.list", {"workspace": "play"}), two
        ),
        RULES_BY_ID["cross-project"].test(
            unknown_tool_call("todos.list", {"project": "side"}), unprojected
        ),
        RULES_BY_ID["cross-persona"].test(
            unknown_tool_call("todos.list", {"persona": OTHER_PERSONA}), two
        ),
        RULES_BY_ID["foreign-queue"].test(unknown_tool_call("queues.take", {"queue": "ops"}), two),
        RULES_BY_ID["foreign-surface"].test(unknown_tool_call("human.send", post), two),
        RULES_BY_ID["foreign-surface"].test(unknown_tool_call("human.send", post), bare),
    ]
    assert reasons == [
        "workspace 'play' is outside this persona's binding (work)",
        "project 'side' is outside this persona's binding (no project)",
        f"persona {OTHER_PERSONA!r} is outside this persona's binding ({EXAMPLE_PERSONA})",
        "queue 'ops' is not bound to this persona (reviews, deploys)",
        "human surface 'teams:chat/other' is not bound to this persona (teams:chat/ops, mail:ops)",
        "human surface 'teams:chat/other' is not bound to this persona (none)",
    ]


def test_ordinary_work_is_allowed_by_the_default_rule_and_says_so() -> None:
    """V1-POL-1: what no rule refuses or asks about is allowed by `default-allow`, with its
    reason; the same call with the stamp's `access: confirm` asks, naming the tool."""
    call = unknown_tool_call("todos.list", {"queue": "reviews"})
    assert classify(call, EXAMPLE_BINDING) == Verdict(
        Outcome.ALLOW, None, "default-allow", "ordinary work inside the binding"
    )
    assert classify(call, EXAMPLE_BINDING, access="confirm") == Verdict(
        Outcome.CONFIRM,
        None,
        "stamp-access-confirm",
        "the stamp grants future_tool with access: confirm",
    )


def test_no_arguments_at_all_is_the_call_with_none() -> None:
    """V1-PR-1: a call that sends no arguments object is normalised as one that sends `{}`."""
    assert normalise(
        tool="workspace_list", action="workspace.list", arguments=None, binding=EXAMPLE_BINDING
    ) == normalise(
        tool="workspace_list", action="workspace.list", arguments={}, binding=EXAMPLE_BINDING
    )


@pytest.mark.parametrize("arguments", [["QUEUE.md"], "QUEUE.md", {1: "QUEUE.md"}])
def test_arguments_that_are_no_object_with_string_keys_are_refused_saying_so(
    arguments: Any,
) -> None:
    """V1-PR-1: nothing is guessed from arguments that are no JSON object."""
    with pytest.raises(InvalidOperation) as refused:
        unknown_tool_call("todos.list", arguments)
    assert str(refused.value) == "arguments must be an object with string keys"


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ({"workspace": None}, "workspace must be a non-empty string"),
        ({"workspace": ""}, "workspace must be a non-empty string"),
        ({"persona": None}, "persona must be a non-empty string"),
        ({"persona": 7}, "persona must be a non-empty string"),
        ({"project": ["core"]}, "project must be a non-empty string"),
        ({"project": ""}, "project must be a non-empty string"),
    ],
)
def test_an_identity_key_that_names_nothing_is_refused_naming_the_key(
    arguments: dict[str, Any], reason: str
) -> None:
    """V1-PR-1: workspace and persona always name something, a project is a name or null; a
    null workspace is not taken for the persona's own."""
    with pytest.raises(InvalidOperation) as refused:
        unknown_tool_call("todos.list", arguments)
    assert str(refused.value) == reason


@pytest.mark.parametrize(
    "value",
    [
        float("nan"),
        float("inf"),
        2**53,
        -(2**53),
        [1, float("nan")],
        {"k": float("-inf")},
        {"k": {"deeper": [2**64]}},
        {1: "one"},
        {1, 2},
        b"bytes",
    ],
    ids=repr,
)
def test_a_value_with_no_canonical_json_form_is_refused(value: Any) -> None:
    """V1-PR-1, VX-SEC-2: a learned choice is keyed on the RFC 8785 form of the arguments; a
    value with none (NaN, an infinity, an integer no JSON reader keeps exactly, a key that is no
    string, a set, bytes) cannot be keyed, so the call is refused rather than keyed loosely."""
    with pytest.raises(InvalidOperation) as refused:
        unknown_tool_call("todos.list", {"value": value})
    assert str(refused.value) == "arguments must be plain JSON values"


def test_the_edges_of_plain_json_are_keyed_by_their_value() -> None:
    """V1-PR-1: the largest exact integers, nulls inside lists and nested objects are plain."""
    value = [2**53 - 1, -(2**53 - 1), None, True, 1.5, {"k": ["v", {"n": 0}]}]
    op = unknown_tool_call("todos.list", {"value": value})
    assert op.shape["arguments"]["value"] == fingerprint(value)


def test_the_workspace_root_is_no_touched_path() -> None:
    """V1-GB-4, V1-GB-6: only named paths are judged as secret or authority material."""
    root = normalise(
        tool="workspace_list", action="workspace.list", arguments={}, binding=EXAMPLE_BINDING
    )
    assert touched_paths(root) == []
    named = normalise(
        tool="workspace_list",
        action="workspace.list",
        arguments={"path": "memory"},
        binding=EXAMPLE_BINDING,
    )
    assert touched_paths(named) == ["memory"]
