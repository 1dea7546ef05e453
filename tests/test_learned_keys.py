"""A learned choice is one exact operation: every argument that decides its effect is in its key.

The tools that can reach a confirmation are found from the catalogue, the class matrix and the
rule table, not listed by hand: a new one fails `test_every_tool_that_can_ask_has_a_scenario`
until it is given one here.
"""

import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from personas.catalogue import VERBS, VERBS_BY_NAME
from personas.models import PersonaClass
from runtime import confirmations, registry
from runtime.models import DecisionRecord, PromptRegistryEntry, Webhook
from runtime.operations import IDENTITY_KEYS
from runtime.policy import classify_example
from runtime.rules import RULES, Example, Outcome
from runtime.tools.params import (
    TEXT_MAX,
    Choice,
    Id,
    Integer,
    Key,
    Lines,
    Object,
    Param,
    Records,
    Strings,
    Text,
)
from runtime.tools.toolkit import Tool, takes
from stamps.profiles import CLASSES, access_for, allowed_tools
from stamps.registry import HANDLERS
from tests.channel_support import (
    human_principal,
    owner_with_surface,
    running_hub,
    signed_answer,
)
from tests.factories import run_on_commit
from tests.runtime_support import call, correlation, standing_persona
from tests.tools_support import HookServer, allow_loopback, confirmed, ok

pytestmark = pytest.mark.django_db

WEBHOOK_VERBS = ("register_webhook", "trigger_webhook")


def declaration(tool: str) -> tuple[Param, ...]:
    implementation = HANDLERS.implementation(VERBS_BY_NAME[tool].handler_action)
    assert isinstance(implementation, Tool), f"{tool} has no declared implementation"
    return implementation.params


def _probe_value(param: Param) -> Any:
    """Some value of the argument's type: enough for the classifier, which does not parse."""
    if isinstance(param, Text):
        return "https://example.org/x" if param.format == "uri" else "x"
    if isinstance(param, Choice):
        return param.options[0]
    if isinstance(param, Id):
        return str(uuid.uuid4())
    if isinstance(param, Integer):
        return param.minimum
    if isinstance(param, Strings | Lines):
        return ["x"]
    if isinstance(param, Object):
        return {"x": "y"}
    assert isinstance(param, Records), param
    return []


def _probes(params: tuple[Param, ...]) -> list[dict[str, Any]]:
    """Every argument given once, then each option of each choice in turn."""
    base = {param.name: _probe_value(param) for param in params}
    probes = [base]
    for param in params:
        if isinstance(param, Choice):
            probes += [{**base, param.name: option} for option in param.options]
    return probes


def tools_that_can_ask() -> set[str]:
    """Every tool a stamp may give `access: confirm`, every tool a confirm rule of the table
    fires on with arguments the tool takes, and every tool a probe of its declared arguments
    sends to confirmation."""
    found = {
        name
        for persona_class in CLASSES
        for name in allowed_tools(persona_class)
        if access_for(persona_class, name) == "confirm"
    }
    for rule in RULES:
        if rule.outcome is Outcome.CONFIRM:
            for example in rule.match:
                takes_all = {param.name for param in declaration(example.tool)}
                if set(example.arguments) <= takes_all | set(IDENTITY_KEYS):
                    found.add(example.tool)
    for verb in VERBS:
        for arguments in _probes(declaration(verb.name)):
            if classify_example(Example(verb.name, arguments)).outcome is Outcome.CONFIRM:
                found.add(verb.name)
    return found


@dataclass(frozen=True)
class Scenario:
    """A call that asks, and for each argument another value under which it still asks."""

    base: dict[str, Any]
    variants: dict[str, Any] = field(default_factory=dict)


RUN, OTHER_RUN, TASK = (str(uuid.uuid4()) for _ in range(3))
SCENARIOS: dict[str, tuple[Scenario, ...]] = {
    "workspace_write": (
        Scenario(
            {"path": "memory/old.md", "mode": "delete"},
            {"path": "memory/older.md", "content": "x", "expected_sha256": "0" * 64},
        ),
        Scenario(
            {"path": "memory/.env", "content": "MODE=dev"},
            {"path": "memory/prod.env", "content": "MODE=prod", "mode": "append"},
        ),
    ),
    "register_webhook": (
        Scenario(
            {"webhook": "ci", "url": "https://ci.example.org/hook"},
            {"webhook": "cd", "url": "https://elsewhere.example.org/hook"},
        ),
    ),
    "trigger_webhook": (
        Scenario(
            {"webhook": "ci", "payload": {"ref": "v1"}},
            {"webhook": "cd", "payload": {"ref": "v2"}},
        ),
    ),
    "create_run": (
        Scenario(
            {"title": "v2 to prod", "kind": "deploy"},
            {"title": "v3 to prod", "kind": "publish", "task": TASK},
        ),
    ),
    "record_artifact": (
        Scenario(
            {"run": RUN, "name": "app.whl", "publish_to": "https://pypi.example.org/app/"},
            {
                "run": OTHER_RUN,
                "name": "lib.whl",
                "kind": "wheel",
                "location": "dist/app.whl",
                "sha256": "a" * 64,
                "size": 7,
                "publish_to": "https://other.example.org/app/",
            },
        ),
    ),
}
CASES = [(tool, scenario) for tool, scenarios in SCENARIOS.items() for scenario in scenarios]


def lead(owner=None):
    """A project lead: it has the workspace and run tools, and is given the webhook verbs."""
    return standing_persona(owner, persona_class=PersonaClass.PROJECT_LEAD, extra=WEBHOOK_VERBS)


def learn_approval(persona, tool: str, arguments: dict[str, Any]) -> PromptRegistryEntry:
    """The owner approves one held call and asks for the answer to be remembered."""
    cid = correlation()
    held = call(persona, tool, arguments, cid)
    assert held["code"] == "confirmation_required", held
    record = DecisionRecord.objects.get(correlation_id=cid)
    record = confirmations.decide(record=record, approve=True, user=persona.agent.owner)
    entry = registry.learn(record=record, user=persona.agent.owner)
    call(persona, tool, arguments, cid)
    return entry


def test_every_tool_that_can_ask_has_a_scenario_varying_each_of_its_arguments() -> None:
    """VX-SEC-2: each tool that can reach a confirmation (a stamp's `access: confirm`, a confirm
    rule of the table) is tried below, and every argument it declares is changed once."""
    assert tools_that_can_ask() == set(SCENARIOS)
    for tool, scenarios in SCENARIOS.items():
        varied = {name for scenario in scenarios for name in scenario.variants}
        assert varied == {param.name for param in declaration(tool)}, tool


@pytest.mark.parametrize(("tool", "scenario"), CASES, ids=[tool for tool, _ in CASES])
def test_changing_any_argument_of_a_learned_operation_asks_again(tool, scenario) -> None:
    """VX-SEC-2, V1-PR-1: the approved call itself is answered by the learned choice; the same
    call with any one argument changed is another operation, and the human is asked again."""
    persona = lead()
    learn_approval(persona, tool, scenario.base)
    same = correlation()
    answered = call(persona, tool, scenario.base, same)
    assert answered.get("code") != "confirmation_required", answered
    assert DecisionRecord.objects.get(correlation_id=same).decided_via == (
        DecisionRecord.Via.PROMPT_REGISTRY
    )
    for name, value in scenario.variants.items():
        changed = call(persona, tool, {**scenario.base, name: value})
        assert changed["code"] == "confirmation_required", (name, changed)


def test_a_learned_trigger_asks_again_once_its_webhook_points_elsewhere(settings) -> None:
    """VX-SEC-2, VX-SEC-3: the key of a trigger holds the URL its webhook stands for when it is
    called, and the trigger posts there and nowhere else: re-registered, the webhook receives
    neither a learned trigger nor one approved before the change."""
    allow_loopback(settings)
    persona = lead()
    trigger = {"webhook": "ci", "payload": {"ref": "v1"}}
    with HookServer() as first, HookServer() as second:
        ok(confirmed(persona, "register_webhook", {"webhook": "ci", "url": first.url}))
        waiting = correlation()
        call(persona, "trigger_webhook", trigger, waiting)
        record = DecisionRecord.objects.get(correlation_id=waiting)
        confirmations.decide(record=record, approve=True, user=persona.agent.owner)
        assert record.operation["shape"]["resolved"] == {"url": first.url}
        entry = learn_approval(persona, "trigger_webhook", trigger)
        assert entry.operation_shape["resolved"] == {"url": first.url}
        assert ok(call(persona, "trigger_webhook", trigger))["outcome"] == "delivered"

        ok(confirmed(persona, "register_webhook", {"webhook": "ci", "url": second.url}))
        assert call(persona, "trigger_webhook", trigger)["code"] == "confirmation_required"
        resumed = call(persona, "trigger_webhook", trigger, waiting)
        asked = {"url": first.url}
        assert (resumed["code"], resumed["reason"]) == (
            "correlation_mismatch",
            f"what trigger_webhook stood for when it was asked ({asked}) has changed since",
        )
    assert len(first.received) == 2
    assert second.received == []
    assert Webhook.objects.get().url == second.url


def test_the_card_and_the_admin_show_every_value_the_key_covers(settings) -> None:
    """VX-SEC-2: what the human answers on shows all the key holds: the key of the learned
    choice is computed again from the card alone, and the admin lists every value of it."""
    allow_loopback(settings)
    with running_hub(settings) as hub, HookServer() as hook:
        owner = owner_with_surface(hub)
        persona = lead(owner)
        ok(confirmed(persona, "register_webhook", {"webhook": "ci", "url": hook.url}))
        cid = correlation()
        with run_on_commit():
            held = call(persona, "trigger_webhook", {"webhook": "ci", "payload": {"a": 1}}, cid)
        assert held["code"] == "confirmation_required"
        card = hub.confirmations[cid]["request"]
        assert signed_answer(hub, cid, "approve", human_principal(owner)).status_code == 200
    record = DecisionRecord.objects.get(correlation_id=cid)
    entry = registry.learn(record=record, user=owner)
    operation = card["operation"]
    scope = {k: v for k, v in operation["target"].items() if k not in IDENTITY_KEYS}
    assert entry.key_digest == registry.key_digest(
        stamp_hash=card["stamp_hash"],
        handler_action=operation["handler_action"],
        target_scope=scope,
        shape=operation["shape"],
    )
    assert operation["shape"]["resolved"] == {"url": hook.url}
    client = Client()
    client.force_login(owner)
    page = client.get(reverse("admin:runtime_decisionrecord_change", args=[record.pk]))
    listing = client.get(reverse("admin:runtime_decisionrecord_changelist"))
    shown = confirmations.key_values(record.operation)
    assert ("url (resolved)", f'"{hook.url}"') in shown
    for response in (page, listing):
        text = response.content.decode()
        for name, value in shown:
            assert name in text and value.replace('"', "&quot;") in text, (name, value)


def test_nobody_is_asked_about_a_call_its_tool_would_refuse() -> None:
    """VX-SEC-2: a permission argument asks for confirmation, but a tool that does not take it
    would refuse the call: it is refused now, naming the argument, and no record is written."""
    persona = lead()
    result = call(
        persona,
        "assign_task",
        {"task": str(uuid.uuid4()), "assignee": "work/core/lead", "permissions": ["merge"]},
    )
    assert (result["ok"], result["code"]) == (False, "invalid_arguments")
    assert "permissions" in result["reason"]
    assert not DecisionRecord.objects.exists()


def test_an_argument_too_long_to_be_shown_whole_must_be_keyed_by_its_fingerprint() -> None:
    """VX-SEC-2: no declaration can leave a value out of the key or out of sight: a long one
    is refused until it is declared Key.DIGEST."""
    with pytest.raises(ValueError, match=r"notes.*Key\.DIGEST"):
        takes(Text("notes", "Free text.", max_length=TEXT_MAX))
    with pytest.raises(ValueError, match=r"data.*Key\.DIGEST"):
        takes(Object("data", "Any JSON."))
    assert takes(Text("notes", "Free text.", max_length=TEXT_MAX, key=Key.DIGEST))


def test_a_value_with_no_canonical_form_is_refused_not_keyed() -> None:
    """VX-SEC-2: a key is a digest of canonical JSON; a value that has none (an integer past
    2**53, NaN) is refused as an invalid argument before anything is keyed or recorded."""
    persona = lead()
    for arguments in ({"webhook": 2**64, "url": "https://ci.example.org/"},
                      {"webhook": "ci", "url": float("nan")}):  # fmt: skip
        result = call(persona, "register_webhook", arguments)
        assert (result["ok"], result["code"]) == (False, "invalid_arguments"), arguments
    assert not DecisionRecord.objects.exists()
