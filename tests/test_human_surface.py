"""The human-surface tools through handle(), against a real reference hub on loopback."""

import hashlib
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from channel.hub import Hub
from channel.models import Delivery
from personas.catalogue import VERBS, Bundle
from personas.models import PersonaClass
from runtime.models import RefusalRecord
from runtime.stamp import load_active_stamp
from stamps.profiles import required_tools
from stamps.storage import stamp_path
from tests.channel_support import (
    FINANCE,
    NO_SURFACE_CLASSES,
    OPS,
    SURFACE_CLASSES,
    TOKEN,
    running_hub,
    surface_persona,
)
from tests.runtime_support import call, correlation

pytestmark = pytest.mark.django_db

HUMAN_TOOLS = [verb.name for verb in VERBS if verb.handler_action.startswith("human.")]
HUB_WRITE_TOOLS = [t for t in HUMAN_TOOLS if t not in ("get_human_surface_status",)]


@pytest.fixture
def hub(settings) -> Iterator[Hub]:
    with running_hub(settings) as hub:
        yield hub


def arguments_for(tool: str, hub: Hub, persona) -> dict:
    """A sensible call of each tool on the persona's bound surface."""
    human = hub.human_message(OPS, "can someone look at the build?")
    write_file(persona, "memory/report.md", "# Report\nall green\n")
    return {
        "send_human_message": {"binding": OPS, "text": "Build is green."},
        "reply_human_message": {"binding": OPS, "message": human, "text": "On it."},
        "ack_human_message": {"binding": OPS, "message": human},
        "start_typing": {"binding": OPS},
        "stop_typing": {"binding": OPS},
        "list_reaction_ids": {"binding": OPS},
        "apply_human_reaction": {"binding": OPS, "message": human, "reaction": "like"},
        "send_human_card": {
            "binding": OPS,
            "title": "Release 2.1",
            "text": "Ready to ship.",
            "facts": [{"name": "tests", "value": "412 passed"}],
            "links": [{"label": "notes", "url": "https://example.org/notes"}],
        },
        "send_human_todo": {"binding": OPS, "title": "Approve the release", "due": "2026-12-01"},
        "send_human_file": {"binding": OPS, "path": "memory/report.md"},
        "get_human_surface_status": {},
    }[tool]


def write_file(persona, path: str, content: str) -> None:
    assert call(persona, "workspace_write", {"path": path, "content": content})["ok"]


@pytest.mark.parametrize("persona_class", SURFACE_CLASSES)
def test_every_human_surface_tool_gets_a_real_result_from_the_hub(hub: Hub, persona_class) -> None:
    """V1-MAT-1, V1-HS-2: secretary and team coordinator: each human-surface tool of the stamp,
    through the handler, answered by the hub."""
    persona = surface_persona(persona_class)
    assert set(HUMAN_TOOLS) <= set(required_tools(persona_class))
    for tool in HUMAN_TOOLS:
        result = call(persona, tool, arguments_for(tool, hub, persona))
        assert result["ok"] is True, (tool, result)
        if tool in HUB_WRITE_TOOLS and tool != "list_reaction_ids":
            assert result["result"]["applied"] is True, (tool, result)
    routes = {received.route for received in hub.received}
    assert routes == {
        "send", "reply", "ack", "typing", "reactions", "react", "card", "todo", "file", "status",
    }  # fmt: skip
    assert [m["text"] for m in hub.messages.values() if m.get("in_reply_to")] == ["On it."]
    assert hub.typing[OPS] is False
    assert hub.reactions[-1]["reaction"] == "like"
    (sent_file,) = [m["file"] for m in hub.messages.values() if "file" in m]
    assert sent_file["data"] == b"# Report\nall green\n"
    assert sent_file["sha256"] == hashlib.sha256(sent_file["data"]).hexdigest()
    assert all(r.idempotency_key and r.idempotency_key.startswith("corr-") for r in hub.received)


def test_message_ids_and_tool_results_come_from_the_hub(hub: Hub) -> None:
    """V1-HS-1: sends return the hub's message id; reactions say whether they were applied."""
    persona = surface_persona()
    sent = call(persona, "send_human_message", {"binding": OPS, "text": "hi"})["result"]
    assert sent == {"status": "applied", "applied": True, "binding": OPS,
                    "message_id": sent["message_id"]}  # fmt: skip
    assert hub.messages[sent["message_id"]]["text"] == "hi"
    catalogue = call(persona, "list_reaction_ids", {"binding": OPS})["result"]
    assert {"id": "like", "label": "👍"} in catalogue["reactions"]
    status = call(persona, "get_human_surface_status")["result"]
    assert status == {
        "hub": {"configured": True, "reachable": True, "state": "ok"},
        "surfaces": [{"binding": OPS, "state": "connected"}],
    }


@pytest.mark.parametrize("persona_class", NO_SURFACE_CLASSES)
def test_project_lead_and_coder_deputy_have_no_human_surface_writes(
    hub: Hub, persona_class
) -> None:
    """V1-MAT-1, V1-POL-2: not in their stamps, so refused; status is theirs to read."""
    persona = surface_persona(persona_class)
    stamp = load_active_stamp(persona)
    for tool in HUB_WRITE_TOOLS:
        assert tool not in stamp.tools
        result = call(persona, tool, {"binding": OPS, "text": "hi"})
        assert (result["ok"], result["code"]) == (False, "not_granted"), tool
    status = call(persona, "get_human_surface_status")
    assert status["ok"] is True
    assert status["result"]["hub"]["reachable"] is True
    assert {r.route for r in hub.received} == {"status"}


@pytest.mark.parametrize("persona_class", SURFACE_CLASSES + NO_SURFACE_CLASSES)
def test_the_matrix_rows_of_the_human_surface_per_class(persona_class) -> None:
    """V1-MAT-1: messages/replies/ack/typing, reactions, cards/todos/files W for secretary and
    coordinator and absent otherwise; surface status R for every class."""
    writes = {
        verb.name
        for verb in VERBS
        if verb.bundle in (Bundle.HUMAN_MESSAGES, Bundle.REACTIONS, Bundle.HUMAN_CARDS_FILES)
    }
    granted = set(required_tools(persona_class))
    if persona_class in SURFACE_CLASSES:
        assert writes <= granted
    else:
        assert not writes & granted
    assert "get_human_surface_status" in granted


def test_a_surface_outside_the_bindings_is_refused_as_cross_scope(hub: Hub) -> None:
    """V1-GB-6, V1-ACC-5, V1-HS-2: only the stamp's bound surfaces; nothing reaches the hub."""
    persona = surface_persona(surfaces=(OPS,))
    for tool, arguments in (
        ("send_human_message", {"binding": FINANCE, "text": "psst"}),
        ("apply_human_reaction", {"binding": FINANCE, "message": "m-1", "reaction": "like"}),
        ("get_human_surface_status", {"binding": FINANCE}),
    ):
        result = call(persona, tool, arguments)
        assert (result["ok"], result["code"], result["boundary"]) == (
            False,
            "boundary_denied",
            "cross-scope-access",
        ), tool
    assert RefusalRecord.objects.filter(persona=persona, rule="foreign-surface").count() == 3
    assert hub.received == []
    assert not Delivery.objects.exists()


def test_the_stamp_holds_bindings_only_never_the_hub_credential(hub: Hub) -> None:
    """V1-HS-2: binding names in the stamp; the token lives in settings, not in any stamp."""
    persona = surface_persona(surfaces=(OPS, FINANCE))
    stamp = load_active_stamp(persona)
    assert stamp.document["bindings"]["human_surfaces"] == sorted([OPS, FINANCE])
    assert stamp.tools["send_human_message"].scope["surfaces"] == sorted([OPS, FINANCE])
    raw = stamp_path(persona.uuid, stamp.generation).read_bytes()
    assert TOKEN.encode() not in raw
    assert hub.url.encode() not in raw
    call(persona, "send_human_message", {"binding": FINANCE, "text": "hello finance"})
    assert hub.received[-1].authorization == f"Bearer {TOKEN}"


def test_a_dropped_send_retried_under_its_correlation_id_posts_one_message(hub: Hub) -> None:
    """V1-HS-1: unknown is not success; the retry returns the hub's message, not a second one."""
    persona = surface_persona()
    hub.fail("send", "drop")
    cid = correlation()
    first = call(persona, "send_human_message", {"binding": OPS, "text": "deploy done"}, cid)
    assert (first["ok"], first["code"], first["status"], first["retryable"]) == (
        False,
        "outcome_unknown",
        "unknown",
        True,
    )
    assert Delivery.objects.get(correlation_id=cid).status == Delivery.Status.UNKNOWN
    hub.clear_faults()
    again = call(persona, "send_human_message", {"binding": OPS, "text": "deploy done"}, cid)
    assert again["ok"] is True and again["result"]["applied"] is True
    assert [m["text"] for m in hub.messages.values()] == ["deploy done"]
    assert hub.count("send") == 1
    delivery = Delivery.objects.get(correlation_id=cid)
    assert (delivery.status, delivery.message_id) == (
        Delivery.Status.APPLIED,
        again["result"]["message_id"],
    )


def test_a_recorded_terminal_result_is_returned_without_asking_the_hub_again(hub: Hub) -> None:
    persona = surface_persona()
    cid = correlation()
    first = call(persona, "send_human_card", {"binding": OPS, "title": "Hi"}, cid)
    asked = len(hub.received)
    assert call(persona, "send_human_card", {"binding": OPS, "title": "Hi"}, cid) == first
    assert len(hub.received) == asked
    other = call(persona, "send_human_card", {"binding": OPS, "title": "Other"}, cid)
    assert (other["ok"], other["code"]) == (False, "correlation_mismatch")


def test_a_refusal_by_the_hub_is_terminal_with_its_reason(hub: Hub) -> None:
    """V1-HS-1: a reply to a deleted message is `applied: false` with the hub's reason."""
    persona = surface_persona()
    human = hub.human_message(OPS, "typo, deleting")
    hub.delete_message(human)
    result = call(persona, "reply_human_message", {"binding": OPS, "message": human, "text": "ok"})
    assert result["ok"] is True
    assert result["result"] == {
        "status": "not_applied",
        "applied": False,
        "binding": OPS,
        "reason": "message_gone",
    }


def test_no_hub_configured_refuses_every_write_and_status_says_so(settings) -> None:
    """A tool that cannot do its job fails; it never fakes a delivery."""
    settings.VIRGO_CHANNEL_URL = ""
    persona = surface_persona()
    result = call(persona, "send_human_message", {"binding": OPS, "text": "anyone?"})
    assert (result["ok"], result["code"], result["status"]) == (
        False,
        "channel_unconfigured",
        "failed",
    )
    status = call(persona, "get_human_surface_status")["result"]
    assert status["hub"] == {
        "configured": False,
        "reachable": False,
        "reason": "channel_unconfigured",
    }
    assert status["surfaces"] == [{"binding": OPS, "state": "unknown"}]


def test_an_unreachable_hub_is_reported_as_a_status(settings, hub: Hub) -> None:
    persona = surface_persona()
    hub.fail("status", "error")
    status = call(persona, "get_human_surface_status")["result"]
    assert status["hub"] == {"configured": True, "reachable": False, "reason": "hub_error_500"}
    assert status["surfaces"] == [{"binding": OPS, "state": "unknown"}]


def test_a_refused_credential_fails_without_leaking_it(settings, hub: Hub, caplog) -> None:
    """V1-HS-2: the error and the log name no credential."""
    caplog.set_level(logging.DEBUG)
    settings.VIRGO_CHANNEL_TOKEN = "not-the-" + TOKEN
    persona = surface_persona()
    result = call(persona, "send_human_message", {"binding": OPS, "text": "hi"})
    assert (result["ok"], result["code"]) == (False, "channel_unauthorized")
    assert "not-the-" not in repr(result) and TOKEN not in repr(result)
    assert not [r for r in caplog.records if TOKEN in r.getMessage()]
    assert Delivery.objects.get().status == Delivery.Status.FAILED


def test_secret_files_never_leave_and_arguments_are_checked(hub: Hub) -> None:
    """V1-GB-4: a credential-looking file is refused before anything is read or sent."""
    persona = surface_persona()
    stamp = load_active_stamp(persona)
    root = stamp.workspace_for(stamp.tools["workspace_read"]).ensure()
    (root / "memory").mkdir(exist_ok=True)
    (root / "memory" / ".env").write_text("TOKEN=abc")
    refused = call(persona, "send_human_file", {"binding": OPS, "path": "memory/.env"})
    assert (refused["code"], refused["boundary"]) == ("boundary_denied", "secret-credential-values")
    escaped = call(persona, "send_human_file", {"binding": OPS, "path": "../other/x.md"})
    assert escaped["boundary"] == "cross-scope-access"
    for tool, arguments in (
        ("send_human_message", {"binding": OPS}),
        ("send_human_message", {"binding": OPS, "text": "x", "colour": "red"}),
        ("apply_human_reaction", {"binding": OPS, "message": "m 1/..", "reaction": "like"}),
        ("send_human_todo", {"binding": OPS, "title": "x", "due": "tomorrow"}),
        (
            "send_human_card",
            {"binding": OPS, "title": "x", "links": [{"label": "a", "url": "ftp://x"}]},
        ),
    ):
        result = call(persona, tool, arguments)
        assert (result["ok"], result["code"]) == (False, "invalid_arguments"), (tool, result)
    assert hub.received == []


def test_a_file_holding_a_secret_value_never_leaves(hub: Hub) -> None:
    """V1-GB-4, VX-SEC-7: send_human_file judges the content too: a key a human left in an
    innocent-looking file is refused loudly and nothing reaches the hub."""
    persona = surface_persona()
    stamp = load_active_stamp(persona)
    root = stamp.workspace_for(stamp.tools["workspace_read"]).ensure()
    (root / "memory").mkdir(exist_ok=True)
    key = "deploy key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\n"
    (root / "memory" / "handover.md").write_text(key)
    refused = call(persona, "send_human_file", {"binding": OPS, "path": "memory/handover.md"})
    assert (refused["code"], refused["boundary"]) == ("secret_content", "secret-credential-values")
    assert hub.received == []
    assert "MIIE" not in repr(list(RefusalRecord.objects.values()))


def test_files_larger_than_the_hub_takes_are_refused(settings, hub: Hub) -> None:
    settings.VIRGO_CHANNEL_MAX_FILE_BYTES = 10
    persona = surface_persona()
    write_file(persona, "memory/big.md", "x" * 11)
    result = call(persona, "send_human_file", {"binding": OPS, "path": "memory/big.md"})
    assert (result["ok"], result["code"]) == (False, "too_large")
    assert hub.received == []


def test_a_binary_file_arrives_byte_for_byte(hub: Hub, tmp_path: Path) -> None:
    persona = surface_persona()
    stamp = load_active_stamp(persona)
    root = stamp.workspace_for(stamp.tools["workspace_read"]).ensure()
    (root / "memory").mkdir(exist_ok=True)
    data = bytes(range(256)) * 2000
    (root / "memory" / "chart.png").write_bytes(data)
    result = call(persona, "send_human_file", {"binding": OPS, "path": "memory/chart.png"})
    assert result["ok"] is True and result["result"]["applied"] is True
    (sent,) = [m["file"] for m in hub.messages.values() if "file" in m]
    assert (sent["data"], sent["content_type"], sent["name"]) == (data, "image/png", "chart.png")
    recorded = Delivery.objects.get(correlation_id=result["correlation_id"]).request
    assert "content_base64" not in recorded["file"]
    assert recorded["file"]["sha256"] == hashlib.sha256(data).hexdigest()


def test_another_persona_cannot_take_over_a_correlation_id(hub: Hub) -> None:
    first = surface_persona()
    second = surface_persona(PersonaClass.TEAM_COORDINATOR, owner=first.agent.owner)
    cid = correlation()
    assert call(first, "start_typing", {"binding": OPS}, cid)["ok"] is True
    stolen = call(second, "start_typing", {"binding": OPS}, cid)
    assert (stolen["ok"], stolen["code"]) == (False, "correlation_mismatch")
