"""schemathesis attacks the API on a live server, with an owner's token, and finds nothing.

The `st` command line runs as its own process against pytest-django's live server: it loads
/api/schema/ from the server, then runs every phase (the schema's examples, boundary and
negative coverage, property-based fuzzing, and stateful sequences that follow the links
between operations) and runs every check it has on every response (schemathesis.toml beside
this file): no 5xx; a documented status, content type, body and headers; schema-violating
input refused, schema-valid input accepted (a 422 names a rule no schema can state); 405 with
`Allow` for an undeclared method; credentials enforced; a deleted object gone. The run is
bounded (a few examples per operation; VIRGO_SCHEMATHESIS_EXAMPLES for a deeper one) and
seeded, so a failure replays.
"""

import collections
import json
import os
import re
import secrets
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from rest_framework.authtoken.models import Token

from tests.factories import make_agent, make_owner, make_persona

SEED = 20261130
MAX_EXAMPLES = int(os.environ.get("VIRGO_SCHEMATHESIS_EXAMPLES", "8"))
CONFIG = Path(__file__).with_name("schemathesis.toml")
# Far above what the run sends: the budgets themselves are proven elsewhere (test_security_api,
# test_directory, test_card_rate_limit, test_signin_lockout); here every request should reach
# the code behind them.
UNLIMITED = "1000000/m"
RATE_LIMITS = (
    "VIRGO_MUTATION_RATE_LIMIT",
    "VIRGO_DIRECTORY_RATE_LIMIT",
    "VIRGO_TOKEN_RATE_LIMIT",
    "VIRGO_CARD_RATE_LIMIT",
    "VIRGO_CHANNEL_CALLBACK_RATE_LIMIT",
)


@pytest.fixture
def fast_live_server(live_server: Any) -> Iterator[Any]:
    """The live server, answering without Nagle's delay.

    Django's test server writes a response's headers and body separately; with Nagle's
    algorithm on, each response then waits for the client's delayed ACK (~40 ms), which would
    make this run ten times slower. Accepted sockets inherit the option from the listening one.
    """
    live_server.thread.httpd.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    yield live_server


def answered_statuses(report_dir: Path) -> dict[str, collections.Counter[int]]:
    """How often each operation was answered with each status, from the run's NDJSON events.

    A scenario's recorder holds every request it sent for its operation (those with another
    method, which probe for the 405, included) and each one's answer.
    """
    counts: dict[str, collections.Counter[int]] = collections.defaultdict(collections.Counter)
    (events,) = report_dir.glob("*.ndjson")
    for line in events.read_text().splitlines():
        scenario = json.loads(line).get("ScenarioFinished")
        if scenario is None:
            continue
        recorder = scenario["recorder"]
        if recorder["label"] == "Stateful tests":
            continue
        for interaction in recorder.get("interactions", {}).values():
            if interaction.get("response") is not None:
                counts[recorder["label"]][interaction["response"]["status_code"]] += 1
    return counts


def statuses_table(counts: dict[str, collections.Counter[int]]) -> str:
    return "\n".join(
        f"{label:55} " + " ".join(f"{status}x{n}" for status, n in sorted(statuses.items()))
        for label, statuses in sorted(counts.items())
    )


@pytest.mark.live
def test_schemathesis_finds_no_server_error_and_no_nonconformance(
    fast_live_server: Any, settings: Any, tmp_path: Path
) -> None:
    """VX-OPS-6, S9-BODY-1, S9-SCN-2, S9-AUTH-1, S9-AUTH-2, S9-HDR-5: every operation of the
    schema, attacked with generated valid and invalid input as a signed-in owner, answers only
    what the schema documents, refuses what the schema forbids and accepts what it allows, and
    never 5xx. Every limit is far above the run, so every operation is exercised: no answer is
    a 429."""
    for name in RATE_LIMITS:
        setattr(settings, name, UNLIMITED)
    settings.VIRGO_SIGNIN_FAILURES_PER_USERNAME = 10**6
    settings.VIRGO_SIGNIN_FAILURES_PER_ADDRESS = 10**6
    # With a secret, the hub callback's signature check is attacked too (without one every
    # callback is refused before its header is read).
    settings.VIRGO_CHANNEL_SECRET = "schemathesis-" + secrets.token_hex(8)
    cache.clear()
    owner = make_owner("fuzzed")
    agent = make_agent(owner)
    make_persona(agent, discoverable=True)
    # Another owner's: the run cannot delete or hide it, so its card stays served throughout.
    listed = make_persona(make_agent(make_owner("bystander")), name="Not yours", discoverable=True)
    token = Token.objects.create(user=owner).key

    report = tmp_path / "report"
    command = [
        str(Path(sys.executable).with_name("st")),
        "--config-file",
        str(CONFIG),
        "run",
        f"{fast_live_server.url}/api/schema/?format=json",
        "--url",
        fast_live_server.url,
        "--header",
        f"Authorization: Token {token}",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--seed",
        str(SEED),
        "--report",
        "ndjson",
        "--report-dir",
        str(report),
    ]
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120", "VIRGO_ST_PERSONA": str(listed.uuid)}
    result = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800
    )
    output = result.stdout + result.stderr
    (report / "st-output.txt").write_text(output)
    counts = answered_statuses(report)
    table = statuses_table(counts)
    print(f"Answered statuses per operation ({MAX_EXAMPLES} examples each):\n{table}")
    assert result.returncode == 0, output + "\n" + table
    selected = re.search(r"Selected: (\d+)/(\d+)\s+Tested: (\d+)", output)
    assert selected is not None, output
    assert len(set(selected.groups())) == 1, output
    assert len(counts) == int(selected[1]), table
    throttled = {label for label, statuses in counts.items() if statuses[429]}
    assert not throttled, table
