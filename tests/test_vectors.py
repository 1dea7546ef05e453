"""Policy vectors (VX-EXPLAIN-2): a persona's grant exported as calls with verdicts, replayed
green against it, red naming each call whose verdict changed once the grant changes."""

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from personas.catalogue import Boundary
from personas.models import Persona
from runtime.rules import RULES
from tests.factories import update_persona
from tests.runtime_support import standing_persona

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, settings) -> Path:
    settings.VIRGO_HOME = tmp_path / "home"
    return settings.VIRGO_HOME


def export(persona: Persona, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    path = tmp_path / "vectors.json"
    call_command("stamp", "vectors", str(persona.uuid), "--output", str(path), stderr=StringIO())
    return path, json.loads(path.read_text())


def replay(persona: Persona, path: Path) -> str:
    out = StringIO()
    call_command("stamp", "test", str(persona.uuid), str(path), stdout=out)
    return out.getvalue()


def test_vectors_cover_every_tool_and_boundary_with_each_verdict(tmp_path: Path) -> None:
    persona = standing_persona(extra=("list_todos",))
    out = StringIO()
    call_command("stamp", "vectors", persona.name, stdout=out)
    document = json.loads(out.getvalue())
    assert (document["persona"], document["generation"]) == (str(persona.uuid), 1)
    vectors = document["vectors"]
    tools = {vector["tool"] for vector in vectors}
    assert set(persona.verb_subset) <= tools
    verdicts = {vector["expect"]["verdict"] for vector in vectors}
    assert {"allow", "confirm", "deny"} <= verdicts
    sources = " ".join(vector["source"] for vector in vectors)
    for rule in RULES:
        assert f"rule {rule.id}:" in sources
    assert {rule.boundary for rule in RULES} == set(Boundary)
    assert len({vector["id"] for vector in vectors}) == len(vectors)


def test_vectors_replay_green_then_red_after_a_narrowing_naming_the_changed_calls(
    tmp_path: Path,
) -> None:
    """VX-EXPLAIN-2: exported, replayed (0, one line), then the verb subset narrows and an ask
    first is added: the replay fails listing exactly the calls whose verdict changed."""
    persona = standing_persona(extra=("list_todos",))
    path, document = export(persona, tmp_path)
    total = len(document["vectors"])
    assert replay(persona, path) == (
        f"all {total} vectors hold for persona {persona.name!r} ({persona.uuid})\n"
    )
    narrowed = [verb for verb in persona.verb_subset if verb != "list_todos"]
    persona = update_persona(persona, verb_subset=narrowed, ask_first_verbs=["list_peers"])
    out = StringIO()
    with pytest.raises(CommandError) as failed:
        call_command("stamp", "test", str(persona.uuid), str(path), stdout=out)
    lines = out.getvalue().splitlines()
    changed = {vector["id"]: vector for vector in document["vectors"]}
    named = [changed[line.split(":", 1)[0]] for line in lines]
    assert {vector["tool"] for vector in named} == {"list_todos", "list_peers"}
    peers = next(line for line in lines if " list_peers {}" in line)
    assert peers.endswith("expected allow (default-allow), now confirm (stamp-access-confirm)")
    todos = next(line for line in lines if " list_todos " in line and "allow" in line)
    assert "now refused (not_granted)" in todos
    assert str(failed.value) == (
        f"{len(lines)} of {total} vectors changed for persona {persona.name!r} ({persona.uuid})"
    )
    assert failed.value.returncode == 1


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{not json", "not a vectors file"),
        ('{"format": "other"}', "not a vectors document"),
        ('{"format": "virgo-policy-vectors/1", "vectors": {}}', "`vectors` must be a list"),
        (
            '{"format": "virgo-policy-vectors/1", "vectors": [{"id": "v1", "tool": "x", '
            '"arguments": {}, "expect": {"verdict": "allow"}}]}',
            "vector 1 (v1): `expect` must be",
        ),
    ],
)
def test_a_malformed_vectors_file_is_one_line_and_status_2(
    tmp_path: Path, content: str, says: str
) -> None:
    persona = standing_persona()
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(CommandError) as refused:
        call_command("stamp", "test", str(persona.uuid), str(path))
    assert says in str(refused.value)
    assert "\n" not in str(refused.value)
    assert refused.value.returncode == 2
