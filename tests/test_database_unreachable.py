"""With PostgreSQL unreachable, requests answer 503 with Retry-After, never 500 (VX-REL-3).

A real process configured with a database nobody listens on: every connection is refused, as
while PostgreSQL is stopped or restarting.
"""

import json
import os
import subprocess
import sys
import uuid

import pytest
from django.conf import settings
from django.db import OperationalError
from django.test import RequestFactory

from tests.live import REPO, free_port
from virgo.errors import server_error

PROBE = """
import json, sys, time
import django
django.setup()
from django.test import Client
client = Client(raise_request_exception=False)
answers = {}
for name, path, headers in json.loads(sys.argv[1]):
    started = time.monotonic()
    response = client.get(path, headers=headers)
    answers[name] = {
        "status": response.status_code,
        "seconds": time.monotonic() - started,
        "retry_after": response.get("Retry-After"),
        "content_type": response.get("Content-Type"),
        "body": response.content.decode(),
    }
print(json.dumps(answers))
"""
TOKEN = "0123456789abcdef0123456789abcdef01234567"
REQUESTS = [
    ("healthz", "/healthz", {}),
    ("readyz", "/readyz", {}),
    ("api", "/api/personas/", {"Authorization": f"Token {TOKEN}"}),
    ("directory", "/api/directory/", {"Authorization": f"Token {TOKEN}"}),
    ("card", f"/a/{uuid.uuid4()}/.well-known/agent-card.json", {}),
    # A signed-in browser: its session is read from the database.
    ("admin", "/admin/", {"Cookie": "sessionid=" + "a" * 32}),
    ("admin_login", "/admin/login/", {"Cookie": "sessionid=" + "a" * 32}),
]


@pytest.mark.live
def test_every_request_answers_503_with_retry_after_and_healthz_answers() -> None:
    """VX-REL-3: the API, the directory and the card answer 503 with Retry-After in the JSON
    error shape, the admin with an HTML page; /healthz touches nothing; /readyz answers within
    its bound; no answer carries the database's password."""
    env = {key: value for key, value in os.environ.items() if key != "REDIS_URL"}
    env.update(
        DJANGO_SETTINGS_MODULE="virgo.settings",
        VIRGO_EMBEDDED="1",
        DATABASE_URL=f"postgres://virgo:secret-password@127.0.0.1:{free_port()}/virgo",
        VIRGO_DEGRADED_RETRY_SECONDS="7",
    )
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(REQUESTS)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout)

    assert answers["healthz"]["status"] == 200
    assert answers["readyz"]["status"] == 503
    assert json.loads(answers["readyz"]["body"])["failed"] == ["database"]
    assert answers["readyz"]["seconds"] < 2.0 + 1.0
    for name in ("api", "directory", "card"):
        answer = answers[name]
        assert answer["status"] == 503, (name, answer)
        assert answer["retry_after"] == "7"
        assert answer["content_type"] == "application/json"
        assert json.loads(answer["body"]) == {
            "detail": "The database is unavailable for a moment; try again shortly.",
            "code": "database_unavailable",
        }
    for name in ("admin", "admin_login"):
        answer = answers[name]
        assert answer["status"] == 503, (name, answer)
        assert answer["retry_after"] == "7"
        assert answer["content_type"].startswith("text/html")
        assert "cannot reach its database" in answer["body"]
    assert "secret-password" not in done.stdout + done.stderr
    # The outage is logged once (and again at most once a minute), not once per request.
    assert done.stderr.count("The database is unreachable") == 1
    assert "Internal Server Error" not in done.stderr


@pytest.mark.parametrize(
    ("path", "content_type"), [("/api/personas/", "application/json"), ("/admin/", "text/html")]
)
def test_a_database_error_a_middleware_layer_raised_is_a_503_too(
    rf: RequestFactory, path: str, content_type: str
) -> None:
    """VX-REL-3: what a layer around the view raises (a session saved after it, say) reaches
    the site's 500 handler while the error is being handled; a database error answers 503
    there too, and any other error is still the 500 it was."""
    try:
        raise OperationalError("server closed the connection unexpectedly")
    except OperationalError:
        response = server_error(rf.get(path))
    assert response.status_code == 503
    assert response["Retry-After"] == str(settings.VIRGO_DEGRADED_RETRY_SECONDS)
    assert response["Content-Type"].startswith(content_type)
    try:
        raise ValueError("a bug")
    except ValueError:
        assert server_error(rf.get(path)).status_code == 500
