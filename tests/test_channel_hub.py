"""The reference hub keeps the protocol's own rules, also when run as its own process."""

import os
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from channel.hub import Hub
from tests.channel_support import OPS, TOKEN
from tests.live import free_port, wait_until
from tests.runtime_support import PROCESS_TIMEOUT, REPO


@pytest.fixture
def hub() -> Iterator[Hub]:
    with Hub(token=TOKEN) as hub:
        hub.add_surface(OPS)
        yield hub


def test_the_hub_demands_its_credential_and_an_idempotency_key(hub: Hub) -> None:
    body = {"binding": OPS, "text": "hi"}
    anonymous = httpx.post(f"{hub.url}/v1/messages", json=body, headers={"Idempotency-Key": "k"})
    assert (anonymous.status_code, anonymous.json()) == (401, {"error": "unauthorized"})
    keyless = httpx.post(
        f"{hub.url}/v1/messages", json=body, headers={"Authorization": f"Bearer {TOKEN}"}
    )
    assert (keyless.status_code, keyless.json()) == (400, {"error": "idempotency_key_required"})
    assert hub.count("send") == 0


@pytest.mark.live
def test_the_hub_runs_as_its_own_process() -> None:
    port = free_port()
    env = {**os.environ, "VIRGO_CHANNEL_TOKEN": TOKEN, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "channel.hub", "--port", str(port), "--surface", OPS],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert f"127.0.0.1:{port}" in process.stdout.readline()
        headers = {"Authorization": f"Bearer {TOKEN}", "Idempotency-Key": "k-1"}

        def answered() -> httpx.Response | None:
            try:
                return httpx.get(
                    f"http://127.0.0.1:{port}/v1/status", params={"binding": OPS}, headers=headers
                )
            except httpx.TransportError:
                return None

        wait_until(answered, what="the hub to answer", timeout=PROCESS_TIMEOUT)
        status = answered()
        assert status is not None
        assert status.json() == {"hub": "ok", "surfaces": [{"binding": OPS, "state": "connected"}]}
    finally:
        process.terminate()
        process.wait(timeout=PROCESS_TIMEOUT)
