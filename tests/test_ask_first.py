"""An owner's "ask first" verbs: `access: confirm` with no global boundary, held and routed.

No tool of the catalogue is stamped that way by the class matrix alone (every C cell carries a
boundary), so this is where the two paths VX-SEC-13 names are taken through handle(): a held
confirmation for the persona's human authority, and a deputy-scope one for its owning lead.
"""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client

from channel.hub import Hub
from channel.models import Delivery
from personas import services
from personas.models import Persona, PersonaClass
from runtime import confirmations
from runtime.models import AuthorityKind, CoordinationMessage, DecisionRecord, RefusalRecord
from runtime.stamp import load_active_stamp
from stamps.validation import validate_stamp
from tests.channel_support import owner_with_surface, persona_principal, running_hub
from tests.factories import make_owner, run_on_commit, update_persona
from tests.owner_clients import (  # noqa: F401 (autouse fixture)
    form_data,
    fresh_rate_limits,
    token_client,
)
from tests.runtime_support import call, correlation, install_unchecked_stamp, standing_persona

pytestmark = pytest.mark.django_db

PLAN = {"path": "memory/plan.md", "content": "ship on friday\n"}


@pytest.fixture
def hub(settings) -> Iterator[Hub]:
    with running_hub(settings) as hub:
        yield hub


def root_of(persona: Persona) -> Path:
    stamp = load_active_stamp(persona)
    return stamp.workspace_for(stamp.tools["workspace_read"]).ensure()


def held(persona: Persona, cid: str) -> dict[str, Any]:
    with run_on_commit():
        result = call(persona, "workspace_write", PLAN, cid)
    return result


def ran_once(persona: Persona, cid: str, first: dict[str, Any]) -> bool:
    """Whether the approved write ran and a repeat of its correlation id does not run it again
    (the file is changed by hand in between, so a second run would show)."""
    plan = root_of(persona) / "memory/plan.md"
    assert plan.read_text() == PLAN["content"]
    plan.write_text("changed by hand\n")
    assert call(persona, "workspace_write", PLAN, cid) == first
    executed = DecisionRecord.objects.get(correlation_id=cid).executed_at
    return plan.read_text() == "changed by hand\n" and executed is not None


def tool(persona: Persona, name: str) -> dict[str, Any]:
    return next(t for t in load_active_stamp(persona).document["tools"] if t["name"] == name)


# The owner's field: validated like the rest of the persona, part of its composition ----------


def test_ask_first_verbs_are_a_subset_of_the_verbs_no_boundary_asks_for() -> None:
    """VX-SEC-13: only verbs of the persona's own subset, and not those a global boundary
    always asks for; the refusal names the field and the verbs, and nothing is written."""
    lead = standing_persona(
        persona_class=PersonaClass.PROJECT_LEAD, extra=("trigger_webhook", "complete")
    )
    owner = lead.agent.owner
    for value, words in (
        (["create_for"], "not in the persona's verb_subset: create_for"),
        (["trigger_webhook"], "trigger_webhook (boundary: external-publication-or-deployment)"),
        (["complete", "complete"], "duplicate values: complete"),
        ("complete", "must be a list of non-empty strings"),
    ):
        with pytest.raises(ValidationError) as error:
            services.persona_update(persona=lead, actor=owner, ask_first_verbs=value)
        assert words in " ".join(error.value.message_dict["ask_first_verbs"]), value
    lead.refresh_from_db()
    assert (lead.ask_first_verbs, lead.generation) == ([], 1)


def test_asking_first_opens_a_generation_whose_stamp_says_confirm() -> None:
    """VX-SEC-13, V1-STAMP-2, V1-POL-2: the factory stamps an ask-first verb `access: confirm`
    with no boundary and the validator accepts it; taking it back opens the next generation
    with `allow` again."""
    persona = standing_persona()
    assert tool(persona, "workspace_write")["access"] == "allow"
    persona = update_persona(persona, ask_first_verbs=["workspace_write"])
    assert (persona.generation, persona.standing) == (2, True)
    stamp = load_active_stamp(persona)
    validate_stamp(stamp.document)
    assert tool(persona, "workspace_write")["access"] == "confirm"
    assert tool(persona, "workspace_write")["boundary"] is None
    assert {t["name"] for t in stamp.document["tools"] if t["access"] == "confirm"} == {
        "workspace_write"
    }
    assert persona.generations.get(number=2).composition["ask_first_verbs"] == ["workspace_write"]
    persona = update_persona(persona, ask_first_verbs=[])
    assert persona.generation == 3
    assert tool(persona, "workspace_write")["access"] == "allow"
    # Without ask-first verbs the composition is what it was before they existed.
    for number in (1, 3):
        assert "ask_first_verbs" not in persona.generations.get(number=number).composition


def test_narrowing_the_agent_drops_its_ask_first_verbs_too() -> None:
    """VX-SEC-13, VX-REV-2: a verb the agent no longer grants leaves the subset and the
    ask-first list together, so the persona stays valid."""
    persona = standing_persona(extra=("complete",), ask_first_verbs=["complete"])
    agent = persona.agent
    granted = [verb for verb in agent.granted_verbs if verb != "complete"]
    with run_on_commit():
        services.agent_update(agent=agent, actor=agent.owner, granted_verbs=granted)
    persona.refresh_from_db()
    assert "complete" not in persona.verb_subset and persona.ask_first_verbs == []


def test_the_api_and_the_admin_expose_ask_first_verbs() -> None:
    """VX-SEC-13: read and written in the API and the admin with the service's own errors."""
    persona = standing_persona(extra=("complete",))
    owner = persona.agent.owner
    client = token_client(owner)
    path = f"/api/personas/{persona.uuid}/"
    assert client.get(path).json()["ask_first_verbs"] == []
    bad = client.patch(path, {"ask_first_verbs": ["create_for"]}, format="json")
    assert bad.status_code == 422
    assert "create_for" in bad.json()["ask_first_verbs"][0]
    good = client.patch(path, {"ask_first_verbs": ["complete"]}, format="json")
    assert good.status_code == 200, good.content
    assert (good.json()["ask_first_verbs"], good.json()["generation"]) == (["complete"], 2)
    browser = Client()
    browser.force_login(owner)
    change = f"/admin/personas/persona/{persona.pk}/change/"
    page = browser.get(change)
    assert 'name="ask_first_verbs" value="complete" ' in page.content.decode()
    assert 'name="ask_first_verbs" value="trigger_webhook"' not in page.content.decode()
    data = {**form_data(page, "persona_form"), "_save": "Save"}
    data["ask_first_verbs"] = ["complete", "workspace_write"]
    assert browser.post(change, data).status_code == 302
    persona.refresh_from_db()
    assert sorted(persona.ask_first_verbs) == ["complete", "workspace_write"]


# Through handle(): held, routed, decided, resumed once ---------------------------------------


def test_an_ask_first_tool_with_no_lead_is_held_for_the_human_authority(hub: Hub) -> None:
    """VX-SEC-13, V1-CONF-1, V1-CONF-2: `access: confirm` with no boundary is held as
    confirmation_required before anything runs; with no owning lead the owner decides; the call
    then runs exactly once."""
    owner = owner_with_surface(hub)
    persona = standing_persona(owner, ask_first_verbs=["workspace_write"])
    cid = correlation()
    pending = held(persona, cid)
    assert (pending["code"], pending["boundary"]) == ("confirmation_required", None)
    record = DecisionRecord.objects.get(correlation_id=cid)
    assert (record.authority_kind, record.authority_user, record.rule) == (
        AuthorityKind.HUMAN,
        owner,
        "stamp-access-confirm",
    )
    assert hub.confirmations[cid]["request"]["binding"] == f"teams:user/{owner.username}"
    assert not (root_of(persona) / "memory/plan.md").exists()
    confirmations.decide(record=record, approve=True, user=owner)
    first = call(persona, "workspace_write", PLAN, cid)
    assert first["ok"] is True
    assert ran_once(persona, cid, first)


def test_a_deputy_scope_confirmation_goes_to_the_owning_lead_through_handle(hub: Hub) -> None:
    """VX-SEC-13, V1-CONF-1, V1-CONF-2, V1-CONF-3: the deputy's ask-first call is held; its
    decision record names the lead as authority; the lead is told in its inbox and at its
    mailbox; neither the deputy nor the owner may decide; the lead approves and the call runs
    once."""
    owner = owner_with_surface(hub)
    lead = standing_persona(owner, persona_class=PersonaClass.PROJECT_LEAD)
    deputy = standing_persona(
        owner, agent=lead.agent, owning_lead=lead, ask_first_verbs=["workspace_write"]
    )
    cid = correlation()
    pending = held(deputy, cid)
    assert (pending["code"], pending["authority"]) == ("confirmation_required", f"lead:{lead}")
    record = DecisionRecord.objects.get(correlation_id=cid)
    assert (record.authority_kind, record.authority_persona, record.requester) == (
        AuthorityKind.LEAD,
        lead,
        deputy,
    )
    assert record.boundary == "" and record.operation["tool"] == "workspace_write"
    request = hub.confirmations[cid]["request"]
    assert request["authority"] == {"kind": "lead", "principal": persona_principal(lead)}
    (notice,) = call(lead, "list_coordination_messages")["result"]["messages"]
    assert notice["envelope"]["confirmation"]["correlation_id"] == cid
    for who in ({"persona": deputy}, {"user": owner}):
        with pytest.raises(PermissionDenied):
            confirmations.decide(record=record, approve=True, **who)
    assert call(deputy, "workspace_write", PLAN, cid)["status"] == "pending"
    decided = confirmations.decide(record=record, approve=True, persona=lead)
    assert (decided.decision, decided.decided_by_persona) == (
        DecisionRecord.Decision.APPROVED,
        lead,
    )
    first = call(deputy, "workspace_write", PLAN, cid)
    assert first["ok"] is True
    assert ran_once(deputy, cid, first)


def test_a_stamp_naming_another_owners_lead_routes_nowhere(hub: Hub) -> None:
    """VX-SEC-13, V1-CONF-1: a stamp (restored from elsewhere, never checked by the factory)
    that names another owner's project lead cannot send that owner the request: the call is
    refused, no record, card or inbox message is made, and nothing runs."""
    foreign_lead = standing_persona(persona_class=PersonaClass.PROJECT_LEAD)
    owner = owner_with_surface(hub)
    deputy = standing_persona(owner, ask_first_verbs=["workspace_write"])
    deputy = install_unchecked_stamp(deputy, owning_lead=str(foreign_lead.uuid))
    assert load_active_stamp(deputy).owning_lead == str(foreign_lead.uuid)
    cid = correlation()
    refused = held(deputy, cid)
    assert (refused["ok"], refused["code"]) == (False, "stamp_unavailable")
    assert f"owning lead {foreign_lead.uuid} cannot take confirmations" in refused["reason"]
    assert not DecisionRecord.objects.filter(correlation_id=cid).exists()
    assert not Delivery.objects.filter(correlation_id=cid).exists()
    assert not CoordinationMessage.objects.filter(recipient=foreign_lead).exists()
    assert hub.confirmations == {} and hub.received == []
    assert RefusalRecord.objects.get(correlation_id=cid).code == "stamp_unavailable"
    assert not (root_of(deputy) / "memory/plan.md").exists()


def test_another_owners_persona_cannot_decide_a_lead_routed_request(hub: Hub) -> None:
    """VX-SEC-13, V1-CONF-3: only the routed lead decides; a lead of another owner may not."""
    owner = owner_with_surface(hub)
    lead = standing_persona(owner, persona_class=PersonaClass.PROJECT_LEAD)
    deputy = standing_persona(
        owner, agent=lead.agent, owning_lead=lead, ask_first_verbs=["workspace_write"]
    )
    outsider = standing_persona(make_owner(), persona_class=PersonaClass.PROJECT_LEAD)
    cid = correlation()
    held(deputy, cid)
    record = DecisionRecord.objects.get(correlation_id=cid)
    with pytest.raises(PermissionDenied):
        confirmations.decide(record=record, approve=True, persona=outsider)
    assert DecisionRecord.objects.get(pk=record.pk).decision == DecisionRecord.Decision.PENDING
