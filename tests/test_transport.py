"""The runtime reaches its transport through runtime.transport, which virgo-channel registers.

Issue 14: no runtime module imports channel (the import contract says so); these say that the
runtime still works, through whatever transport is registered, and says so loudly when none is.
"""

from collections.abc import Iterator

import pytest
from django.core.checks import run_checks

from channel.transport import HubTransport
from runtime import confirmations, transport
from runtime.checks import check_transport
from runtime.models import DecisionRecord
from tests.channel_support import DELETE
from tests.factories import run_on_commit
from tests.runtime_support import (
    RecordingTransport,
    call,
    correlation,
    recording_transport,
    standing_persona,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def recording() -> Iterator[RecordingTransport]:
    with recording_transport() as provider:
        yield provider


@pytest.fixture
def no_transport() -> Iterator[None]:
    previous = transport.register(None)
    yield
    transport.register(previous)


def test_virgo_channel_registers_itself_as_the_transport() -> None:
    """Issue 14, V1-CONF-1: with the apps started, the runtime's transport is the hub's, and the
    start-up checks find nothing missing."""
    assert isinstance(transport.transport(), HubTransport)
    assert check_transport() == []


def test_a_held_call_reaches_its_authority_through_the_registered_transport(
    recording: RecordingTransport,
) -> None:
    """Issue 14, V1-CONF-1, V1-CONF-2: a call held for confirmation is handed, once, as its stored
    pending record, to whichever transport is registered; the runtime knows no other."""
    persona = standing_persona()
    assert call(persona, "workspace_write", {"path": "memory/old.md", "content": "keep"})["ok"]
    cid = correlation()
    with run_on_commit():
        result = call(persona, "workspace_write", DELETE, cid)
    assert result["code"] == "confirmation_required", result
    [record] = recording.sent
    assert record == DecisionRecord.objects.get(correlation_id=cid)
    assert record.decision == DecisionRecord.Decision.PENDING
    assert record.operation["arguments"]["mode"] == "delete"


def test_with_no_transport_the_runtime_says_so(no_transport: None) -> None:
    """Issue 14: with no transport registered the start-up checks fail (runtime.E001) and a
    confirmation that needs one raises NoTransport naming what to install: never a request that
    silently reaches nobody."""
    [message] = [m for m in run_checks() if m.id == "runtime.E001"]
    assert message.is_serious()
    assert "channel" in message.hint
    persona = standing_persona()
    assert call(persona, "workspace_write", {"path": "memory/old.md", "content": "keep"})["ok"]
    cid = correlation()
    with pytest.raises(transport.NoTransport, match="virgo-channel"):
        call(persona, "workspace_write", DELETE, cid)
    # What was asked stays on record, pending, for whoever starts the transport.
    record = DecisionRecord.objects.get(correlation_id=cid)
    assert record.decision == DecisionRecord.Decision.PENDING
    with pytest.raises(transport.NoTransport):
        confirmations.notify_authority(record)
