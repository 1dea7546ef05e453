"""runtime.W001: the boot check names every stamped tool this runtime has not bound yet."""

from pathlib import Path

import pytest

from runtime.checks import check_bound_handlers
from runtime.tools import IMPLEMENTATIONS
from stamps.registry import HANDLERS
from tests.runtime_support import standing_persona

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, settings) -> Path:
    settings.VIRGO_HOME = tmp_path / "home"
    return settings.VIRGO_HOME


def test_every_workspace_action_is_bound_to_its_real_implementation() -> None:
    """V1-FAC-7: the runtime fills the one handler registry for what it implements."""
    for action, implementation in IMPLEMENTATIONS.items():
        assert HANDLERS.implementation(action) is implementation


def test_unbound_tools_are_named_per_persona(monkeypatch) -> None:
    """V1-FAC-7: a stamped tool without an implementation is reported, naming persona and tool."""
    persona = standing_persona()
    monkeypatch.setitem(HANDLERS._handlers, "identity.list_peers", None)
    [message] = [m for m in check_bound_handlers() if m.obj == persona]
    assert message.id == "runtime.W001"
    assert str(persona.uuid) in message.msg
    assert "list_peers" in message.msg and "workspace_read" not in message.msg
    for action in list(HANDLERS.actions):
        if HANDLERS.implementation(action) is None:
            monkeypatch.setitem(HANDLERS._handlers, action, lambda call: {})
    assert not [m for m in check_bound_handlers() if m.obj == persona]
