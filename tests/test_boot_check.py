"""Boot validation: the virgo.E0xx checks over every active stamp file, as `virgo check` makes
them (the release step); start-up itself checks only what every stamp depends on (VX-OPS-5)."""

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from django.core.checks import CheckMessage
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from personas.catalogue import VERBS
from personas.models import AuditEvent, Generation, Persona
from stamps import checks, validation
from stamps.checks import active_stamp_messages, check_worker_start, start_checks
from stamps.models import CapabilityStamp
from stamps.registry import HandlerRegistry
from tests.factories import make_agent, make_owner, make_persona, update_persona
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


def test_a_missing_file_is_no_finding_and_is_not_rewritten(persona: Persona) -> None:
    """VX-SCALE-2 (was V1-STAMP-1's repair): stamp files are per machine, materialised where a
    persona runs, so `virgo check` on a machine without the file says nothing, writes nothing,
    records nothing, and passes; the persona keeps standing."""
    stored = stamp_of(persona)
    path = stored.path
    path.unlink()
    assert active_stamp_messages() == []
    assert not path.exists()
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.STAMP_REPAIRED).exists()
    persona.refresh_from_db()
    assert persona.standing is True
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


def test_a_file_others_can_read_is_made_owner_private(persona: Persona) -> None:
    """V1-STAMP-1, VX-OPS-4: the stamp is owner-private; a file others may read is made so again
    (a repair, said once), its bytes untouched."""
    path = stamp_of(persona).path
    path.chmod(0o644)
    found = by_id(active_stamp_messages())
    assert list(found) == ["virgo.W004"]
    assert "was readable by others; made owner-private" in found["virgo.W004"][0]
    assert path.stat().st_mode & 0o777 == 0o600
    assert active_stamp_messages() == []


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
    assert found["virgo.W001"] == ["1 stamp owed (builds pending)"]
    assert f"persona 'Thin' ({failing.uuid}) generation 1 does not stand" in found["virgo.W002"][0]
    assert "not standing: missing tool workspace_list" in found["virgo.W002"][0]
    call_command("check")


def test_only_the_current_generation_is_checked(persona: Persona) -> None:
    """V1-STAMP-1: a superseded generation is not active; its file is not the runtime's."""
    persona = update_persona(persona, queues=["triage"])
    stamp_of(persona).path.unlink()
    assert active_stamp_messages() == []


def test_servers_and_workers_start_whatever_one_file_says(persona: Persona) -> None:
    """VX-OPS-4, VX-OPS-5: start-up checks what every stamp depends on, not each file: with an
    active stamp file altered, the start checks of virgo-web and of a worker pass."""
    stamp_of(persona).path.write_bytes(b"{}")
    assert start_checks() == []
    check_worker_start()


def test_start_refuses_when_what_every_stamp_needs_is_broken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """V1-BOOT-1, VX-OPS-5: a stamp schema that does not compile breaks every persona at once,
    so start-up refuses (the worker exits) naming it."""
    from stamps import validation

    (tmp_path / "capability-stamp-v3.schema.json").write_text('{"type": 3}')
    caches = (validation.schema, validation._validator, validation._fast)
    monkeypatch.setattr(validation, "SCHEMA_DIR", tmp_path)
    for cached in caches:
        cached.cache_clear()
    try:
        with pytest.raises(SystemCheckError, match=r"virgo\.E011: the capability stamp schema"):
            start_checks()
        with pytest.raises(SystemExit):
            check_worker_start()
    finally:
        for cached in caches:
            cached.cache_clear()


def test_the_web_server_starts_with_a_broken_stamp(
    persona: Persona, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-OPS-4: virgo-web's pre-bind check does not look at stamp files."""
    from django.db import connections

    from virgo.web import run_start_checks

    # It closes its connections before granian forks workers; here they are the test's own.
    monkeypatch.setattr(connections, "close_all", lambda: None)
    stamp_of(persona).path.write_bytes(b"not a stamp")
    run_start_checks()
    persona.refresh_from_db()
    assert persona.standing is True  # nothing read it: the sweep or a load will


def test_personas_made_alike_share_the_rules_verdict_but_each_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """V1-FAC-7, V1-BOOT-1: the rules are asked once per distinct set of tools, class, address
    and bindings (stamps.validation.Verdicts), and what they find is said of every persona that
    carries it, each by name."""
    # Two owners: one owner's personas never share an address (VX-GRANT-5).
    alike = [make_persona(make_agent(make_owner()), name=name) for name in ("Alike 1", "Alike 2")]
    other = make_persona(alike[0].agent, name="Other", queues=["triage"])
    asked = []
    semantic_problems = validation.semantic_problems

    def counted(document: dict[str, Any], **kwargs: Any) -> Any:
        asked.append(document)
        return semantic_problems(document, **kwargs)

    monkeypatch.setattr(validation, "semantic_problems", counted)
    registry = HandlerRegistry(
        verb.handler_action for verb in VERBS if verb.handler_action != "todos.complete"
    )
    found = by_id(active_stamp_messages(registry=registry))
    assert len(asked) == 2
    assert found == {
        "virgo.E006": [
            f"persona {persona.name!r} ({persona.uuid}) generation 1: tool complete: handler "
            "action 'todos.complete' has no registered handler"
            for persona in [*alike, other]
        ]
    }


def test_in_a_transaction_or_on_sqlite_it_verifies_in_this_process(
    persona: Persona, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #27 (no checklist id): asked for four processes, the check verifies here when other
    connections could not see the rows (this test's transaction) or share the writes (SQLite),
    and finds what it always finds."""
    pids = []
    verify_range = checks.verify_range

    def noted(bounds: tuple[int, int], **kwargs: Any) -> Any:
        pids.append(os.getpid())
        return verify_range(bounds, **kwargs)

    monkeypatch.setattr(checks, "verify_range", noted)
    stamp_of(persona).path.chmod(0o644)
    assert list(by_id(active_stamp_messages(processes=4))) == ["virgo.W004"]
    assert set(pids) == {os.getpid()}
