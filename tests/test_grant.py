"""The grant is one thing (stamps.grant): every widening waits, the digest pins all of it, and a
write that would leave a persona unable to stand is refused where it is made."""

import copy
import dataclasses
import json
import re
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import transaction
from rest_framework.test import APIClient

from cards.rendering import PINNED_GRANT_EXTENSION
from personas import services
from personas.catalogue import VERBS, VERBS_BY_NAME, Boundary
from personas.models import GrantProposal, Persona, PersonaClass
from personas.services.generations import _next_generation
from settling.publication import publish_generation
from stamps.factory import build_stamp
from stamps.grant import (
    GRANT_DEFINITION,
    GRANT_FIELDS,
    NOT_GRANT,
    class_refusals,
    compare,
    digest,
    grant_of,
)
from stamps.models import CapabilityStamp
from stamps.profiles import class_may_have
from stamps.review import grant_diff
from stamps.validation import schema as stamp_schema
from tests.admin_support import change_url, saving, signed_in
from tests.factories import (
    address,
    make_owner,
    make_persona,
    register_surfaces,
    run_on_commit,
    stamp_kwargs,
    update_persona,
)
from tests.grant_support import broken_generation, patch, state, url
from tests.owner_clients import (  # noqa: F401 (autouse fixture)
    fresh_rate_limits,
    session_client,
    token_client,
)
from tests.runtime_support import standing_persona

pytestmark = pytest.mark.django_db

SALT = "00" * 32


def card_pin(persona: Persona) -> dict[str, Any]:
    response = APIClient().get(persona.card_path)
    assert response.status_code == 200, response.content
    card = json.loads(response.content)
    [pin] = [e for e in card["capabilities"]["extensions"] if e["uri"] == PINNED_GRANT_EXTENSION]
    return pin["params"]


# VX-GRANT-1: one grant, and every field of the stamp is in it or says why not ---------------------


def _leaves(schema: dict[str, Any], node: dict[str, Any], prefix: str) -> list[str]:
    if "$ref" in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
    if node.get("type") == "array" and "items" in node:
        items = _leaves(schema, node["items"], f"{prefix}[]")
        return [prefix] if items == [f"{prefix}[]"] else items
    properties = node.get("properties")
    if not properties:
        return [prefix]
    return [
        leaf
        for name, child in properties.items()
        for leaf in _leaves(schema, child, f"{prefix}.{name}" if prefix else name)
    ]


def test_every_field_of_the_stamp_schema_is_in_the_grant_or_says_why_not() -> None:
    """VX-GRANT-1: walking the v3 stamp schema, each field is either scope the grant carries or
    named, with its reason, as not grant; a field the stamp gains later fails here until it is
    placed, so it cannot escape review or the pin by being forgotten."""
    schema = stamp_schema(3)
    leaves = set(_leaves(schema, schema, ""))
    assert leaves == set(GRANT_FIELDS) | set(NOT_GRANT)
    assert not set(GRANT_FIELDS) & set(NOT_GRANT)
    assert all(reason for reason in NOT_GRANT.values())


def _document(**overrides: Any) -> dict[str, Any]:
    return build_stamp(**stamp_kwargs(PersonaClass.SECRETARY, **overrides))


def _set(document: dict[str, Any], path: str, change: Any) -> None:
    node: Any = document
    parts = path.replace("[]", ".0").split(".")
    for part in parts[:-1]:
        node = node[int(part)] if part.isdigit() else node[part]
    node[parts[-1]] = change(node[parts[-1]])


def _other(value: Any) -> Any:
    if value in ("allow", "confirm"):
        return {"allow": "confirm", "confirm": "allow"}[value]
    if isinstance(value, list):
        return [*value, "elsewhere"]
    if isinstance(value, int):
        return value + 1
    return f"{value}-other" if value else "other"


@pytest.mark.parametrize("path", sorted(GRANT_FIELDS))
def test_every_grant_field_moves_the_grant_and_its_digest(path: str) -> None:
    """VX-GRANT-1, VX-GRANT-3: changing any scope-bearing field of a stamp changes the grant read
    from it and the digest a peer pins."""
    document = _document()
    changed = copy.deepcopy(document)
    _set(changed, path, _other)
    assert grant_of(changed) != grant_of(document)
    assert digest(grant_of(changed), salt=SALT) != digest(grant_of(document), salt=SALT)


@pytest.mark.parametrize("path", sorted(NOT_GRANT))
def test_a_field_that_is_not_grant_leaves_the_digest_alone(path: str) -> None:
    """VX-GRANT-3: the prompt's hash, labels and counters are not the grant: the digest stays."""
    document = _document()
    changed = copy.deepcopy(document)
    _set(changed, path, _other)
    assert digest(grant_of(changed), salt=SALT) == digest(grant_of(document), salt=SALT)


def _grant(**overrides: Any) -> Any:
    return grant_of(_document(**overrides))


def _lead(uuid: str) -> Any:
    kwargs = stamp_kwargs(PersonaClass.SECRETARY)
    return kwargs["persona"].__class__(
        **{**{f: getattr(kwargs["persona"], f) for f in ("id", "name", "generation", "owner")}},
        owning_lead=uuid,
    )


LEAD_A = "11111111-1111-4111-8111-111111111111"
LEAD_B = "22222222-2222-4222-8222-222222222222"
SECRETARY_VERBS = stamp_kwargs(PersonaClass.SECRETARY)["verb_subset"]
WITHOUT_CLAIM = [verb for verb in SECRETARY_VERBS if verb != "claim"]

# Each kind of widening the issue names, as the grant read from two factory stamps.
WIDENINGS = {
    "tool added": ({"verb_subset": WITHOUT_CLAIM}, {}, "adds tool claim"),
    "confirm becomes allow": (
        {"ask_first_verbs": ["set_summary"]},
        {},
        "set_summary: confirm becomes allow",
    ),
    "ask-first removed": (
        {"ask_first_verbs": ["set_summary"]},
        {},
        "set_summary: no longer asks first",
    ),
    "queue added": ({}, {"queues": ["reviews", "triage"]}, "adds queue triage"),
    "binding added": (
        {},
        {"human_surface_bindings": ["teams:general", "teams:ops"]},
        "adds human-surface binding teams:ops",
    ),
    "graph namespace above": (
        {"graph_namespace": "root/secretary/notes"},
        {"graph_namespace": "root/secretary"},
        "graph namespace root/secretary is above root/secretary/notes",
    ),
    "graph namespace beside": (
        {},
        {"graph_namespace": "work/core"},
        "graph namespace work/core is beside root/secretary",
    ),
    "authority owner to lead": ({}, {"persona": _lead(LEAD_A)}, "to owning lead " + LEAD_A),
    "authority lead to lead": (
        {"persona": _lead(LEAD_A)},
        {"persona": _lead(LEAD_B)},
        f"confirmations move to owning lead {LEAD_B} from owning lead {LEAD_A}",
    ),
}

NARROWINGS = {
    "tool removed": ({}, {"verb_subset": WITHOUT_CLAIM}),
    "allow becomes confirm": ({}, {"ask_first_verbs": ["set_summary"]}),
    "queue removed": ({"queues": ["reviews", "triage"]}, {}),
    "binding removed": ({"human_surface_bindings": ["teams:general", "teams:ops"]}, {}),
    "graph namespace below": ({}, {"graph_namespace": "root/secretary/notes"}),
    "authority lead to owner": ({"persona": _lead(LEAD_A)}, {}),
    "nothing of the grant": ({}, {"base_composition_hash": "b" * 64}),
    "the same owning lead": (
        {"persona": _lead(LEAD_A)},
        {"persona": _lead(LEAD_A), "base_composition_hash": "b" * 64},
    ),
}


@pytest.mark.parametrize("kind", WIDENINGS)
def test_every_kind_of_widening_is_named(kind: str) -> None:
    """VX-GRANT-2: each kind of widening is found, and said, by the one comparison."""
    before, after, said = WIDENINGS[kind]
    diff = compare(_grant(**before), _grant(**after))
    assert diff["widens"] is True
    assert any(said in reason for reason in diff["widening"]), diff["widening"]


def test_the_tools_a_change_adds_are_one_reason() -> None:
    """VX-GRANT-2, VX-OPS-11: the tools a change adds are said once, as one list in the place of
    the first (a first grant adds every tool of its class); one tool is said as one."""
    fewer = [verb for verb in SECRETARY_VERBS if verb not in ("claim", "complete")]
    diff = compare(_grant(verb_subset=fewer), _grant(queues=["reviews", "triage"]))
    assert diff["tools_added"] == ["claim", "complete"]
    assert diff["widening"] == ["adds 2 tools: claim, complete", "adds queue triage"]
    first = compare(None, _grant())
    assert first["widening"][0] == (
        f"adds {len(SECRETARY_VERBS)} tools: {', '.join(sorted(SECRETARY_VERBS))}"
    )
    assert not any(reason.startswith("adds tool") for reason in first["widening"])


@pytest.mark.parametrize("kind", NARROWINGS)
def test_every_kind_of_narrowing_widens_nothing(kind: str) -> None:
    """VX-GRANT-2: narrowing (or no grant change) is not widening."""
    before, after = NARROWINGS[kind]
    diff = compare(_grant(**before), _grant(**after))
    assert (diff["widens"], diff["widening"]) == (False, [])


def test_a_lifted_class_condition_and_a_new_writable_path_are_widening() -> None:
    """VX-GRANT-2, VX-REV-3: a class change that lifts a tool's condition, and one that adds a
    writable path, each widen; the diff names the condition and the path."""
    secretary = _grant()
    coordinator = grant_of(
        build_stamp(
            **stamp_kwargs(
                PersonaClass.TEAM_COORDINATOR,
                address="root/secretary",
                verb_subset=SECRETARY_VERBS,
            )
        )
    )
    diff = compare(secretary, coordinator)
    assert diff["conditions_lifted"] == [
        {"tool": "resolve_decision", "condition": "relay-of-bound-human-decision"}
    ]
    assert "resolve_decision: lifts condition relay-of-bound-human-decision" in diff["widening"]
    scoped = grant_of(build_stamp(**stamp_kwargs(PersonaClass.TEAM_COORDINATOR)))
    lead = grant_of(build_stamp(**stamp_kwargs(PersonaClass.PROJECT_LEAD)))
    paths = compare(scoped, lead)
    assert paths["paths_added"] == ["worktrees/core/**"]
    assert "adds writable path worktrees/core/**" in paths["widening"]


def _with_tool(grant: Any, name: str, **changes: Any) -> Any:
    """The grant with one of its tools changed as a release of the factory might change it."""
    tools = tuple(
        dataclasses.replace(tool, **changes) if tool.name == name else tool for tool in grant.tools
    )
    return dataclasses.replace(grant, tools=tools)


# A kept tool's own widening, as a release that changes what the factory stamps could make it.
TOOL_WIDENINGS = {
    "boundary dropped": (
        {"boundary": "human-surface-send"},
        {"boundary": None},
        "claim: no longer crosses boundary human-surface-send",
    ),
    "handler changed": (
        {"handler_action": "work.claim"},
        {"handler_action": "work.claim_any"},
        "claim: runs as work.claim_any, not work.claim",
    ),
    "tool's workspace moved": (
        {"workspace": "work"},
        {"workspace": "home"},
        "claim: moves to workspace home from work",
    ),
    "tool's project moved": (
        {"project": "core"},
        {"project": "other"},
        "claim: moves to project other from core",
    ),
    "tool's queue added": ({"queues": ("reviews",)}, {"queues": ("reviews", "x")}, "adds queues x"),
    "tool's path added": (
        {"paths": ()},
        {"paths": ("a/**", "b/**")},
        "claim: adds paths a/**, b/**",
    ),
    "tool's surface added": ({"surfaces": ()}, {"surfaces": ("teams:x",)}, "adds surfaces teams:x"),
}


@pytest.mark.parametrize("kind", TOOL_WIDENINGS)
def test_a_kept_tools_own_widening_is_named_once(kind: str) -> None:
    """VX-GRANT-2: a tool kept from one grant to the next widens when it stops crossing a
    boundary, runs as another handler action, reaches another workspace or project, or gains a
    queue, path or surface the persona-wide grant does not already name; and the same change
    read back is no widening."""
    before_tool, after_tool, said = TOOL_WIDENINGS[kind]
    grant = _grant()
    before = _with_tool(grant, "claim", **before_tool)
    after = _with_tool(grant, "claim", **after_tool)
    widening = compare(before, after)["widening"]
    assert [reason for reason in widening if reason.startswith("claim: ")] == [
        said if said.startswith("claim: ") else f"claim: {said}"
    ]
    assert not [r for r in compare(after, after)["widening"] if r.startswith("claim: ")]


def test_a_tool_that_comes_to_cross_a_boundary_widens_nothing() -> None:
    """VX-GRANT-2: a kept tool that now crosses a boundary it did not (so it is confirmed where
    it was not) narrows."""
    grant = _grant()
    crossing = _with_tool(grant, "claim", boundary="human-surface-send")
    assert not [r for r in compare(grant, crossing)["widening"] if r.startswith("claim: ")]


def test_a_change_the_persona_wide_grant_names_is_not_said_again_per_tool() -> None:
    """VX-REV-3: a queue added to the persona reaches each of its queue tools, and a workspace
    moved moves each tool: the diff says each once, persona-wide."""
    before = _grant()
    after = grant_of(build_stamp(**stamp_kwargs(PersonaClass.SECRETARY, queues=["reviews", "x"])))
    queue_tools = [tool.name for tool in after.tools if "x" in tool.queues]
    assert queue_tools
    widening = compare(before, after)["widening"]
    assert "adds queue x" in widening
    assert not [reason for reason in widening if "adds queues" in reason]
    bound = _grant(human_surface_bindings=["teams:general", "teams:ops"])
    diff = compare(before, bound)
    assert (diff["bindings_added"], diff["bindings_removed"]) == (["teams:ops"], [])
    assert [tool.name for tool in bound.tools if "teams:ops" in tool.surfaces]
    assert "adds human-surface binding teams:ops" in diff["widening"]
    assert not [reason for reason in diff["widening"] if "adds surfaces" in reason]
    moved = dataclasses.replace(_with_tool(before, "claim", workspace="home"), workspace="home")
    widening = compare(before, moved)["widening"]
    assert "moves to workspace home from root" in widening
    assert "claim: moves to workspace home from root" not in widening


def test_the_tool_grants_kept_for_stamps_alike_are_bounded_oldest_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """VX-GRANT-1: the tool grants worked out once per set of tools are kept up to a bound; past
    it the oldest goes first, and is worked out again (the same) when asked for."""
    from stamps import grant as grant_module

    monkeypatch.setattr(grant_module, "_TOOL_GRANTS_KEPT", 2)
    monkeypatch.setattr(grant_module, "_tool_grants", {})
    documents = [
        _document(verb_subset=[verb for verb in SECRETARY_VERBS if verb != dropped])
        for dropped in ("claim", "complete", "list_todos")
    ]
    first = grant_of(documents[0]).tools
    grant_of(documents[1])
    assert grant_of(documents[0]).tools is first
    grant_of(documents[2])
    assert len(grant_module._tool_grants) == 2
    again = grant_of(documents[0]).tools
    assert again == first and again is not first


def test_nothing_granted_before_makes_every_tool_an_addition_and_nothing_after_widens_nothing() -> (
    None
):
    """VX-GRANT-2: from a generation that does not stand every tool is new; a change that would
    not stand grants nothing, so it widens nothing (the door refuses it instead)."""
    grant = _grant()
    assert compare(None, grant)["tools_added"] == sorted(t.name for t in grant.tools)
    assert compare(grant, None)["widens"] is False


# VX-GRANT-2 through the API: the scope widenings that stood at once before --------------------


@pytest.fixture
def persona() -> Persona:
    return standing_persona(extra=("claim", "list_todos"), discoverable=True)


def test_a_graph_namespace_above_the_current_one_waits(persona: Persona) -> None:
    """VX-GRANT-2, VX-REV-1: PATCH graph_namespace to a namespace above the persona's own is a
    proposal: the stamp the runtime reads keeps the old namespace until the owner approves."""
    before = state(persona)
    response = patch(persona, graph_namespace="work")
    assert response.status_code == 202, response.content
    own = persona.address.path
    assert f"graph namespace work is above {own}" in response.json()["diff"]["widening"]
    assert response.json()["diff"]["scope"] == {
        "from": {"workspace": "work", "project": "core", "graph_namespace": own, "role": "deputy"},
        "to": {"workspace": "work", "project": "core", "graph_namespace": "work", "role": "deputy"},
    }
    assert state(persona) == before
    assert Persona.objects.get(pk=persona.pk).graph_namespace == ""


def test_moving_to_another_role_waits_for_the_owner_and_moves_the_digest(
    persona: Persona,
) -> None:
    """VX-GRANT-5: the same project under another role (deputy -> lead) is a widening: every
    message the persona sends would name it a lead. A proposal names the change, the runtime's
    stamp keeps the old role until the owner approves, and the approved generation's grant
    digest differs."""
    address("work/core/lead")
    # The graph namespace pinned where it is, so the role is the only thing the move changes.
    with run_on_commit():
        update_persona(persona, graph_namespace=persona.address.path)
    persona.refresh_from_db()
    before = state(persona)
    digest_before = persona.generations.get(number=persona.generation).grant_digest
    response = patch(persona, address="work/core/lead")
    assert response.status_code == 202, response.content
    diff = response.json()["diff"]
    assert diff["widening"] == [
        "its role changes from deputy to lead: the name every message of its carries"
    ]
    assert (diff["scope"]["from"]["role"], diff["scope"]["to"]["role"]) == ("deputy", "lead")
    assert state(persona) == before
    proposal = GrantProposal.objects.get(pk=response.json()["id"])
    with run_on_commit():
        services.proposal_approve(proposal=proposal, actor=persona.agent.owner)
    persona.refresh_from_db()
    moved = persona.generations.get(number=persona.generation)
    assert moved.composition["address"] == "work/core/lead"
    assert moved.grant_digest != digest_before


def test_a_graph_namespace_beside_waits_and_one_below_applies_at_once(persona: Persona) -> None:
    """VX-GRANT-2, VX-REV-2: a namespace beside the current one waits; one below it narrows and
    is made at once, its stamp carrying the narrower namespace."""
    beside = patch(persona, graph_namespace="home/notes")
    assert beside.status_code == 202
    below = patch(persona, graph_namespace=f"{persona.address.path}/notes")
    assert below.status_code == 200, below.content
    generation, standing, _ = state(persona)
    assert (generation, standing) == (persona.generation + 1, True)
    stored = CapabilityStamp.objects.get(generation__persona=persona, generation_number=generation)
    namespace = json.loads(stored.data)["bindings"]["graph_namespace"]
    assert namespace == f"{persona.address.path}/notes"


def test_setting_or_moving_the_owning_lead_waits_and_removing_it_applies(persona: Persona) -> None:
    """VX-GRANT-2: confirmations moved from the human owner to a persona, or from one lead to
    another, wait for the owner; moved back to the owner they apply at once."""
    owner = persona.agent.owner
    lead_a = standing_persona(owner, persona_class=PersonaClass.PROJECT_LEAD, agent=persona.agent)
    lead_b = standing_persona(owner, persona_class=PersonaClass.PROJECT_LEAD, agent=persona.agent)
    before = state(persona)
    to_lead = patch(persona, owning_lead=str(lead_a.uuid))
    assert to_lead.status_code == 202, to_lead.content
    said = f"confirmations move to owning lead {lead_a.uuid} from the human owner"
    assert said in to_lead.json()["diff"]["widening"]
    assert state(persona) == before
    with run_on_commit():
        services.proposal_approve(
            proposal=GrantProposal.objects.get(pk=to_lead.json()["id"]), actor=owner
        )
    moved = patch(persona, owning_lead=str(lead_b.uuid))
    assert moved.status_code == 202, moved.content
    back = patch(persona, owning_lead=None)
    assert back.status_code == 200, back.content
    stamp = CapabilityStamp.objects.get(
        generation__persona=persona, generation_number=state(persona)[0]
    )
    assert json.loads(stamp.data)["authority"]["owning_lead"] is None


def test_a_move_to_another_workspace_waits(persona: Persona) -> None:
    """VX-GRANT-2: an address in another workspace reaches what the persona could not: it
    waits, and the diff says where from and to."""
    address("home/core/deputy")
    before = state(persona)
    moved = patch(persona, address="home/core/deputy")
    assert moved.status_code == 202, moved.content
    assert "moves to workspace home from work" in moved.json()["diff"]["widening"]
    assert state(persona) == before


def test_the_api_shows_the_diff_the_grant_comparison_makes(persona: Persona) -> None:
    """VX-GRANT-1, VX-REV-3: the proposal's diff (what the API and the admin show) is the grant
    comparison of the two stamps, field for field."""
    response = patch(persona, queues=["reviews", "triage"], graph_namespace="work")
    proposal = GrantProposal.objects.get(pk=response.json()["id"])
    current = persona.generations.get(number=persona.generation)
    stored = CapabilityStamp.objects.get(generation=current)
    expected = compare(
        grant_of(json.loads(stored.data)),
        grant_of(json.loads(json.dumps(_next_stamp(persona, proposal)))),
    )
    for key, value in expected.items():
        assert proposal.diff[key] == value, key
    assert response.json()["diff"] == proposal.diff
    assert proposal.diff["queues_added"] == ["triage"]
    assert proposal.diff["grant_definition"] == GRANT_DEFINITION


def _next_stamp(persona: Persona, proposal: GrantProposal) -> dict[str, Any]:
    """The stamp the proposal would build, composed as approval would compose it."""
    with transaction.atomic():
        approved = services.proposal_approve(proposal=proposal, actor=persona.agent.owner)
        publish_generation(approved.pk)
        stored = CapabilityStamp.objects.get(
            generation__persona=persona, generation_number=approved.generation
        )
        document: dict[str, Any] = json.loads(stored.data)
        transaction.set_rollback(True)
    return document


# Judged against the last generation that stood ------------------------------------------------


def test_undoing_a_broken_write_narrows_and_applies_at_once(persona: Persona) -> None:
    """VX-GRANT-2, VX-GRANT-4: removing the verb that broke a persona is judged against the last
    generation that stood, so it narrows: made at once (200), and the persona stands again."""
    verbs = list(persona.verb_subset)
    broken = broken_generation(persona, "resolve_decision")
    response = patch(broken, verb_subset=verbs)
    assert response.status_code == 200, response.content
    assert state(persona)[1] is True
    assert not GrantProposal.objects.exists()
    assert APIClient().get(persona.card_path).status_code == 200


def test_from_a_broken_generation_a_widening_still_waits(persona: Persona) -> None:
    """VX-GRANT-2: judged against the last generation that stood, a change that adds a tool
    beyond it waits, even though the current generation grants nothing."""
    verbs, stood = list(persona.verb_subset), persona.generation
    broken = broken_generation(persona, "resolve_decision")
    response = patch(broken, verb_subset=[*verbs, "complete"])
    assert response.status_code == 202, response.content
    diff = response.json()["diff"]
    assert diff["tools_added"] == ["complete"]
    assert diff["compared_with_generation"] == stood
    assert diff["current_generation"] == broken.generation


def test_a_rename_of_a_persona_already_broken_is_not_refused(persona: Persona) -> None:
    """VX-GRANT-4: only what the write itself would break is refused: a persona already unable
    to stand may still be renamed (it stays as broken as it was)."""
    broken = broken_generation(persona, "resolve_decision")
    response = patch(broken, name="Renamed while broken")
    assert response.status_code == 200, response.content


# VX-GRANT-3: the digest pins the whole grant -----------------------------------------------------


def test_the_card_digest_moves_with_scope_and_names_its_definition(persona: Persona) -> None:
    """VX-GRANT-3: a peer that pinned the digest sees it change when only the scope changes
    (graph namespace, a queue, a binding, the owning lead), and the card says which grant
    definition the digest covers; the prompt leaves it alone."""
    pins = [card_pin(persona)]
    assert pins[0]["grantDefinition"] == GRANT_DEFINITION
    owner = persona.agent.owner
    lead = standing_persona(owner, persona_class=PersonaClass.PROJECT_LEAD, agent=persona.agent)
    register_surfaces(owner, ["teams:ops"])
    for change in (
        {"graph_namespace": "work/core"},
        {"queues": ["reviews", "triage"]},
        {"human_surface_bindings": ["teams:ops"]},
        {"owning_lead": lead},
    ):
        persona = update_persona(persona, **change)
        pins.append(card_pin(persona))
    digests = [pin["grantDigest"] for pin in pins]
    assert len(set(digests)) == len(digests)
    persona = update_persona(persona, system_prompt="You review, briefly.")
    assert card_pin(persona)["grantDigest"] == digests[-1]


# VX-GRANT-4: refused at the door -------------------------------------------------------------


def test_a_verb_the_class_may_not_have_is_refused_by_the_api_naming_it(persona: Persona) -> None:
    """VX-GRANT-4: resolve_decision on a coder-deputy is a 422 naming verb_subset and why; the
    persona keeps standing on the generation it had, its card still served."""
    before = state(persona)
    response = patch(persona, verb_subset=[*persona.verb_subset, "resolve_decision"])
    assert response.status_code == 422, response.content
    [reason] = response.json()["verb_subset"]
    assert "resolve_decision" in reason and "coder-deputy" in reason
    assert state(persona) == before
    assert APIClient().get(persona.card_path).status_code == 200


def test_a_creation_with_a_verb_the_class_may_not_have_writes_nothing() -> None:
    """VX-GRANT-4: the same refusal at creation: 422, no persona, no proposal."""
    persona = standing_persona()
    owner = persona.agent.owner
    body = {
        "agent": persona.agent_id,
        "name": "Broken at birth",
        "system_prompt": "You review.",
        "verb_subset": [*persona.verb_subset, "resolve_decision"],
        "queues": [],
        "persona_class": PersonaClass.CODER_DEPUTY,
        "address": address("work/core/broken").path,
    }
    count = Persona.objects.count()
    with run_on_commit():
        response = token_client(owner).post("/api/personas/", body, format="json")
    assert response.status_code == 422, response.content
    assert "resolve_decision" in response.json()["verb_subset"][0]
    assert Persona.objects.count() == count
    assert not GrantProposal.objects.exists()


def test_the_admin_form_refuses_it_as_a_field_error_and_shows_it_disabled(
    persona: Persona,
) -> None:
    """VX-GRANT-4: the admin form offers a verb the class may not have only disabled, with the
    factory's reason; a forged post of it is a field error and the persona keeps standing."""
    client = signed_in(persona.agent.owner)
    page = client.get(change_url(persona))
    html = page.content.decode()
    [tag] = re.findall(r'<input[^>]*name="verb_subset" value="resolve_decision"[^>]*>', html)
    assert " disabled" in tag and "a coder-deputy may not have it" in tag
    [allowed] = re.findall(r'<input[^>]*name="verb_subset" value="claim"[^>]*>', html)
    assert " disabled" not in allowed
    data = saving(page)
    data["verb_subset"] = [*persona.verb_subset, "resolve_decision"]
    before = state(persona)
    response = client.post(change_url(persona), data)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["verb_subset"]
    assert any("resolve_decision" in error for error in errors)
    assert state(persona) == before


def test_the_cli_refuses_it_in_one_line(persona: Persona) -> None:
    """VX-GRANT-4: `virgo persona add` with a verb the class may not have fails with one line
    naming the field, and writes nothing."""
    owner = persona.agent.owner
    count = Persona.objects.count()
    with pytest.raises(CommandError) as refused:
        call_command(
            "persona",
            "add",
            "--owner",
            owner.get_username(),
            "--agent",
            persona.agent.name,
            "--name",
            "Broken at birth",
            "--address",
            address("work/core/broken").path,
            "--class",
            PersonaClass.CODER_DEPUTY,
            "--verbs",
            ",".join([*persona.verb_subset, "resolve_decision"]),
            "--prompt",
            "You review.",
            stdout=StringIO(),
        )
    message = str(refused.value)
    assert "\n" not in message.strip()
    assert "verb_subset" in message and "resolve_decision" in message
    assert Persona.objects.count() == count


def test_the_stamp_review_and_the_records_agree_on_the_refusal(persona: Persona) -> None:
    """VX-GRANT-4: the refusal is the factory's own verdict (the same problems the stamp build
    would record), carried by the diff by field."""
    current = persona.generations.get(number=persona.generation)
    persona.verb_subset = [*persona.verb_subset, "resolve_decision"]
    proposed = _next_generation(persona, services.current_skill_map(), current)
    assert proposed is not None
    diff = grant_diff(current=current, proposed=proposed)
    assert diff["next_stands"] is False
    assert list(diff["refuses"]) == ["verb_subset"]
    assert diff["refuses"]["verb_subset"] == diff["next_problems"]


def test_a_lead_or_binding_that_is_not_the_owners_is_refused(persona: Persona) -> None:
    """VX-GRANT-4, VX-SEC-5: a binding or a lead that is not the owner's is refused naming the
    field; the persona keeps standing."""
    stranger = standing_persona(make_owner(), persona_class=PersonaClass.PROJECT_LEAD)
    before = state(persona)
    lead = patch(persona, owning_lead=str(stranger.uuid))
    assert lead.status_code in (400, 422) and "owning_lead" in lead.json()
    binding = patch(persona, human_surface_bindings=["teams:nobody-registered-this"])
    assert binding.status_code in (400, 422) and "human_surface_bindings" in binding.json()
    assert state(persona) == before


def test_a_persona_made_by_its_owner_keeps_the_owner_as_authority() -> None:
    """VX-GRANT-1: the grant's confirmation authority is the human owner unless a lead is set."""
    persona = make_persona(standing_persona().agent)
    stored = CapabilityStamp.objects.get(generation__persona=persona)
    assert grant_of(json.loads(stored.data)).authority == "owner"


def test_a_session_client_sees_the_same_refusal(persona: Persona) -> None:
    """VX-GRANT-4: the owner's own browser session gets the same 422 as a token."""
    client = session_client(persona.agent.owner, enforce_csrf_checks=False)
    response = client.patch(
        url(persona), {"verb_subset": [*persona.verb_subset, "resolve_decision"]}, format="json"
    )
    assert response.status_code == 422
    assert "verb_subset" in response.json()


def test_every_field_of_a_proposals_diff_says_what_changes(persona: Persona) -> None:
    """VX-REV-3: one change that adds a tool and a queue, asks first for another tool and moves
    the graph namespace below: every field of its diff, asserted whole."""
    owner = persona.agent.owner
    current = persona.generations.get(number=persona.generation)
    response = patch(
        persona,
        verb_subset=[*persona.verb_subset, "complete"],
        queues=["reviews", "triage"],
        ask_first_verbs=["claim"],
        graph_namespace=f"{persona.address.path}/notes",
    )
    assert response.status_code == 202, response.content
    diff = dict(response.json()["diff"])
    next_hash = diff.pop("next_stamp_hash")
    assert len(next_hash) == 64 and next_hash != current.stamp_hash
    own = persona.address.path
    assert diff == {
        "widens": True,
        "widening": ["adds tool complete", "adds queue triage"],
        "tools_added": ["complete"],
        "tools_removed": [],
        "access_changed": [{"tool": "claim", "from": "allow", "to": "confirm"}],
        "conditions_lifted": [],
        "queues_added": ["triage"],
        "queues_removed": [],
        "bindings_added": [],
        "bindings_removed": [],
        "paths_added": [],
        "paths_removed": [],
        "ask_first_added": ["claim"],
        "ask_first_removed": [],
        "scope": {
            "from": {
                "workspace": "work",
                "project": "core",
                "graph_namespace": own,
                "role": "deputy",
            },
            "to": {
                "workspace": "work",
                "project": "core",
                "graph_namespace": f"{own}/notes",
                "role": "deputy",
            },
        },
        "authority": {"from": "the human owner", "to": "the human owner"},
        "grant_definition": GRANT_DEFINITION,
        "skills_added": ["work-todos"],
        "skills_removed": [],
        "current_generation": persona.generation,
        "compared_with_generation": persona.generation,
        "next_generation": persona.generation + 1,
        "current_stamp_hash": current.stamp_hash,
        "next_stands": True,
        "next_problems": [],
        "refuses": {},
    }
    proposal = GrantProposal.objects.get(pk=response.json()["id"])
    assert (proposal.proposed_by, proposal.via, proposal.base_generation) == (
        owner,
        GrantProposal.Via.API,
        persona.generation,
    )


def test_the_verbs_a_class_may_not_have_are_the_factorys_and_each_says_why() -> None:
    """VX-GRANT-4: what the admin shows disabled is exactly what the factory refuses the class,
    each with the cell of the class matrix that refuses it."""
    for persona_class in PersonaClass.values:
        refusals = class_refusals(persona_class)
        barred = {verb.name for verb in VERBS if not class_may_have(persona_class, verb.name)}
        assert set(refusals) == barred
        for reason in refusals.values():
            assert f"a {persona_class} may not have it" in reason and "' is '" in reason


def test_an_allowed_verb_the_persona_lacks_stays_offered(persona: Persona) -> None:
    """VX-GRANT-4: the admin form disables only what the class may not have: a verb the class
    may have, not yet in the subset, stays a plain checkbox."""
    assert "complete" not in persona.verb_subset
    html = signed_in(persona.agent.owner).get(change_url(persona)).content.decode()
    [tag] = re.findall(r'<input[^>]*name="verb_subset" value="complete"[^>]*>', html)
    assert " disabled" not in tag and "checked" not in tag


def test_an_address_the_class_may_not_take_is_refused_naming_the_address(
    persona: Persona,
) -> None:
    """VX-GRANT-4: a class change that leaves the persona at an address its new class may not
    take (a secretary at a project's address) is refused naming `address`, and why."""
    before = state(persona)
    response = patch(persona, persona_class=PersonaClass.SECRETARY)
    assert response.status_code == 422, response.content
    [reason] = response.json()["address"]
    assert "not canonical for a secretary" in reason
    assert state(persona) == before


def test_a_project_binding_moved_or_dropped_says_so() -> None:
    """VX-GRANT-2, VX-REV-3: another project, or the whole workspace instead of one project,
    widens, and the diff says which; a project taken from a workspace-wide binding narrows."""
    deputy = grant_of(build_stamp(**stamp_kwargs(PersonaClass.CODER_DEPUTY)))
    elsewhere = grant_of(
        build_stamp(**stamp_kwargs(PersonaClass.CODER_DEPUTY, address="work/other/deputy"))
    )
    moved = compare(deputy, elsewhere)["widening"]
    assert "moves to project other from core" in moved
    lead = grant_of(build_stamp(**stamp_kwargs(PersonaClass.PROJECT_LEAD)))
    coordinator = grant_of(build_stamp(**stamp_kwargs(PersonaClass.TEAM_COORDINATOR)))
    dropped = compare(lead, coordinator)["widening"]
    assert "reaches all of workspace work, not project core" in dropped
    narrowed = compare(coordinator, lead)["widening"]
    assert narrowed and not [r for r in narrowed if "project" in r or "workspace" in r]


def test_a_verb_that_would_cross_a_deny_boundary_is_refused_as_never_exposed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """VX-GRANT-4, V1 boundaries: the catalogue holds no verb across a deny boundary today; one
    added would be refused to every class as never exposed, not by a cell of the matrix."""
    exporter = dataclasses.replace(
        VERBS_BY_NAME["complete"],
        name="export_lease_authority",
        boundary=Boundary.AUTHORITY_MATERIAL_EXPORT,
    )
    monkeypatch.setitem(VERBS_BY_NAME, exporter.name, exporter)
    for persona_class in PersonaClass.values:
        assert class_refusals(persona_class)[exporter.name] == (
            "crosses the deny boundary lease-fence-authority-export: never exposed"
        )
