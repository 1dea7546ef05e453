"""Legacy v1 and v2 stamps: read, mapped to a canonical role path, never rewritten."""

import json
import shutil
from pathlib import Path

import pytest

from personas.addresses import address_problem
from personas.models import PersonaClass
from stamps.legacy import LegacyStampError, legacy_from_bytes, read_legacy_stamp
from stamps.verification import verify_file

FIXTURES = Path(__file__).parent / "fixtures" / "stamps"


@pytest.fixture
def legacy_dir(tmp_path: Path) -> Path:
    """Copies of the shipped examples, so their bytes and times can be watched."""
    target = tmp_path / "legacy"
    shutil.copytree(FIXTURES, target)
    return target


@pytest.mark.parametrize(
    ("file_name", "version", "persona_class", "role_path", "tools"),
    [
        ("v1-coder.json", 1, PersonaClass.CODER_DEPUTY, "work/core/deputy", 29),
        ("v1-secretary.json", 1, PersonaClass.SECRETARY, "root/secretary", 34),
        ("v2-project-lead.json", 2, PersonaClass.PROJECT_LEAD, "work/core/lead", 33),
        ("v2-team-coordinator.json", 2, PersonaClass.TEAM_COORDINATOR, "work/triage", 34),
    ],
)
def test_legacy_stamps_are_read_and_mapped_never_rewritten(
    legacy_dir: Path,
    file_name: str,
    version: int,
    persona_class: str,
    role_path: str,
    tools: int,
) -> None:
    """V1-SCH-2, V1-SCH-3: the class maps to a canonical role path; the file's bytes, inode and
    modification time are the same after reading and verifying it."""
    path = legacy_dir / file_name
    before = path.read_bytes(), path.stat().st_ino, path.stat().st_mtime_ns
    stamp = read_legacy_stamp(path)
    assert (stamp.version, stamp.persona_class, stamp.role_path) == (
        version,
        persona_class,
        role_path,
    )
    assert address_problem(stamp.role_path) is None
    assert len(stamp.tools) == tools
    result = verify_file(path)
    assert result.ok, result.problems
    assert result.version == version
    assert (path.read_bytes(), path.stat().st_ino, path.stat().st_mtime_ns) == before
    assert sorted(p.name for p in legacy_dir.iterdir()) == sorted(
        p.name for p in FIXTURES.iterdir()
    )


def test_v1_tools_get_their_access_from_the_class_matrix() -> None:
    """V1-SCH-2: v1 listed names only; access is read as the matrix gives it."""
    stamp = read_legacy_stamp(FIXTURES / "v1-coder.json")
    access = {tool.name: tool.access for tool in stamp.tools}
    assert access["workspace_write"] == "allow"
    assert {tool.handler_action for tool in stamp.tools if tool.name == "claim"} == {"todos.claim"}


def test_v2_keeps_its_recorded_access() -> None:
    """V1-SCH-2: v2 records carry handler action and access; deployment stays confirm."""
    stamp = read_legacy_stamp(FIXTURES / "v2-project-lead.json")
    access = {tool.name: tool.access for tool in stamp.tools}
    assert access["trigger_webhook"] == "confirm"
    assert stamp.persona_id == "8f14e45f-ceea-467f-a0e6-0f8f2c1b9a77"


def _v1(**changes: object) -> bytes:
    document = json.loads((FIXTURES / "v1-coder.json").read_bytes())
    document.update(changes)
    return json.dumps(document).encode()


def _v2(change: str) -> bytes:
    document = json.loads((FIXTURES / "v2-project-lead.json").read_bytes())
    tools = {tool["name"]: tool for tool in document["tools"]}
    if change == "boundary-allow":
        tools["trigger_webhook"]["access"] = "allow"
    elif change == "foreign-tool":
        document["tools"].append(
            {"name": "send_human_card", "handler_action": "human.send_card", "access": "allow"}
        )
    elif change == "wrong-action":
        tools["claim"]["handler_action"] = "todos.take"
    return json.dumps(document).encode()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (_v1(capability_class="lead", project=None), "at project: None is not of type 'string'"),
        (_v1(capability_class="manager"), "'manager' is not one of"),
        (_v1(tools=["workspace_read", "fly_drone"]), "tool fly_drone is not in the catalogue"),
        (_v1(workspace="Work"), "cannot map to a role path"),
        (
            _v2("boundary-allow"),
            "tool trigger_webhook crosses the external-publication-or-deployment boundary",
        ),
        (_v2("foreign-tool"), "tool send_human_card is not available to class project-lead"),
        (_v2("wrong-action"), "handler action 'todos.take' is not the catalogue's 'todos.claim'"),
        (b'{"version": 4}', "not a legacy v1 or v2 stamp"),
    ],
)
def test_invalid_legacy_stamps_say_what_is_wrong(data: bytes, message: str) -> None:
    """V1-SCH-2: a legacy stamp that cannot be read or mapped is refused, naming the problem."""
    with pytest.raises(LegacyStampError) as raised:
        legacy_from_bytes(data)
    assert any(message in problem.message for problem in raised.value.problems), (
        raised.value.problems
    )


def test_a_project_class_without_a_project_cannot_be_mapped() -> None:
    """V1-SCH-2: a lead's role path needs its project segment."""
    document = json.loads((FIXTURES / "v1-coder.json").read_bytes())
    del document["project"]
    with pytest.raises(LegacyStampError, match="must name its project"):
        legacy_from_bytes(json.dumps(document).encode())
