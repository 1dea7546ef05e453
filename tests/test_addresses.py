"""Registered addresses: the grammar, the registry, and the class/segment rule of the stamp."""

import pytest
from django.core.exceptions import ValidationError

from personas.addresses import address_problem
from personas.models import PersonaClass, RegisteredAddress
from personas.services import resolve_address
from stamps.factory import build_stamp
from stamps.problems import Code, StampRejected
from stamps.validation import hierarchy_of
from tests.factories import stamp_kwargs


@pytest.mark.parametrize(
    ("path", "level", "workspace", "project", "role"),
    [
        ("root/secretary", "root", "root", None, "secretary"),
        ("work/coordinator", "workspace", "work", None, "coordinator"),
        ("work/core/lead", "project", "work", "core", "lead"),
    ],
)
def test_canonical_addresses_and_their_hierarchy(
    path: str, level: str, workspace: str, project: str | None, role: str
) -> None:
    """V1-FAC-2, V1-SCH-1: two segments for the reserved root and scope-wide roles, three for
    project duties; the hierarchy is read off the path."""
    assert address_problem(path) is None
    assert hierarchy_of(path) == {
        "path": path,
        "level": level,
        "workspace": workspace,
        "project": project,
        "role": role,
    }


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        (None, "an address is required"),
        ("", "an address is required"),
        ("secretary", "must have 2 segments"),
        ("a/b/c/d", "must have 2 segments"),
        ("Work/Core/lead", "non-canonical segment 'Work'"),
        ("work//lead", "non-canonical segment ''"),
        ("work/core/lead/", "must have 2 segments"),
        ("root/core/lead", "reserved root takes exactly two segments"),
        ("work/root", "'root' is reserved"),
    ],
)
def test_malformed_addresses_are_rejected_with_the_reason(path: object, reason: str) -> None:
    """V1-FAC-2: a malformed address is refused, saying why."""
    problem = address_problem(path)
    assert problem is not None
    assert reason in problem


@pytest.mark.django_db
def test_an_unregistered_address_is_rejected() -> None:
    """V1-FAC-2: a canonical address must also be registered."""
    RegisteredAddress.objects.create(path="work/core/lead")
    assert resolve_address("work/core/lead").path == "work/core/lead"
    with pytest.raises(ValidationError) as raised:
        resolve_address("work/core/reviewer")
    assert "'work/core/reviewer' is not registered" in str(raised.value.message_dict["address"])


@pytest.mark.parametrize(
    ("persona_class", "path"),
    [
        (PersonaClass.PROJECT_LEAD, "work/lead"),
        (PersonaClass.CODER_DEPUTY, "work/reviewer"),
        (PersonaClass.SECRETARY, "work/core/secretary"),
        (PersonaClass.TEAM_COORDINATOR, "work/core/coordinator"),
    ],
)
def test_an_address_of_the_wrong_shape_for_the_class_is_not_canonical(
    persona_class: str, path: str
) -> None:
    """V1-FAC-2: a project duty carries its project segment; root and scope-wide roles do not."""
    with pytest.raises(StampRejected) as raised:
        build_stamp(**stamp_kwargs(persona_class, address=path))
    problems = [p for p in raised.value.problems if p.code is Code.ADDRESS]
    assert problems
    assert path in problems[0].message
    assert "not canonical" in problems[0].message
