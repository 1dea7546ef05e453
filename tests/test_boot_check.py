"""Boot validation: the virgo.E0xx system checks over every active stamp file."""

import json
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from django.core.checks import CheckMessage
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from personas.catalogue import VERBS
from personas.models import Generation, Persona
from stamps.checks import active_stamp_messages, refuse_to_start_worker, require_valid_stamps
from stamps.models import CapabilityStamp
from stamps.registry import HandlerRegistry
from tests.factories import make_agent, make_owner, make_persona, update_persona
from tests.live import REPO, free_port
from tests.stored_stamps import store_as_stamp

pytestmark = pytest.mark.django_db


@pytest.fixture
def persona() -> Persona:
    return make_persona(make_agent(make_owner()), name="Checked")


def stamp_of(persona: Persona) -> CapabilityStamp:
    return CapabilityStamp.objects.get(persona_uuid=persona.uuid, generation_number=1)


def rewrite(persona: Persona, change: Callable[[dict[str, Any]], None], *, stored: bool) -> None:
    """Change the file's document; with `stored`, as the stored stamp too, so only `change`
    shows (tests.stored_stamps)."""
    path = stamp_of(persona).path
    document = json.loads(path.read_bytes())
    change(document)
    data = rfc8785.dumps(document)
    if stored:
        store_as_stamp(persona, data)
    else:
        path.write_bytes(data)


def by_id(messages: list[CheckMessage]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for message in messages:
        found.setdefault(message.id or "", []).append(message.msg)
    return found


def test_standing_stamps_pass(persona: Persona) -> None:
    """V1-BOOT-1: intact stamps give no message, and `manage.py check` passes."""
    assert active_stamp_messages() == []
    call_command("check")


def test_a_missing_file_fails_boot(persona: Persona) -> None:
    """V1-BOOT-1, V1-STAMP-1: a missing stamp file is an error naming the persona and the path."""
    path = stamp_of(persona).path
    path.unlink()
    found = by_id(active_stamp_messages())
    assert list(found) == ["virgo.E001"]
    assert f"persona 'Checked' ({persona.uuid}) generation 1" in found["virgo.E001"][0]
    assert f"stamp file {path} is missing" in found["virgo.E001"][0]
    with pytest.raises(SystemCheckError, match=r"virgo\.E001"):
        call_command("check")


def test_an_altered_file_names_the_missing_tool(persona: Persona) -> None:
    """V1-BOOT-1, V1-INV-2, V1-STAMP-2: removing a tool from the file is caught twice: the hash
    no longer matches, and boot names the exact missing tool."""

    def drop_write(document: dict[str, Any]) -> None:
        document["tools"] = [t for t in document["tools"] if t["name"] != "workspace_write"]

    rewrite(persona, drop_write, stored=False)
    found = by_id(active_stamp_messages())
    assert set(found) == {"virgo.E002", "virgo.E007"}
    assert "was altered" in found["virgo.E002"][0]
    assert found["virgo.E007"] == [
        f"persona 'Checked' ({persona.uuid}) generation 1: not standing: missing tool "
        "workspace_write"
    ]
    with pytest.raises(SystemCheckError, match="not standing: missing tool workspace_write"):
        call_command("check")


def test_a_malformed_file_fails_boot(persona: Persona) -> None:
    """V1-BOOT-1: bytes that are not a strict I-JSON stamp are malformed."""
    path = stamp_of(persona).path
    path.write_bytes(b'{"schema_version": 3, "schema_version": 3}')
    found = by_id(active_stamp_messages())
    assert "virgo.E003" in found
    assert "malformed: duplicate key 'schema_version'" in found["virgo.E003"][0]


def test_a_file_failing_the_schema_fails_boot(persona: Persona) -> None:
    """V1-BOOT-1: a well-formed file that breaks schema v3 is malformed too."""
    rewrite(persona, lambda document: document.pop("authority"), stored=True)
    found = by_id(active_stamp_messages())
    assert list(found) == ["virgo.E003"]
    assert "'authority' is a required property" in found["virgo.E003"][0]


def test_duplicates_fail_boot(persona: Persona) -> None:
    """V1-BOOT-1: duplicate names or handler actions are errors, even with a matching hash."""

    def duplicate(document: dict[str, Any]) -> None:
        document["tools"].append(dict(document["tools"][0]))

    rewrite(persona, duplicate, stored=True)
    found = by_id(active_stamp_messages())
    assert "virgo.E002" not in found
    assert any("duplicate tool name 'workspace_list'" in m for m in found["virgo.E004"])
    assert any("duplicate handler action 'workspace.list'" in m for m in found["virgo.E004"])
    assert any("cannot be projected without loss" in m for m in found["virgo.E005"])


def test_a_tool_that_cannot_be_projected_fails_boot(persona: Persona) -> None:
    """V1-BOOT-1: a name the MCP list and the launcher allowlist cannot carry is lost."""

    def rename(document: dict[str, Any]) -> None:
        next(t for t in document["tools"] if t["name"] == "claim")["name"] = "claim it"

    rewrite(persona, rename, stored=True)
    found = by_id(active_stamp_messages())
    assert any("tool 'claim it' cannot be projected without loss" in m for m in found["virgo.E005"])


def test_an_unregistered_handler_fails_boot(persona: Persona) -> None:
    """V1-FAC-7: boot proves every handler action of the stamp is registered."""
    registry = HandlerRegistry(
        verb.handler_action for verb in VERBS if verb.handler_action != "todos.complete"
    )
    found = by_id(active_stamp_messages(registry=registry))
    assert found == {
        "virgo.E006": [
            f"persona 'Checked' ({persona.uuid}) generation 1: tool complete: handler action "
            "'todos.complete' has no registered handler"
        ]
    }


def test_a_file_others_can_read_fails_boot(persona: Persona) -> None:
    """V1-STAMP-1: the stamp is owner-private."""
    stamp_of(persona).path.chmod(0o644)
    found = by_id(active_stamp_messages())
    assert list(found) == ["virgo.E009"]
    assert "not owner-private (mode 644, not 600)" in found["virgo.E009"][0]


def test_standing_without_a_stored_stamp_fails_boot() -> None:
    """V1-STAMP-1: a generation recorded as standing must have its stamp."""
    agent = make_agent(make_owner())
    persona = make_persona(agent, verb_subset=["list_todos"], name="Hollow")
    Generation.objects.filter(persona=persona).update(standing=True)
    found = by_id(active_stamp_messages())
    assert set(found) == {"virgo.E008", "virgo.E001"}


def test_owed_and_not_standing_generations_are_warnings() -> None:
    """V1-INV-2: a persona that does not stand is reported with the exact missing tool; an owed
    stamp is pending. Neither stops the boot: neither persona is advertised or run."""
    agent = make_agent(make_owner())
    failing = make_persona(agent, verb_subset=["list_todos"], name="Thin")
    pending = make_persona(agent, name="Pending")
    Generation.objects.filter(persona=pending).update(standing=None)
    found = by_id(active_stamp_messages())
    assert set(found) == {"virgo.W001", "virgo.W002"}
    assert (
        f"persona 'Pending' ({pending.uuid}) generation 1: its stamp is owed"
        in (found["virgo.W001"][0])
    )
    assert f"persona 'Thin' ({failing.uuid}) generation 1 does not stand" in found["virgo.W002"][0]
    assert "not standing: missing tool workspace_list" in found["virgo.W002"][0]
    call_command("check")


def test_only_the_current_generation_is_checked(persona: Persona) -> None:
    """V1-STAMP-1: a superseded generation is not active; its file is not the runtime's."""
    persona = update_persona(persona, queues=["triage"])
    stamp_of(persona).path.unlink()
    assert active_stamp_messages() == []


def test_servers_and_workers_refuse_to_start(persona: Persona) -> None:
    """V1-BOOT-1: start-up fails on an invalid active stamp (the worker exits)."""
    require_valid_stamps()
    stamp_of(persona).path.unlink()
    with pytest.raises(SystemCheckError, match=r"virgo\.E001"):
        require_valid_stamps()
    with pytest.raises(SystemExit):
        refuse_to_start_worker()


def test_the_web_server_refuses_to_start_on_a_broken_stamp(
    persona: Persona, monkeypatch: pytest.MonkeyPatch
) -> None:
    """V1-BOOT-1: virgo-web runs the boot validation before it binds a socket."""
    from django.db import connections

    from virgo.web import require_valid_stamps_before_serving

    # It closes its connections before granian forks workers; here they are the test's own.
    monkeypatch.setattr(connections, "close_all", lambda: None)
    require_valid_stamps_before_serving()
    stamp_of(persona).path.unlink()
    with pytest.raises(SystemCheckError, match=rf"virgo\.E001.*{persona.uuid}"):
        require_valid_stamps_before_serving()


@pytest.mark.live
def test_virgo_web_exits_naming_the_stamp_and_never_listens(tmp_path: Path) -> None:
    """V1-BOOT-1: the real command, on an installation whose active stamp file was removed,
    exits non-zero with the error and the persona, and nothing ever answers on its port."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "virgo.settings",
        "VIRGO_EMBEDDED": "1",
        "VIRGO_HOME": str(tmp_path),
    }
    for variable in ("DATABASE_URL", "REDIS_URL"):
        env.pop(variable, None)
    for command in (["migrate", "--noinput", "-v", "0"], ["load_demo"]):
        done = subprocess.run(
            [sys.executable, "manage.py", *command], cwd=REPO, env=env, capture_output=True
        )
        assert done.returncode == 0, done.stderr
    removed = next((tmp_path / "personas").rglob("CAPABILITY-STAMP.json"))
    removed.unlink()
    persona_uuid = removed.relative_to(tmp_path / "personas").parts[0]
    port = free_port()
    started = subprocess.run(
        [sys.executable, "-m", "virgo.web"],
        cwd=REPO,
        env={**env, "VIRGO_BIND": f"127.0.0.1:{port}"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode != 0
    assert "virgo.E001" in started.stderr and persona_uuid in started.stderr
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port)):
        pass
