"""schemathesis attacks the API on a live server, with an owner's token, and finds nothing.

The `st` command line runs as its own process against pytest-django's live server: it loads
/api/schema/ from the server, then runs every phase (the schema's examples, boundary and
negative coverage, property-based fuzzing, and stateful sequences that follow the links
between operations) and checks every response: no 5xx, a documented status code, the
documented content type, a body that conforms to the documented schema, and the documented
headers. The run is bounded (a few examples per operation) and seeded, so a failure replays.
"""

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
MAX_EXAMPLES = 8
CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "response_headers_conformance",
)
# Far above what the run sends: the budgets themselves are proven elsewhere (test_security_api,
# test_directory, test_card_rate_limit); here every request should reach the code behind them.
UNLIMITED = "100000/m"


@pytest.fixture
def fast_live_server(live_server: Any) -> Iterator[Any]:
    """The live server, answering without Nagle's delay.

    Django's test server writes a response's headers and body separately; with Nagle's
    algorithm on, each response then waits for the client's delayed ACK (~40 ms), which would
    make this run ten times slower. Accepted sockets inherit the option from the listening one.
    """
    live_server.thread.httpd.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    yield live_server


@pytest.mark.live
def test_schemathesis_finds_no_server_error_and_no_undocumented_answer(
    fast_live_server: Any, settings: Any, tmp_path: Path
) -> None:
    """S9-BODY-1, S9-SCN-2, S9-AUTH-1, S9-AUTH-2, S9-HDR-5: every operation of the schema,
    attacked with generated valid and invalid input as a signed-in owner, answers only what
    the schema documents, and never 5xx."""
    for name in (
        "VIRGO_MUTATION_RATE_LIMIT",
        "VIRGO_DIRECTORY_RATE_LIMIT",
        "VIRGO_TOKEN_RATE_LIMIT",
        "VIRGO_CARD_RATE_LIMIT",
    ):
        setattr(settings, name, UNLIMITED)
    # With a secret, the hub callback's signature check is attacked too (without one every
    # callback is refused before its header is read).
    settings.VIRGO_CHANNEL_SECRET = "schemathesis-" + secrets.token_hex(8)
    cache.clear()
    owner = make_owner("fuzzed")
    agent = make_agent(owner)
    make_persona(agent, discoverable=True)
    make_persona(make_agent(make_owner("bystander")), name="Not yours", discoverable=True)
    token = Token.objects.create(user=owner).key

    command = [
        str(Path(sys.executable).with_name("st")),
        "run",
        f"{fast_live_server.url}/api/schema/?format=json",
        "--url",
        fast_live_server.url,
        "--header",
        f"Authorization: Token {token}",
        "--checks",
        ",".join(CHECKS),
        "--max-examples",
        str(MAX_EXAMPLES),
        "--seed",
        str(SEED),
        "--workers",
        "1",
        "--generation-database",
        "none",
        "--request-timeout",
        "30",
        "--report-dir",
        str(tmp_path / "report"),
        "--no-color",
    ]
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120"}
    result = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    counts = re.search(r"Selected: (\d+)/(\d+)\s+Tested: (\d+)", output)
    assert counts is not None, output
    assert len(set(counts.groups())) == 1, output
