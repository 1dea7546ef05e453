"""explain (VX-EXPLAIN-1): the verdict and rule handle() reaches, through handle()'s own decision,
with nothing written, asked or run."""

import hashlib
import json
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.core.management import call_command
from django.core.management.base import CommandError

from personas.models import Agent, Persona, PersonaClass
from personas.services.revocation import persona_revoke
from runtime import confirmations, registry, secret_rules
from runtime.explain import explain
from runtime.handler import handle
from runtime.models import DecisionRecord, PromptRegistryEntry, RefusalRecord
from runtime.rules import EXAMPLE_PERSONA, RULES, RULES_BY_ID, Example
from stamps.registry import HANDLERS
from tests.factories import make_owner, stop_standing
from tests.owner_clients import fresh_rate_limits, session_client, token_client  # noqa: F401
from tests.runtime_support import (
    RecordingTransport,
    correlation,
    install_unchecked_stamp,
    recording_transport,
    standing_persona,
)

pytestmark = pytest.mark.django_db

# The codes handle() answers with when its decision stops a call before the tool runs; any
# other answer comes from the tool itself, which explain does not run: the call was allowed.
DECIDED_REFUSALS = frozenset(
    {"not_granted", "invalid_arguments", "not_implemented", "stamp_unavailable", "revoked"}
)


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, settings) -> Path:
    settings.VIRGO_HOME = tmp_path / "home"
    return settings.VIRGO_HOME


@pytest.fixture(autouse=True)
def hub() -> Iterator[RecordingTransport]:
    with recording_transport() as recording:
        yield recording


@pytest.fixture(autouse=True)
def no_outbound(monkeypatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("an outbound request was made")

    monkeypatch.setattr("virgo.outbound.request", refuse)


def rows() -> dict[str, int]:
    return {model._meta.label: model.objects.count() for model in apps.get_models()}


def tree(root: Path) -> list[tuple[str, int]]:
    if not root.exists():
        return []
    return sorted(
        (str(path.relative_to(root)), path.stat().st_mtime_ns) for path in root.rglob("*")
    )


def handled(persona: Persona, tool: str, arguments: dict[str, Any]) -> tuple[str, str]:
    """handle()'s verdict and deciding rule for one call, read from its answer and records."""
    cid = correlation()
    result = handle(persona, tool, arguments, cid)
    code = result.get("code")
    if code == "confirmation_required":
        return "confirm", DecisionRecord.objects.get(correlation_id=cid).rule
    if code in ("boundary_denied", "denied_by_learned_choice"):
        return "deny", RefusalRecord.objects.get(correlation_id=cid).rule
    if code in DECIDED_REFUSALS:
        return "refused", code
    return "allow", "default-allow"


def explained(
    persona: Persona, tool: str, arguments: dict[str, Any], home: Path
) -> tuple[str, str]:
    """explain()'s verdict and rule, asserting it changed nothing at all."""
    # The secrets boundary compiles its rule set once per process, caching Kingfisher's export
    # in the home: a build of the installation's, not a record of this call.
    secret_rules.rule_set()
    before, files = rows(), tree(home)
    found = explain(persona, tool, arguments)
    assert rows() == before, (tool, arguments)
    assert tree(home) == files, (tool, arguments)
    rule = found.rule["id"] if found.verdict != "refused" else found.code
    return found.verdict, rule


def own(example: Example, persona: Persona) -> dict[str, Any]:
    """An example of the table as the real persona would make it (its uuid for the example's)."""
    text = json.dumps(example.arguments).replace(EXAMPLE_PERSONA, str(persona.uuid))
    return json.loads(text)


EXAMPLES = [(rule.id, example) for rule in RULES for example in (*rule.match, *rule.not_match)]


@pytest.mark.parametrize(("rule_id", "example"), EXAMPLES, ids=lambda v: getattr(v, "tool", v))
def test_every_example_of_the_rule_table_gets_the_same_verdict_and_rule_as_handle(
    rule_id: str, example: Example, private_home: Path, hub: RecordingTransport
) -> None:
    """VX-EXPLAIN-1: explain and handle() agree on each example; explain wrote nothing, asked
    nobody; and where the persona has the tool, a match example is decided by its own row."""
    persona = standing_persona(extra=("register_webhook", "trigger_webhook", "list_todos"))
    arguments = own(example, persona)
    said = explained(persona, example.tool, arguments, private_home)
    assert hub.sent == []
    assert said == handled(persona, example.tool, arguments), (rule_id, example)
    if said[0] in ("deny", "confirm") and example in RULES_BY_ID[rule_id].match:
        assert said[1] == rule_id


CALLS = [
    ("workspace_write", {"path": "QUEUE.md", "content": "- [ ] review\n"}),
    ("workspace_read", {"path": "QUEUE.md"}),
    ("workspace_read", {"path": "memory/.env"}),
    ("workspace_read", {"path": "../elsewhere/QUEUE.md"}),
    ("workspace_list", {"project": "web"}),
    ("workspace_write", {"path": "memory/old.md", "mode": "delete"}),
    ("workspace_write", {"path": "memory/.env", "content": "MODE=dev"}),
    ("workspace_stat", {"path": "memory/session.lease"}),
    ("list_peers", {}),
    ("list_decisions", {}),
    ("list_tasks", {}),
    ("create_run", {"title": "v2 to prod", "kind": "deploy"}),
    ("create_run", {"title": "lint", "kind": "test"}),
    ("send_human_message", {"binding": "teams:general", "text": "hello"}),
    ("send_human_message", {"binding": "teams:elsewhere", "text": "hello"}),
    ("send_broker_message", {"body": "here: AKIAIOSFODNN7EXAMPLE"}),
    ("trigger_webhook", {"webhook": "ci"}),
    ("no_such_tool", {}),
]


@pytest.mark.parametrize("persona_class", list(PersonaClass))
def test_real_calls_of_each_class_agree_with_handle(
    persona_class: str, private_home: Path, hub: RecordingTransport
) -> None:
    """VX-EXPLAIN-1: for every class, a table of ordinary, confirmed, denied and refused calls
    is answered by explain as handle() then decides it; explain alone writes nothing."""
    persona = standing_persona(
        persona_class=persona_class,
        **(
            {"human_surface_bindings": ["teams:general"]}
            if persona_class in (PersonaClass.SECRETARY, PersonaClass.TEAM_COORDINATOR)
            else {}
        ),
    )
    verdicts = set()
    for tool, arguments in CALLS:
        asked = len(hub.sent)
        said = explained(persona, tool, arguments, private_home)
        assert len(hub.sent) == asked
        assert said == handled(persona, tool, arguments), (persona_class, tool, arguments)
        verdicts.add(said[0])
    assert {"allow", "confirm", "deny", "refused"} <= verdicts


def test_the_explanation_names_consumers_verdict_rule_authority_and_operation() -> None:
    """VX-EXPLAIN-1: what each consumer has, who would be asked and through what, and the
    operation a learned choice would be keyed on."""
    persona = standing_persona()
    found = explain(persona, "workspace_write", {"path": "memory/old.md", "mode": "delete"})
    assert (found.verdict, found.rule["kind"], found.rule["id"]) == (
        "confirm",
        "boundary",
        "workspace-delete",
    )
    assert found.rule["boundary"] == "destructive-or-irreversible"
    assert found.consumers == {
        "mcp_server": True,
        "launcher_allowlist": True,
        "handler_table": True,
    }
    assert found.confirmation is not None
    assert found.confirmation["kind"] == "human"
    assert "virgo-channel" in found.confirmation["surface"]
    assert found.operation == {
        "handler_action": "workspace.write",
        "target_scope": {
            "workspace": "work",
            "project": "core",
            "persona": str(persona.uuid),
            "path": "memory/old.md",
        },
        "shape": found.operation["shape"],
    }
    assert found.operation["shape"]["arguments"]["mode"] == "delete"
    missing = explain(persona, "trigger_webhook", {})
    assert (missing.verdict, missing.refused_because) == ("refused", "not in the stamp")
    assert missing.consumers == {
        "mcp_server": False,
        "launcher_allowlist": False,
        "handler_table": False,
    }
    outside = explain(persona, "workspace_read", {"path": "/etc/passwd"})
    assert (outside.verdict, outside.refused_because, outside.rule["id"]) == (
        "deny",
        "outside scope",
        "path-escape",
    )


def test_a_deputy_scope_confirmation_names_the_owning_lead() -> None:
    """VX-EXPLAIN-1: an ask-first verb is asked of the lead, through the lead's inbox."""
    owner = make_owner()
    lead = standing_persona(owner, persona_class=PersonaClass.PROJECT_LEAD)
    deputy = standing_persona(
        owner, agent=lead.agent, owning_lead=lead, ask_first_verbs=["list_peers"]
    )
    found = explain(deputy, "list_peers", {})
    assert (found.verdict, found.rule["kind"]) == ("confirm", "class condition")
    assert found.confirmation is not None
    assert found.confirmation["persona"] == str(lead.uuid)
    assert found.confirmation["kind"] == "owning lead"
    assert found.confirmation["authority"] == f"owning lead {lead.uuid}"
    assert f"virgo:persona/{lead.uuid}" in found.confirmation["surface"]


def test_a_revoked_or_quarantined_persona_is_explained_as_such_and_left_as_it_was(
    private_home: Path,
) -> None:
    """VX-EXPLAIN-1: a refusal says why; an altered stamp file is not quarantined by explain."""
    from stamps.storage import stamp_path

    persona = standing_persona()
    path = stamp_path(persona.uuid, persona.generation)
    path.write_bytes(path.read_bytes().replace(b'"allow"', b'"allow" ', 1))
    before = rows()
    found = explain(persona, "workspace_list", {})
    assert (found.verdict, found.refused_because) == ("refused", "quarantined")
    assert rows() == before
    persona.refresh_from_db()
    assert persona.standing is True
    assert handle(persona, "workspace_list", {}, correlation())["code"] == "stamp_unavailable"
    persona.refresh_from_db()
    assert persona.standing is False
    assert explain(persona, "workspace_list", {}).refused_because == "quarantined"


def test_a_missing_stamp_file_is_not_written_by_explain(private_home: Path) -> None:
    from stamps.storage import stamp_path

    persona = standing_persona()
    path = stamp_path(persona.uuid, persona.generation)
    path.unlink()
    assert explain(persona, "workspace_list", {}).verdict == "allow"
    assert not path.exists()


# The API ---------------------------------------------------------------------------------------


def url(persona: Persona) -> str:
    return f"/api/personas/{persona.uuid}/explain/"


def test_the_api_explains_for_the_owner_only(private_home: Path) -> None:
    """VX-EXPLAIN-1: session or token; another owner's persona is a 404; nothing is written."""
    persona = standing_persona()
    owner = persona.agent.owner
    clients = (token_client(owner), session_client(owner, enforce_csrf_checks=False))
    stranger = token_client(make_owner())
    before = rows()
    body = {"tool": "workspace_read", "args": {"path": "memory/.env"}}
    for client in clients:
        response = client.post(url(persona), body, format="json")
        assert response.status_code == 200, response.content
        assert (response.json()["verdict"], response.json()["rule"]["id"]) == (
            "deny",
            "secret-path",
        )
    assert stranger.post(url(persona), body, format="json").status_code == 404
    assert rows() == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "tool"),
        ({"tool": 7}, "tool"),
        ({"tool": "list_peers", "args": ["x"]}, "args"),
        ({"tool": "list_peers", "extra": 1}, "extra"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(body: dict[str, Any], field: str) -> None:
    persona = standing_persona()
    response = token_client(persona.agent.owner).post(url(persona), body, format="json")
    assert response.status_code == 400
    assert field in json.dumps(response.json())


# The command -----------------------------------------------------------------------------------


def test_the_command_prints_the_explanation_in_lines_or_json() -> None:
    persona = standing_persona()
    out = StringIO()
    arguments = '{"path": "memory/a.md", "mode": "delete"}'
    call_command(
        "explain", "workspace_write", "--args", arguments, persona=str(persona.pk), stdout=out
    )
    text = out.getvalue()
    assert text.startswith(f"workspace_write for persona {persona.uuid}: confirm")
    assert "rule: kind boundary, id workspace-delete" in text
    out = StringIO()
    call_command("explain", "list_peers", persona=persona.name, json=True, stdout=out)
    assert json.loads(out.getvalue())["verdict"] == "allow"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"arguments": "{nope"}, "--args: not JSON"),
        ({"arguments": "[1]"}, "--args: must be a JSON object"),
        ({"persona": "nobody-by-this-name"}, "--persona:"),
    ],
)
def test_the_command_refuses_in_one_line(options: dict[str, str], message: str) -> None:
    persona = standing_persona()
    options = {"persona": str(persona.uuid), **options}
    with pytest.raises(CommandError) as refused:
        call_command("explain", "list_peers", **options)
    assert str(refused.value).startswith(message)
    assert "\n" not in str(refused.value)
    assert refused.value.returncode == 2


# Every field of the answer ----------------------------------------------------------------------


def stamp_sha256(persona: Persona) -> str:
    """The sha256 of the persona's stamp file (V1-FAC-5): what the explanation names it by."""
    from stamps.storage import stamp_path

    return hashlib.sha256(stamp_path(persona.uuid, persona.generation).read_bytes()).hexdigest()


def test_the_api_answers_with_every_fact_of_the_explanation() -> None:
    """VX-EXPLAIN-1: the JSON the API (and `--json`) answers with names each fact under its own
    key: who and what, the verdict, its code and reason, the rule, who would be asked, each
    consumer's view, the operation, the stamp and the notes."""
    persona = standing_persona()
    owner = persona.agent.owner
    client = token_client(owner)
    body = {"tool": "workspace_write", "args": {"path": "memory/old.md", "mode": "delete"}}
    answer = client.post(url(persona), body, format="json").json()
    assert sorted(answer) == sorted(
        [
            "persona",
            "tool",
            "verdict",
            "code",
            "refused_because",
            "reason",
            "rule",
            "confirmation",
            "consumers",
            "operation",
            "stamp",
            "notes",
        ]
    )
    assert (answer["persona"], answer["tool"]) == (str(persona.uuid), "workspace_write")
    assert (answer["verdict"], answer["code"], answer["refused_because"]) == (
        "confirm",
        "confirmation_required",
        None,
    )
    assert answer["reason"] == "deleting 'memory/old.md' cannot be undone"
    assert answer["rule"] == {
        "kind": "boundary",
        "id": "workspace-delete",
        "boundary": "destructive-or-irreversible",
    }
    assert answer["confirmation"] == {
        "authority": f"human authority {owner.username} via virgo-channel",
        "surface": "virgo-channel: the owner's authority surface, or the admin's decision records",
        "kind": "human",
        "owner": owner.username,
    }
    assert answer["consumers"] == {
        "mcp_server": True,
        "launcher_allowlist": True,
        "handler_table": True,
    }
    assert answer["operation"]["handler_action"] == "workspace.write"
    assert answer["operation"]["target_scope"]["path"] == "memory/old.md"
    assert answer["operation"]["shape"]["arguments"]["mode"] == "delete"
    assert answer["stamp"] == {"generation": persona.generation, "sha256": stamp_sha256(persona)}
    # A confirmation is foreseen whole; only an allowed call leaves the tool's own checks out.
    assert answer["notes"] == []
    refused = client.post(url(persona), {"tool": "trigger_webhook", "args": {}}, format="json")
    assert refused.json()["code"] == "not_granted"
    assert refused.json()["refused_because"] == "not in the stamp"
    assert refused.json()["rule"] == {"kind": "refusal", "id": "not_granted"}
    assert refused.json()["operation"] is None


def test_an_allowed_call_is_the_positive_default_and_notes_what_is_not_foreseen() -> None:
    """VX-EXPLAIN-1, V1-POL-1: ordinary work is allowed by the positive default, with no code;
    the note says the tool's own checks are not made."""
    persona = standing_persona()
    found = explain(persona, "list_peers", {})
    assert (found.verdict, found.code, found.reason) == (
        "allow",
        None,
        "ordinary work inside the binding",
    )
    assert found.rule == {"kind": "default", "id": "default-allow", "boundary": None}
    assert found.confirmation is None
    assert len(found.notes) == 1
    assert "explain stops before it runs" in found.notes[0]


def test_a_boundary_denial_names_its_code_reason_and_boundary() -> None:
    """VX-EXPLAIN-1, V1-GB-6: a denied call answers with handle()'s code and reason, and the
    rule names the global boundary it falls under."""
    persona = standing_persona()
    found = explain(persona, "workspace_read", {"path": "/etc/passwd"})
    assert (found.verdict, found.code) == ("deny", "boundary_denied")
    assert found.reason == "path '/etc/passwd' leads outside the persona's workspace"
    assert found.rule == {"kind": "boundary", "id": "path-escape", "boundary": "cross-scope-access"}
    secret = explain(persona, "workspace_read", {"path": "memory/.env"})
    assert (secret.verdict, secret.refused_because) == ("deny", None)


def teach(persona: Persona, path: str, *, approve: bool) -> PromptRegistryEntry:
    """The owner answers one held delete and asks for the answer to be remembered."""
    assert handle(persona, "workspace_write", {"path": path, "content": "x"}, correlation())["ok"]
    cid = correlation()
    held = handle(persona, "workspace_write", {"path": path, "mode": "delete"}, cid)
    assert held["code"] == "confirmation_required"
    record = confirmations.decide(
        record=DecisionRecord.objects.get(correlation_id=cid),
        approve=approve,
        user=persona.agent.owner,
    )
    return registry.learn(record=record, user=persona.agent.owner)


@pytest.mark.parametrize("approve", [True, False])
def test_a_learned_choice_is_explained_as_what_answers_the_confirmation(approve: bool) -> None:
    """VX-EXPLAIN-1, V1-PR-1: where a learned choice answers the exact operation, the verdict is
    its answer (handle() then asks nobody), the rule names the choice, its layer and the rule it
    was asked under, and who it stands in for is still said."""
    persona = standing_persona()
    path = f"memory/{'kept' if approve else 'refused'}.md"
    entry = teach(persona, path, approve=approve)
    found = explain(persona, "workspace_write", {"path": path, "mode": "delete"})
    verb = "approves" if approve else "refuses"
    assert (found.verdict, found.code) == (
        ("allow", None) if approve else ("deny", "denied_by_learned_choice")
    )
    assert found.reason == (
        f"a learned choice {verb} this exact operation (deleting '{path}' cannot be undone)"
    )
    assert found.rule == {
        "kind": "learned choice",
        "id": "workspace-delete",
        "boundary": "destructive-or-irreversible",
        "learned_choice": entry.pk,
        "layer": "experience",
        "asked_under": "workspace-delete",
    }
    assert found.confirmation is not None
    assert found.confirmation["owner"] == persona.agent.owner.username
    # Only an allowed call runs the tool, whose own checks explain does not make.
    assert len(found.notes) == (1 if approve else 0)
    answered = handle(persona, "workspace_write", {"path": path, "mode": "delete"}, correlation())
    assert answered["ok"] is approve


def test_each_refusal_says_why_in_words() -> None:
    """VX-EXPLAIN-1: revoked, no standing stamp, no authority to ask, invalid arguments, no
    bound implementation: each refusal names its reason, and what is not known (no stamp) is
    not guessed."""
    revoked = standing_persona()
    persona_revoke(
        persona=revoked,
        actor=revoked.agent.owner,
        reason_code="compromised",
        reason="test",
        via="test",
    )
    found = explain(revoked, "list_peers", {})
    assert (found.verdict, found.code, found.refused_because) == ("refused", "revoked", "revoked")
    assert found.rule == {"kind": "refusal", "id": "revoked"}
    fallen = stop_standing(standing_persona(), "list_peers")
    found = explain(fallen, "list_peers", {})
    assert (found.code, found.refused_because) == ("stamp_unavailable", "no standing stamp")
    assert (found.consumers, found.stamp, found.operation) == (None, None, None)
    invalid = explain(standing_persona(), "workspace_read", {"path": "QUEUE.md", "offset": -1})
    assert (invalid.code, invalid.refused_because) == ("invalid_arguments", "invalid arguments")
    assert invalid.reason == "offset must be at least 0"
    # A listed tool refused for its arguments is no slip of its name: no guess at another.
    assert invalid.notes == []


def test_an_ask_first_call_with_nobody_to_ask_is_refused_under_its_rule() -> None:
    """VX-EXPLAIN-1, VX-SEC-13: a stamp whose owning lead cannot take confirmations routes the
    call to nobody: refused for that, under the rule that would have asked."""
    foreign_lead = standing_persona(persona_class=PersonaClass.PROJECT_LEAD)
    deputy = standing_persona(ask_first_verbs=["workspace_write"])
    deputy = install_unchecked_stamp(deputy, owning_lead=str(foreign_lead.uuid))
    found = explain(deputy, "workspace_write", {"path": "memory/plan.md", "content": "x"})
    assert (found.verdict, found.code, found.refused_because) == (
        "refused",
        "stamp_unavailable",
        "no authority to ask",
    )
    assert found.rule == {"kind": "class condition", "id": "stamp-access-confirm", "boundary": None}
    assert found.confirmation is None
    # A global boundary's confirmation goes to the owner the stamp names: once the persona's
    # agent belongs to someone else, the stamp names nobody who may answer.
    persona = standing_persona()
    Agent.objects.filter(pk=persona.agent_id).update(owner=make_owner())
    persona = Persona.objects.get(pk=persona.pk)
    found = explain(persona, "workspace_write", {"path": "memory/old.md", "mode": "delete"})
    assert (found.verdict, found.refused_because) == ("refused", "no authority to ask")
    assert found.rule == {
        "kind": "boundary",
        "id": "workspace-delete",
        "boundary": "destructive-or-irreversible",
    }


def test_a_call_no_implementation_runs_is_refused_as_handle_refuses_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """VX-EXPLAIN-1: a runtime without an implementation of the tool's action refuses it before
    anyone is asked; the explanation says so."""
    monkeypatch.setitem(HANDLERS._handlers, "workspace.write", None)
    persona = standing_persona()
    found = explain(persona, "workspace_write", {"path": "memory/old.md", "mode": "delete"})
    assert (found.verdict, found.code, found.refused_because) == (
        "refused",
        "not_implemented",
        "no bound implementation",
    )
    assert found.rule == {"kind": "refusal", "id": "not_implemented"}


def explained_lines(persona: Persona, tool: str, arguments: dict[str, Any]) -> list[str]:
    out = StringIO()
    call_command(
        "explain", tool, "--args", json.dumps(arguments), persona=str(persona.pk), stdout=out
    )
    return out.getvalue().splitlines()


def test_a_mistyped_tool_is_answered_with_the_listed_one_it_was_meant_as() -> None:
    """VX-OPS-11 (issue 43): a tool name one slip from one the stamp lists is still refused, and
    the answer names the listed tool; a name like none of them gets no guess."""
    persona = standing_persona()
    lines = explained_lines(persona, "workspace_reed", {})
    assert lines[0].endswith(": refused (not in the stamp)")
    assert lines[-1] == "  note: did you mean workspace_read?"
    assert not [line for line in explained_lines(persona, "deploy", {}) if "did you mean" in line]
    # Four letters short of workspace_read (a likeness of 0.78, under the 0.8 it takes) is a
    # name of its own, not a slip: a guess there would steer the owner to a tool not meant.
    assert explain(persona, "pace_read", {}).notes == []


def test_the_command_prints_one_fact_a_line() -> None:
    """VX-EXPLAIN-1: for a person, each fact on its line: the verdict (and why a refusal), the
    rule, who is asked, each consumer, the operation, the stamp, the notes. The operation is
    printed as canonical JSON: the same keys in the same order every time, and characters a
    terminal would hide or reorder (a right-to-left override in a path) escaped, so what the
    owner reads is the operation a learned choice would be keyed on."""
    persona = standing_persona()
    owner = persona.agent.owner.username
    path = "memory/caf\u00e9\u202e.md"
    lines = explained_lines(persona, "workspace_write", {"path": path, "mode": "delete"})
    assert lines[0] == f"workspace_write for persona {persona.uuid}: confirm"
    assert lines[2:] == [
        "  rule: kind boundary, id workspace-delete, boundary destructive-or-irreversible",
        f"  asks: human authority {owner} via virgo-channel through virgo-channel: the owner's "
        "authority surface, or the admin's decision records",
        "  consumers: mcp_server yes, launcher_allowlist yes, handler_table yes",
        "  handler action: workspace.write",
        '  target scope: {"path": "memory/caf\\u00e9\\u202e.md", '
        f'"persona": "{persona.uuid}", "project": "core", "workspace": "work"}}',
        '  operation shape: {"arguments": {"content": {"bytes": 0, "sha256": '
        '"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}, '
        '"expected_sha256": null, "mode": "delete"}}',
        f"  stamp: generation {persona.generation}, sha256 {stamp_sha256(persona)}",
    ]
    lines = explained_lines(persona, "trigger_webhook", {})
    assert lines == [
        f"trigger_webhook for persona {persona.uuid}: refused (not in the stamp)",
        f"  reason: tool trigger_webhook is not granted to persona {persona.uuid}",
        "  rule: kind refusal, id not_granted",
        "  consumers: mcp_server no, launcher_allowlist no, handler_table no",
        f"  stamp: generation {persona.generation}, sha256 {stamp_sha256(persona)}",
    ]
    lines = explained_lines(persona, "list_peers", {})
    assert lines[0] == f"list_peers for persona {persona.uuid}: allow"
    assert lines[-1].startswith("  note: the tool's own checks when it runs")
    # Without a standing stamp nothing is known of consumers, operation or stamp: no such lines.
    fallen = stop_standing(standing_persona(), "list_peers")
    assert [line.split(":")[0] for line in explained_lines(fallen, "list_peers", {})] == [
        f"list_peers for persona {fallen.uuid}",
        "  reason",
        "  rule",
    ]
