"""runtime.W001: the boot check names every stamped tool this runtime has not bound yet."""

from pathlib import Path

import pytest

from personas.models import Persona
from runtime.checks import check_bound_handlers
from runtime.tools.binding import IMPLEMENTATIONS
from stamps import selectors
from stamps.checks import verifying_every_stamp
from stamps.registry import HANDLERS
from tests.factories import make_agent, make_owner, make_persona, stop_standing, update_persona
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
    """V1-FAC-7: a stamped tool without an implementation is reported by `virgo check`, naming
    persona and tool."""
    persona = standing_persona()
    monkeypatch.setitem(HANDLERS._handlers, "identity.list_peers", None)
    with verifying_every_stamp():
        [message] = [m for m in check_bound_handlers() if m.obj == persona]
        assert message.id == "runtime.W001"
        assert str(persona.uuid) in message.msg
        assert "list_peers" in message.msg and "workspace_read" not in message.msg
        for action in list(HANDLERS.actions):
            if HANDLERS.implementation(action) is None:
                monkeypatch.setitem(HANDLERS._handlers, action, lambda call: {})
        assert check_bound_handlers() == []


def test_with_every_action_bound_virgo_check_reads_no_stamp_for_it(monkeypatch) -> None:
    """V1-FAC-7, VX-SCALE-2: when every registered action is bound no persona can be granted an
    unbound one, so `virgo check` does not read every standing stamp to say nothing."""
    standing_persona()

    def read(*args: object) -> None:
        raise AssertionError("the stamps were read")

    monkeypatch.setattr("runtime.checks.standing_personas_granting", read)
    with verifying_every_stamp():
        assert check_bound_handlers() == []
    monkeypatch.setitem(HANDLERS._handlers, "identity.list_peers", None)
    with verifying_every_stamp(), pytest.raises(AssertionError, match="the stamps were read"):
        check_bound_handlers()


def test_at_start_unbound_actions_are_one_warning_naming_no_persona(monkeypatch) -> None:
    """V1-FAC-7, VX-OPS-5: start-up names the unbound handler actions once, whatever the number
    of personas whose stamps grant them."""
    for _ in range(3):
        standing_persona()
    monkeypatch.setitem(HANDLERS._handlers, "identity.list_peers", None)
    [message] = check_bound_handlers()
    assert (message.id, message.obj) == ("runtime.W002", None)
    assert message.msg.endswith("refused when called: identity.list_peers")


def test_every_standing_persona_is_named_in_batches_each_tool_list_parsed_once(
    monkeypatch,
) -> None:
    """V1-FAC-7: read a batch at a time, in persona order, every standing persona whose stamp
    grants a wanted action comes back with its tools; the others are left out; personas made
    alike share one parse of their tools, and one question per action (stamps.selectors)."""
    agent = make_agent(make_owner())
    made = [make_persona(agent, name=f"Alike {n}") for n in range(3)]
    other = make_persona(agent, name="Other", queues=["triage"])
    parsed = []
    asked = []
    handler_table = selectors.handler_table

    def counted(data: bytes):
        parsed.append(data)
        return handler_table(data)

    def wanted(action: str) -> bool:
        asked.append(action)
        return action == "todos.complete"

    monkeypatch.setattr(selectors, "_TABLES_BATCH", 1)
    monkeypatch.setattr(selectors, "handler_table", counted)
    granting = list(selectors.standing_personas_granting(wanted))
    standing = list(Persona.objects.filter(standing=True).order_by("pk"))
    assert {*made, other} <= set(standing)
    table = handler_table(made[0].generations.get().stamp.data)
    assert "todos.complete" in table
    assert granting == [(persona, ["complete"]) for persona in standing]
    assert len(parsed) == 2
    assert len(asked) == len(table) + len(handler_table(other.generations.get().stamp.data))
    assert list(selectors.standing_personas_granting(lambda action: False)) == []


def test_only_a_current_standing_generation_names_its_persona_once() -> None:
    """V1-FAC-7: the tools named are the current generation's, each persona once: one with an
    older standing generation is named by its current one, and one whose current generation does
    not stand is left out however its older generations stood (stamps.selectors)."""
    moved_on = update_persona(
        make_persona(make_agent(make_owner()), name="Moved on"), description="a second generation"
    )
    stopped = stop_standing(
        make_persona(make_agent(make_owner()), name="Stopped"), "workspace_write"
    )
    assert (moved_on.generation, moved_on.standing) == (2, True)
    assert (stopped.generation, stopped.standing) == (2, False)
    assert stopped.generations.get(number=1).stamp.data

    granting = list(selectors.standing_personas_granting(lambda action: action == "todos.complete"))

    assert granting == [(moved_on, ["complete"])]
