"""The virgo-channel adapter against a real reference hub on loopback: keys, retries, outcomes."""

import logging
import socket
from collections.abc import Iterator

import pytest

from channel.client import ChannelClient, ChannelNotConfigured, Outcome
from channel.hub import Hub
from tests.channel_support import OPS, TOKEN, running_hub


@pytest.fixture
def hub(settings) -> Iterator[Hub]:
    with running_hub(settings) as hub:
        yield hub


def message(text: str = "hello") -> dict:
    return {"binding": OPS, "sender": {"persona": "p"}, "text": text}


def test_every_request_carries_the_correlation_id_as_idempotency_key_and_the_credential(
    hub: Hub,
) -> None:
    """V1-HS-2: the hub credential comes from settings and goes only into the header."""
    client = ChannelClient.from_settings()
    reply = client.post("/messages", message(), idempotency_key="corr-42")
    assert (reply.outcome, reply.status_code, reply.attempts) == (Outcome.OK, 201, 1)
    assert reply.body["message_id"]
    (received,) = hub.received
    assert (received.idempotency_key, received.authorization) == ("corr-42", f"Bearer {TOKEN}")
    assert TOKEN not in repr(received.body)


def test_a_repeat_under_the_same_key_is_answered_but_not_applied_again(hub: Hub) -> None:
    """V1-HS-1: the hub dedupes on the Idempotency-Key; the answer is the same."""
    client = ChannelClient.from_settings()
    first = client.post("/messages", message(), idempotency_key="corr-1")
    again = client.post("/messages", message(), idempotency_key="corr-1")
    assert again.body == first.body
    assert hub.count("send") == 1
    other = client.post("/messages", message("something else"), idempotency_key="corr-1")
    assert (other.outcome, other.reason) == (Outcome.REJECTED, "idempotency_key_reused")


def test_a_5xx_is_retried_and_a_later_success_counts(hub: Hub) -> None:
    hub.fail("send", "error", times=1)
    reply = ChannelClient.from_settings().post("/messages", message(), idempotency_key="c-5xx")
    assert (reply.outcome, reply.attempts) == (Outcome.OK, 2)
    assert hub.count("send") == 1


def test_5xx_after_every_retry_is_unknown_not_success(hub: Hub) -> None:
    """V1-HS-1: an answer that never came is `unknown`."""
    hub.fail("send", "error")
    reply = ChannelClient.from_settings().post("/messages", message(), idempotency_key="c-500")
    assert (reply.outcome, reply.reason, reply.attempts) == (Outcome.UNKNOWN, "hub_error_500", 3)
    assert len(hub.received) == 3
    assert all(r.idempotency_key == "c-500" for r in hub.received)


def test_a_timeout_is_unknown_although_the_hub_applied_it(hub: Hub) -> None:
    """V1-HS-1: the hub applied the request, the answer came too late: unknown, not success."""
    hub.fail("send", "delay", seconds=2)
    reply = ChannelClient.from_settings().post("/messages", message(), idempotency_key="c-slow")
    assert (reply.outcome, reply.reason) == (Outcome.UNKNOWN, "timeout")
    assert hub.count("send") == 1
    hub.clear_faults()
    again = ChannelClient.from_settings().post("/messages", message(), idempotency_key="c-slow")
    assert again.outcome is Outcome.OK
    assert hub.count("send") == 1


def test_a_connection_dropped_mid_response_is_unknown(hub: Hub) -> None:
    """V1-HS-1: the hub closes the socket in the middle of its answer."""
    hub.fail("send", "drop")
    reply = ChannelClient.from_settings().post("/messages", message(), idempotency_key="c-drop")
    assert (reply.outcome, reply.reason) == (Outcome.UNKNOWN, "connection_lost")
    assert hub.count("send") == 1


def test_an_unreachable_hub_is_unknown(settings) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings.VIRGO_CHANNEL_URL = f"http://127.0.0.1:{port}"
    settings.VIRGO_CHANNEL_RETRIES = 1
    settings.VIRGO_CHANNEL_BACKOFF = 0.01
    reply = ChannelClient.from_settings().post("/messages", message(), idempotency_key="c-none")
    assert (reply.outcome, reply.reason, reply.attempts) == (Outcome.UNKNOWN, "hub_unreachable", 2)


def test_a_4xx_is_a_definitive_refusal_and_is_not_retried(hub: Hub) -> None:
    body = {**message(), "binding": "teams:chat/nowhere"}
    reply = ChannelClient.from_settings().post("/messages", body, idempotency_key="c-404")
    assert (reply.outcome, reply.reason, reply.attempts) == (
        Outcome.REJECTED,
        "unknown_binding",
        1,
    )
    assert len(hub.received) == 1


def test_no_hub_configured_is_an_error_not_a_silent_success(settings) -> None:
    settings.VIRGO_CHANNEL_URL = ""
    with pytest.raises(ChannelNotConfigured):
        ChannelClient.from_settings()


def test_the_credential_never_reaches_a_reason_or_a_log_line(hub: Hub, settings, caplog) -> None:
    """V1-HS-2: a hub echoing the Authorization header, a refused credential: nothing leaks."""
    caplog.set_level(logging.DEBUG)
    hub.fail("send", "echo")
    echoed = ChannelClient.from_settings().post("/messages", message(), idempotency_key="c-echo")
    assert echoed.outcome is Outcome.UNKNOWN
    assert TOKEN in str(hub.received[0].authorization)
    settings.VIRGO_CHANNEL_TOKEN = "wrong-" + TOKEN
    hub.clear_faults()
    refused = ChannelClient.from_settings().post("/messages", message(), idempotency_key="c-401")
    assert (refused.outcome, refused.reason) == (Outcome.UNAUTHORIZED, "hub_refused_credentials")
    for reply in (echoed, refused):
        assert TOKEN not in repr(reply)
    assert caplog.records
    assert not [r for r in caplog.records if TOKEN in r.getMessage()]


def test_backoff_grows_exponentially_with_jitter_and_is_capped() -> None:
    client = ChannelClient(base_url="http://hub.invalid", backoff=0.5, backoff_max=3.0)
    for attempt, cap in ((1, 0.5), (2, 1.0), (3, 2.0), (4, 3.0), (9, 3.0)):
        delays = {client._delay(attempt) for _ in range(50)}
        assert all(cap / 2 <= delay <= cap for delay in delays)
        assert len(delays) > 1
