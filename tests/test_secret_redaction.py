"""Secrets are never stored, forwarded or logged: only a hash, a length and a marker are."""

import hashlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.apps import apps
from django.test import Client
from django.urls import reverse

from runtime.models import DecisionRecord, RefusalRecord
from runtime.stamp import load_active_stamp
from tests.channel_support import human_principal, owner_with_surface, running_hub, signed_answer
from tests.factories import run_on_commit
from tests.runtime_support import call, correlation, standing_persona

pytestmark = pytest.mark.django_db

KEY_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZWQy"
PRIVATE_KEY = (
    f"-----BEGIN OPENSSH PRIVATE KEY-----\n{KEY_BODY}\n-----END OPENSSH PRIVATE KEY-----\n"
)
ENV_SECRET = "correct-horse-battery-staple-4711"
ENV_CONTENT = f"MODE=prod\nDATABASE_PASSWORD={ENV_SECRET}\n"


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, settings) -> Path:
    settings.VIRGO_HOME = tmp_path / "home"
    return settings.VIRGO_HOME


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)
    return caplog


def stored_rows() -> Iterator[tuple[str, str]]:
    """Every row of every table, each as the text of all its values."""
    for model in apps.get_models():
        for row in model._default_manager.values():
            yield model.__name__, json.dumps(row, default=str, ensure_ascii=False)


def assert_kept_nowhere(secret: str, logs: pytest.LogCaptureFixture, *sent: object) -> None:
    for table, row in stored_rows():
        assert secret not in row, f"{table} keeps the secret: {row}"
    for record in logs.records:
        assert secret not in record.getMessage(), record.getMessage()
    for body in sent:
        assert secret not in json.dumps(body, ensure_ascii=False), body


def marker(value: str, why: str) -> dict:
    data = value.encode()
    return {"redacted": why, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def test_a_refused_private_key_write_keeps_only_the_keys_hash(logs) -> None:
    """VX-SEC-7: the refusal record shows that a secret was withheld, its sha256 and length;
    no table and no log line holds the key."""
    persona = standing_persona()
    content = f"deploy key, keep it safe:\n{PRIVATE_KEY}"
    result = call(persona, "workspace_write", {"path": "memory/deploy.md", "content": content})
    assert (result["code"], result["boundary"]) == ("boundary_denied", "secret-credential-values")
    refusal = RefusalRecord.objects.get(persona=persona)
    assert refusal.operation["arguments"]["content"] == marker(content, "secret-value")
    assert refusal.operation["target"]["path"] == "memory/deploy.md"
    assert_kept_nowhere(KEY_BODY, logs)


def test_a_reason_quoting_a_secret_is_withheld(logs) -> None:
    """VX-SEC-7: a refusal whose reason would repeat a secret (here a token put where the
    workspace goes) records and logs a marker instead; the rule and boundary remain. The token
    looks random (VX-SEC-16: `ghp_` and one letter repeated is a doc's placeholder)."""
    persona = standing_persona()
    token = "ghp_" + hashlib.sha256(b"token").hexdigest()[:36]
    result = call(persona, "workspace_read", {"path": "QUEUE.md", "workspace": token})
    assert result["code"] == "boundary_denied"
    refusal = RefusalRecord.objects.get(persona=persona)
    assert (refusal.rule, refusal.boundary) == ("cross-workspace", "cross-scope-access")
    assert refusal.reason.startswith("[withheld:") and "sha256:" in refusal.reason
    assert refusal.operation["target"]["workspace"]["redacted"] == "secret-value"
    assert_kept_nowhere(token, logs, result)


def test_a_credential_file_write_is_confirmed_without_its_content_leaving(settings, logs) -> None:
    """VX-SEC-7: the decision record, the delivery, the card at the hub and the logs hold the
    .env content only as its sha256, length and marker; approved, the real content is written,
    and the correlation id still binds the real content."""
    with running_hub(settings) as hub:
        owner = owner_with_surface(hub)
        persona = standing_persona(owner)
        write = {"path": "memory/.env", "content": ENV_CONTENT}
        cid = correlation()
        with run_on_commit():
            held = call(persona, "workspace_write", write, cid)
        assert (held["code"], held["boundary"]) == (
            "confirmation_required",
            "credential-or-permission-change",
        )
        card = hub.confirmations[cid]["request"]
        shown = marker(ENV_CONTENT, "credential-file-content")
        assert card["operation"]["arguments"]["content"] == shown
        assert card["operation"]["shape"]["arguments"]["content"] == {
            "sha256": shown["sha256"],
            "bytes": shown["bytes"],
        }
        assert_kept_nowhere(ENV_SECRET, logs, *(request.body for request in hub.received))

        client = Client()
        client.force_login(owner)
        record = DecisionRecord.objects.get(correlation_id=cid)
        page = client.get(reverse("admin:runtime_decisionrecord_change", args=[record.pk]))
        text = page.content.decode()
        assert f"sha256 {shown['sha256']} ({shown['bytes']} bytes)" in text
        assert "credential-file-content" in text

        assert signed_answer(hub, cid, "approve", human_principal(owner)).status_code == 200
        other = {"path": "memory/.env", "content": "MODE=prod\nDATABASE_PASSWORD=guess\n"}
        assert call(persona, "workspace_write", other, cid)["code"] == "correlation_mismatch"
        done = call(persona, "workspace_write", write, cid)
        assert done["ok"] is True, done
    stamp = load_active_stamp(persona)
    root = stamp.workspace_for(stamp.tools["workspace_read"]).ensure()
    assert (root / "memory/.env").read_text() == ENV_CONTENT
    assert_kept_nowhere(ENV_SECRET, logs)
