"""Human-surface bindings are the owner's: the registry of surfaces, and every place that checks it.

The attacker has an owner account only. They bind their persona to another owner's persona
mailbox or hub chat, or register someone else's chat first, and try to make a persona post there.
"""

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.test import Client

from channel import routing, services
from channel.hub import Hub
from channel.models import Delivery
from personas import services as persona_services
from personas.models import Generation, HumanSurface, Persona, PersonaClass
from personas.services import composition_hash
from personas.surfaces import surface_register, surface_remove
from stamps.services import build_current_stamps, build_generation_stamp
from tests.channel_support import (
    FINANCE,
    OPS,
    held_delete,
    human_principal,
    owner_with_surface,
    running_hub,
    surface_persona,
)
from tests.factories import (
    address,
    make_agent,
    make_owner,
    register_surfaces,
    run_on_commit,
    standing_verbs,
)
from tests.owner_clients import (  # noqa: F401 (autouse fixture)
    form_data,
    fresh_rate_limits,
    token_client,
)
from tests.runtime_support import call, correlation, install_unchecked_stamp, standing_persona

pytestmark = pytest.mark.django_db

FIELD = "human_surface_bindings"


@pytest.fixture
def hub(settings) -> Iterator[Hub]:
    with running_hub(settings) as hub:
        yield hub


def mailbox(persona: Persona) -> str:
    return f"virgo:persona/{persona.uuid}"


def secretary_fields(**fields: Any) -> dict[str, Any]:
    return {
        "name": "Secretary",
        "system_prompt": "Keep the owner informed.",
        "persona_class": PersonaClass.SECRETARY,
        "address": address("root/secretary"),
        "verb_subset": standing_verbs(PersonaClass.SECRETARY),
        "queues": ["reviews"],
        **fields,
    }


def refused(error: pytest.ExceptionInfo[ValidationError]) -> str:
    return " ".join(error.value.message_dict[FIELD])


# The persona service: admin, API, CLI and import all write through it ------------------------


def test_another_owners_persona_mailbox_is_refused_at_the_service() -> None:
    """VX-SEC-5: an owner cannot bind their persona to another owner's persona mailbox; the
    refusal names the field and the value, and nothing is written."""
    victim = standing_persona()
    attacker = make_owner()
    agent = make_agent(attacker)
    with pytest.raises(ValidationError) as error:
        persona_services.persona_create(
            agent=agent,
            actor=attacker,
            **secretary_fields(human_surface_bindings=[mailbox(victim)]),
        )
    assert mailbox(victim) in refused(error)
    assert not Persona.objects.filter(agent=agent).exists()
    mine = surface_persona(owner=attacker, agent=agent)
    with pytest.raises(ValidationError) as error:
        persona_services.persona_update(
            persona=mine, actor=attacker, human_surface_bindings=[OPS, mailbox(victim)]
        )
    assert mailbox(victim) in refused(error) and OPS not in refused(error)
    mine.refresh_from_db()
    assert (mine.human_surface_bindings, mine.generation) == ([OPS], 1)


def test_a_hub_id_nobody_registered_or_another_owner_holds_is_refused() -> None:
    """VX-SEC-5: a hub id is bindable only once its owner registered it; one another owner
    holds stays theirs, in any spelling of its case."""
    victim = make_owner()
    register_surfaces(victim, [FINANCE])
    attacker = make_owner()
    agent = make_agent(attacker)
    for binding in ("teams:chat/nobody", FINANCE, FINANCE.upper()):
        with pytest.raises(ValidationError) as error:
            persona_services.persona_create(
                agent=agent, actor=attacker, **secretary_fields(human_surface_bindings=[binding])
            )
        assert repr(binding) in refused(error), binding
    assert not Persona.objects.filter(agent=agent).exists()


@pytest.mark.parametrize(
    "binding",
    [
        "virgo:persona/not-a-uuid",
        "virgo:persona/{upper}",
        "virgo:hub/anything",
        "teams:chat/ops and more",
        "x" * 201,
    ],
)
def test_malformed_and_reserved_bindings_are_refused(binding: str) -> None:
    """VX-SEC-5: only the one canonical spelling of a mailbox, and no look-alike ids."""
    owner = make_owner()
    agent = make_agent(owner)
    own = standing_persona(owner, agent=agent)
    binding = binding.format(upper=str(own.uuid).upper())
    with pytest.raises(ValidationError) as error:
        persona_services.persona_create(
            agent=agent, actor=owner, **secretary_fields(human_surface_bindings=[binding])
        )
    assert repr(binding) in refused(error)


def test_a_same_owner_mailbox_and_a_registered_surface_are_accepted() -> None:
    """VX-SEC-5: the owner's own registered surface and the mailbox of another of the owner's
    personas are bound, and the stamp binds exactly them."""
    owner = make_owner()
    agent = make_agent(owner)
    lead = standing_persona(owner, agent=agent, persona_class=PersonaClass.PROJECT_LEAD)
    surface_register(owner=owner, actor=owner, binding=OPS)
    with run_on_commit():
        persona = persona_services.persona_create(
            agent=agent,
            actor=owner,
            **secretary_fields(human_surface_bindings=[OPS, mailbox(lead)]),
        )
    persona.refresh_from_db()
    assert persona.standing is True
    stamp = persona.generations.get().stamp
    assert b'"human_surfaces":["teams:chat/ops","virgo:persona/' in stamp.data


def test_the_api_and_the_admin_refuse_with_the_field_and_value() -> None:
    """VX-SEC-5: the API's 400 and the admin form both name the binding."""
    victim = standing_persona()
    attacker = make_owner()
    agent = make_agent(attacker)
    address("root/secretary")
    body = {
        "agent": agent.pk,
        "name": "Secretary",
        "system_prompt": "Keep the owner informed.",
        "verb_subset": standing_verbs(PersonaClass.SECRETARY),
        "queues": ["reviews"],
        "persona_class": "secretary",
        "address": "root/secretary",
        "human_surface_bindings": [mailbox(victim)],
    }
    response = token_client(attacker).post("/api/personas/", body, format="json")
    assert response.status_code == 422
    assert mailbox(victim) in " ".join(response.json()[FIELD])
    assert not Persona.objects.filter(agent=agent).exists()
    mine = standing_persona(attacker, agent=agent)
    client = Client()
    client.force_login(attacker)
    change = f"/admin/personas/persona/{mine.pk}/change/"
    data = {**form_data(client.get(change), "persona_form"), "_save": "Save"}
    data[FIELD] = mailbox(victim)
    page = client.post(change, data)
    assert page.status_code == 200
    (message,) = page.context["adminform"].form.errors[FIELD]
    assert mailbox(victim) in message
    mine.refresh_from_db()
    assert (mine.human_surface_bindings, mine.generation) == ([], 1)


# The stamp factory: a generation whose bindings are not the owner's does not stand ------------


def crafted_generation(persona: Persona, **changes: Any) -> Generation:
    """The persona's next generation with `changes` to its composition, written as a restored
    snapshot (or any writer but the persona service) would: nothing checked it."""
    current = persona.generations.get(number=persona.generation)
    composition = {**current.composition, **changes}
    Persona.objects.filter(pk=persona.pk).update(generation=persona.generation + 1, standing=None)
    return Generation.objects.create(
        persona=persona,
        number=persona.generation + 1,
        composition=composition,
        base_composition_hash=composition_hash(composition),
    )


@pytest.mark.parametrize("batch", [False, True], ids=["one", "batch"])
def test_the_factory_refuses_bindings_that_are_not_the_owners(batch: bool) -> None:
    """VX-SEC-5: with a crafted composition, another owner's mailbox and a hub id nobody
    registered make the generation not stand, each reason naming its value; the owner's own
    surface and mailbox pass."""
    victim = standing_persona()
    owner = make_owner()
    agent = make_agent(owner)
    other_own = standing_persona(owner, agent=agent)
    persona = surface_persona(owner=owner, agent=agent)
    bindings = [OPS, mailbox(other_own), mailbox(victim), "teams:chat/unregistered"]
    generation = crafted_generation(persona, human_surface_bindings=bindings)
    if batch:
        persona.refresh_from_db()
        (outcome,) = build_current_stamps(personas=[persona])
    else:
        outcome = build_generation_stamp(generation=generation)
    assert outcome.stamp is None
    generation.refresh_from_db()
    assert generation.standing is False
    reasons = " ".join(generation.not_standing_reasons)
    assert mailbox(victim) in reasons and "'teams:chat/unregistered'" in reasons
    assert mailbox(other_own) not in reasons and f"'{OPS}'" not in reasons
    assert len(generation.not_standing_reasons) == 2
    assert Persona.objects.get(pk=persona.pk).standing is False


def test_the_factory_refuses_another_owners_persona_as_lead() -> None:
    """VX-SEC-13: a crafted composition naming another owner's project lead does not stand."""
    foreign_lead = standing_persona(persona_class=PersonaClass.PROJECT_LEAD)
    deputy = standing_persona()
    generation = crafted_generation(deputy, owning_lead=str(foreign_lead.uuid))
    outcome = build_generation_stamp(generation=generation)
    assert outcome.stamp is None
    assert outcome.reasons == [
        f"owning lead {foreign_lead.uuid} is not a persona of the persona's owner"
    ]


# At call time: send_human_message through handle() reaches only the owner's surface ----------


def test_send_human_message_reaches_only_the_owners_surface(hub: Hub) -> None:
    """VX-SEC-5, V1-HS-2: the owner's persona posts on the owner's surface; another owner's
    surface is refused before the hub hears of it, even by a stamp that binds it (one restored
    from elsewhere or built before surfaces were registered)."""
    victim = make_owner()
    register_surfaces(victim, [FINANCE])
    persona = surface_persona()
    sent = call(persona, "send_human_message", {"binding": OPS, "text": "Build is green."})
    assert sent["ok"] is True and sent["result"]["applied"] is True
    assert [m["binding"] for m in hub.messages.values()] == [OPS]
    foreign = call(persona, "send_human_message", {"binding": FINANCE, "text": "psst"})
    assert (foreign["ok"], foreign["boundary"]) == (False, "cross-scope-access")
    persona = install_unchecked_stamp(persona, human_surface_bindings=[OPS, FINANCE])
    smuggled = call(persona, "send_human_message", {"binding": FINANCE, "text": "psst"})
    assert smuggled["ok"] is False
    assert (
        f"surface {FINANCE!r} is not a human surface of this persona's owner"
        in (smuggled["reason"])
    )
    assert [m["binding"] for m in hub.messages.values()] == [OPS]
    assert [r.route for r in hub.received] == ["send"]
    assert not Delivery.objects.filter(correlation_id=smuggled["correlation_id"]).exists()
    status = call(persona, "get_human_surface_status")["result"]["surfaces"]
    assert status == [{"binding": OPS, "state": "connected"}]
    again = call(persona, "send_human_message", {"binding": OPS, "text": "still mine"})
    assert again["ok"] is True


# The registry: one surface belongs to one owner ---------------------------------------------


def test_a_surface_belongs_to_one_owner_and_is_given_up_only_when_unbound() -> None:
    """VX-SEC-5: a second owner cannot claim a registered binding (nor a case variant), nor
    remove it; Virgo's own ids are never registered; the owner gives a surface up only once
    no persona is bound to it."""
    owner, other = make_owner(), make_owner()
    surface = surface_register(owner=owner, actor=owner, binding=OPS, label="ops chat")
    for binding in (OPS, "Teams:Chat/OPS"):
        with pytest.raises(ValidationError, match="registered to another owner"):
            surface_register(owner=other, actor=other, binding=binding)
    with pytest.raises(ValidationError, match="already one of your human surfaces"):
        surface_register(owner=owner, actor=owner, binding=OPS.upper())
    with pytest.raises(ValidationError, match="Virgo's own"):
        surface_register(owner=owner, actor=owner, binding="virgo:persona/x")
    with pytest.raises(PermissionDenied):
        surface_register(owner=owner, actor=other, binding="teams:chat/planted")
    with pytest.raises(PermissionDenied):
        surface_remove(surface=surface, actor=other)
    persona = surface_persona(owner=owner, name="Ops secretary")
    with pytest.raises(ValidationError, match="bound to Ops secretary: unbind it first"):
        surface_remove(surface=surface, actor=owner)
    persona_services.persona_update(persona=persona, actor=owner, human_surface_bindings=[])
    surface_remove(surface=surface, actor=owner)
    assert not HumanSurface.objects.exists()
    assert surface_register(owner=other, actor=other, binding=OPS).owner == other


def test_owners_manage_their_surfaces_in_the_api_and_nobody_elses() -> None:
    """VX-SEC-5: list, register, read and remove one's own; another owner's is a 404; a
    claimed binding and a bound surface are 400s naming the field; anonymous is 401."""
    owner, other = make_owner(), make_owner()
    client = token_client(owner)
    created = client.post("/api/surfaces/", {"binding": OPS, "label": "ops"}, format="json")
    assert created.status_code == 201, created.content
    surface_id = created.json()["id"]
    assert created["Location"].endswith(f"/api/surfaces/{surface_id}/")
    assert created.json()["binding"] == OPS and created.json()["owner"] == owner.pk
    taken = token_client(other).post("/api/surfaces/", {"binding": OPS}, format="json")
    assert taken.status_code == 422 and "another owner" in taken.json()["binding"][0]
    assert token_client(other).get("/api/surfaces/").json()["results"] == []
    assert token_client(other).get(f"/api/surfaces/{surface_id}/").status_code == 404
    assert token_client(other).delete(f"/api/surfaces/{surface_id}/").status_code == 404
    assert client.get(f"/api/surfaces/{surface_id}/").json()["label"] == "ops"
    surface_persona(owner=owner, name="Bound")
    busy = client.delete(f"/api/surfaces/{surface_id}/")
    assert busy.status_code == 422 and "bound to Bound" in busy.json()["binding"][0]
    assert Client().get("/api/surfaces/").status_code == 401
    unknown = client.post("/api/surfaces/", {"binding": FINANCE, "owner": 9}, format="json")
    assert unknown.status_code == 400 and set(unknown.json()) == {"owner"}


def test_owners_register_and_remove_surfaces_in_the_admin() -> None:
    """VX-SEC-5: the admin registers through the same service (errors on the field), lists
    only one's own, and will not delete a bound surface, naming the persona."""
    owner, other = make_owner(), make_owner()
    register_surfaces(other, [FINANCE])
    client = Client()
    client.force_login(owner)
    added = client.post("/admin/personas/humansurface/add/", {"binding": OPS, "label": "ops"})
    assert added.status_code == 302, added.content
    claimed = client.post("/admin/personas/humansurface/add/", {"binding": FINANCE})
    assert claimed.status_code == 200
    assert "is registered to another owner" in claimed.content.decode()
    listing = client.get("/admin/personas/humansurface/").content.decode()
    assert OPS in listing and FINANCE not in listing
    surface = HumanSurface.objects.get(binding=OPS)
    surface_persona(owner=owner, name="Bound")
    page = client.get(f"/admin/personas/humansurface/{surface.pk}/delete/")
    assert "bound to Bound" in page.content.decode()
    client.post(f"/admin/personas/humansurface/{surface.pk}/delete/", {"post": "yes"})
    assert HumanSurface.objects.filter(pk=surface.pk).exists()
    foreign = HumanSurface.objects.get(binding=FINANCE)
    assert client.get(f"/admin/personas/humansurface/{foreign.pk}/change/").status_code == 302


# The owner's confirmation surface is one of the owner's surfaces -----------------------------


def test_the_confirmation_surface_must_be_one_of_the_owners_surfaces() -> None:
    """VX-SEC-5: an owner cannot have their confirmation cards posted into a place they do not
    hold: unregistered and another owner's bindings are refused, in the service and the admin."""
    owner, other = make_owner(), make_owner()
    register_surfaces(other, [FINANCE])
    for binding in (FINANCE, "teams:user/nobody"):
        with pytest.raises(ValidationError) as error:
            services.authority_surface_set(
                user=owner, actor=owner, binding=binding, principal="aad:me"
            )
        assert repr(binding) in error.value.message_dict["binding"][0]
    client = Client()
    client.force_login(owner)
    page = client.post(
        "/admin/channel/authoritysurface/add/", {"binding": FINANCE, "principal": "aad:me"}
    )
    assert page.status_code == 200
    assert "is not one of your human surfaces" in page.content.decode()


def test_a_surface_given_up_and_claimed_by_another_owner_gets_no_confirmations(hub: Hub) -> None:
    """VX-SEC-5: confirmations go only to a surface the owner still holds; one given up (and
    now another owner's) is not used, and the request waits in the admin."""
    owner = owner_with_surface(hub)
    binding = f"teams:user/{owner.username}"
    persona = standing_persona(owner)
    surface_remove(surface=HumanSurface.objects.get(binding=binding), actor=owner)
    thief = make_owner()
    surface_register(owner=thief, actor=thief, binding=binding)
    cid = correlation()
    held_delete(persona, cid)
    delivery = Delivery.objects.get(correlation_id=cid)
    assert (delivery.status, delivery.reason) == (Delivery.Status.FAILED, "no_authority_surface")
    assert cid not in hub.confirmations
    assert routing.redeliver_pending(older_than=timedelta(0)) == 1
    assert cid not in hub.confirmations
    assert human_principal(owner)["id"] not in str([r.body for r in hub.received])
