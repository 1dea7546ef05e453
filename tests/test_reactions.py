"""Reactions end definitively: applied, or not applied with a reason; unknown is retryable."""

from collections.abc import Iterator

import pytest

from channel.hub import Hub
from channel.models import Delivery
from tests.channel_support import OPS, running_hub, surface_persona
from tests.runtime_support import call, correlation

pytestmark = pytest.mark.django_db


@pytest.fixture
def hub(settings) -> Iterator[Hub]:
    with running_hub(settings) as hub:
        yield hub


def react(persona, message: str, reaction: str = "like", cid: str | None = None) -> dict:
    arguments = {"binding": OPS, "message": message, "reaction": reaction}
    return call(persona, "apply_human_reaction", arguments, cid)


def test_a_reaction_the_hub_applied_is_applied_true(hub: Hub) -> None:
    """V1-HS-1, V1-ACC-6: `applied: true`, and the hub has the reaction once."""
    persona = surface_persona()
    message = hub.human_message(OPS, "shipped!")
    result = react(persona, message)
    assert result["ok"] is True
    assert result["result"] == {
        "status": "applied",
        "applied": True,
        "binding": OPS,
        "message_id": message,
        "reaction": "like",
    }
    assert hub.reactions == [{"message_id": message, "reaction": "like"}]
    assert Delivery.objects.get(correlation_id=result["correlation_id"]).status == "applied"


@pytest.mark.parametrize(
    ("setup", "reaction", "reason"),
    [
        ("none", "thumbs-sideways", "unknown_reaction"),
        ("deleted", "like", "message_gone"),
        ("missing", "like", "message_not_found"),
    ],
)
def test_a_reaction_the_hub_refused_is_applied_false_with_its_reason(
    hub: Hub, setup: str, reaction: str, reason: str
) -> None:
    """V1-HS-1, V1-ACC-6: unknown reaction id, message gone, no such message: definitive."""
    persona = surface_persona()
    message = hub.human_message(OPS, "hello") if setup != "missing" else "m-404"
    if setup == "deleted":
        hub.delete_message(message)
    cid = correlation()
    result = react(persona, message, reaction, cid)
    assert result["ok"] is True
    assert (result["result"]["applied"], result["result"]["reason"]) == (False, reason)
    assert result["result"]["status"] == "not_applied"
    assert hub.reactions == []
    delivery = Delivery.objects.get(correlation_id=cid)
    assert (delivery.status, delivery.reason) == (Delivery.Status.NOT_APPLIED, reason)


def test_a_timeout_is_unknown_not_success_and_the_retry_applies_nothing_twice(hub: Hub) -> None:
    """V1-HS-1, V1-ACC-6: the hub applied it but answered too late: `unknown`; the retry under
    the same correlation id gets `applied: true` from the hub's record, not a second application."""
    persona = surface_persona()
    message = hub.human_message(OPS, "ready for review")
    hub.fail("react", "delay", seconds=2)
    cid = correlation()
    first = react(persona, message, cid=cid)
    assert first["ok"] is False
    assert (first["code"], first["status"], first["retryable"], first["hub_reason"]) == (
        "outcome_unknown",
        "unknown",
        True,
        "timeout",
    )
    assert "result" not in first
    assert Delivery.objects.get(correlation_id=cid).status == Delivery.Status.UNKNOWN
    hub.clear_faults()
    again = react(persona, message, cid=cid)
    assert again["ok"] is True and again["result"]["applied"] is True
    assert hub.count("react") == 1
    assert hub.reactions == [{"message_id": message, "reaction": "like"}]


def test_a_dropped_connection_is_unknown_and_the_retry_applies_nothing_twice(hub: Hub) -> None:
    """V1-HS-1, V1-ACC-6: the hub closes the socket mid-response; every attempt went out under
    the same Idempotency-Key, and the hub counts one application."""
    persona = surface_persona()
    message = hub.human_message(OPS, "lunch?")
    hub.fail("react", "drop")
    cid = correlation()
    first = react(persona, message, "heart", cid)
    assert (first["ok"], first["status"], first["hub_reason"]) == (
        False,
        "unknown",
        "connection_lost",
    )
    assert {r.idempotency_key for r in hub.received if r.route == "react"} == {cid}
    hub.clear_faults()
    again = react(persona, message, "heart", cid)
    assert again["result"]["applied"] is True
    assert hub.count("react") == 1
    assert len(hub.reactions) == 1


def test_a_5xx_after_every_retry_is_unknown_and_nothing_was_applied(hub: Hub) -> None:
    """V1-HS-1: 5xx is unknown to Virgo; the later retry is what applies it, once."""
    persona = surface_persona()
    message = hub.human_message(OPS, "status?")
    hub.fail("react", "error")
    cid = correlation()
    assert react(persona, message, cid=cid)["status"] == "unknown"
    assert hub.count("react") == 0
    hub.clear_faults()
    assert react(persona, message, cid=cid)["result"]["applied"] is True
    assert react(persona, message, cid=cid)["result"]["applied"] is True
    assert hub.count("react") == 1


def test_a_terminal_refusal_is_not_retried_under_its_correlation_id(hub: Hub) -> None:
    """V1-HS-1: `applied: false` is terminal: the recorded result, not a second try."""
    persona = surface_persona()
    message = hub.human_message(OPS, "x")
    cid = correlation()
    first = react(persona, message, "thumbs-sideways", cid)
    asked = len(hub.received)
    assert react(persona, message, "thumbs-sideways", cid) == first
    assert len(hub.received) == asked


def test_the_catalogue_lists_the_reaction_ids_the_hub_accepts(hub: Hub) -> None:
    persona = surface_persona()
    result = call(persona, "list_reaction_ids", {"binding": OPS})
    ids = [reaction["id"] for reaction in result["result"]["reactions"]]
    assert ids == ["like", "heart", "laugh", "surprised", "sad", "angry"]
    message = hub.human_message(OPS, "new office!")
    assert all(react(persona, message, reaction)["result"]["applied"] for reaction in ids)
