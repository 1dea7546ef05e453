"""The persona admin: owners see and change only their own personas; moderators may delist."""

import re
from typing import Any

import pytest
from django.test import Client

from personas import services
from personas.catalogue import VERB_NAMES
from personas.models import Agent, AuditEvent, Generation, Persona
from tests.admin_support import change_url, saving, signed_in
from tests.factories import (
    DEPLOYER_VERBS,
    REVIEWER_VERBS,
    address,
    make_agent,
    make_owner,
    make_persona,
    run_on_commit,
    standing_verbs,
)
from tests.owner_clients import form_data, fresh_rate_limits  # noqa: F401 (autouse fixture)

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/personas/persona/"
ADD = "/admin/personas/persona/add/"


def toggle_url(persona: Persona) -> str:
    return f"/admin/personas/persona/{persona.pk}/discoverability/"


def snapshot(persona: Persona) -> dict[str, Any]:
    persona.refresh_from_db()
    return {
        "name": persona.name,
        "verb_subset": persona.verb_subset,
        "queues": persona.queues,
        "skills": persona.skills,
        "generation": persona.generation,
        "discoverable": persona.discoverable,
    }


def checkbox_values(html: str, name: str) -> list[str]:
    return re.findall(rf'<input type="checkbox" name="{name}" value="([^"]+)"', html)


def make_moderator() -> Any:
    moderator = make_owner("moderator")
    moderator.is_superuser = True
    moderator.save()
    return moderator


@pytest.fixture
def owner() -> Any:
    return make_owner("ada")


@pytest.fixture
def agent(owner: Any) -> Agent:
    return make_agent(
        owner,
        name="ada-bot",
        granted_verbs=[*DEPLOYER_VERBS, "create_for"],
        granted_queues=["reviews", "deploys"],
    )


@pytest.fixture
def persona(agent: Agent) -> Persona:
    return make_persona(agent, name="Ada Reviewer", verb_subset=REVIEWER_VERBS)


# Who sees what -----------------------------------------------------------------------------------


@pytest.mark.parametrize("page", ["changelist", "change", "delete", "history", "add"])
def test_anonymous_visitors_are_sent_to_the_login_page(persona: Persona, page: str) -> None:
    """S9-AUTH-2: every admin page requires a signed-in staff user."""
    url = {
        "changelist": CHANGELIST,
        "change": change_url(persona),
        "delete": f"/admin/personas/persona/{persona.pk}/delete/",
        "history": f"/admin/personas/persona/{persona.pk}/history/",
        "add": ADD,
    }[page]
    response = Client().get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


def test_anonymous_posts_change_nothing(persona: Persona) -> None:
    """S9-AUTH-2"""
    before = snapshot(persona)
    assert Client().post(toggle_url(persona), {"discoverable": "on"}).status_code == 302
    assert Client().post(change_url(persona), {"name": "Anon"}).status_code == 302
    assert snapshot(persona) == before


def test_another_owner_does_not_see_the_persona_listed(persona: Persona) -> None:
    """S9-AUTH-2: the changelist holds only the signed-in owner's personas."""
    mallory = make_owner("mallory")
    make_persona(make_agent(mallory, name="mallory-bot"), name="Mallory Persona")
    html = signed_in(mallory).get(CHANGELIST).content.decode()
    assert "Mallory Persona" in html
    assert "Ada Reviewer" not in html
    assert "ada-bot" not in html


@pytest.mark.parametrize("page", ["change", "delete", "history"])
def test_another_owner_is_told_the_persona_does_not_exist(persona: Persona, page: str) -> None:
    """S9-AUTH-2: someone else's persona is as absent as a deleted one."""
    url = f"/admin/personas/persona/{persona.pk}/{page}/"
    response = signed_in(make_owner("mallory")).get(url)
    assert response.status_code == 302
    assert response["Location"] == "/admin/"


def test_another_owner_cannot_change_delete_or_toggle_the_persona(
    owner: Any, persona: Persona
) -> None:
    """S9-AUTH-2, S9-DISC-1: posts by another owner change nothing."""
    data = saving(signed_in(owner).get(change_url(persona)))
    data["name"] = "Hijacked"
    mallory = signed_in(make_owner("mallory"))
    before = snapshot(persona)
    assert mallory.post(change_url(persona), data).status_code == 302
    delete = f"/admin/personas/persona/{persona.pk}/delete/"
    assert mallory.post(delete, {"post": "yes"}).status_code == 302
    assert mallory.post(toggle_url(persona), {"discoverable": "on"}).status_code == 302
    action = {"action": "list_in_directory", "_selected_action": [persona.pk], "index": 0}
    mallory.post(CHANGELIST, action)
    assert snapshot(persona) == before
    assert not AuditEvent.objects.filter(kind=AuditEvent.Kind.DISCOVERABILITY).exists()


def test_a_moderator_sees_every_persona_but_only_reads_it(owner: Any, persona: Persona) -> None:
    """S9-AUTH-2: moderators see all personas; what an owner authored stays theirs."""
    moderator = signed_in(make_moderator())
    assert "Ada Reviewer" in moderator.get(CHANGELIST).content.decode()
    page = moderator.get(change_url(persona))
    assert page.status_code == 200
    assert 'name="name"' not in page.content.decode()
    data = saving(signed_in(owner).get(change_url(persona)))
    data["name"] = "Moderated"
    before = snapshot(persona)
    assert moderator.post(change_url(persona), data).status_code == 403
    assert snapshot(persona) == before


# The owner's change form --------------------------------------------------------------------------


def test_the_verb_checkboxes_are_exactly_the_agents_grant(
    agent: Agent, persona: Persona, owner: Any
) -> None:
    """S9-REC-4: the subset and the queues are chosen from the agent's grant and nothing else."""
    html = signed_in(owner).get(change_url(persona)).content.decode()
    assert sorted(checkbox_values(html, "verb_subset")) == sorted(agent.granted_verbs)
    assert checkbox_values(html, "queues") == ["reviews", "deploys"]
    checked = re.findall(r'name="verb_subset" value="([^"]+)"[^>]* checked', html)
    assert sorted(checked) == sorted(REVIEWER_VERBS)


def test_skills_generation_and_card_are_shown_but_never_editable(
    owner: Any, persona: Persona
) -> None:
    """S9-SKL-1: derived skills are displayed read-only; no field lets anyone type skills."""
    response = signed_in(owner).get(change_url(persona))
    html = response.content.decode()
    assert "Work through todos" in html
    assert f'href="{persona.card_path}"' in html
    posted = form_data(response, "persona_form")
    for derived in ("skills", "generation", "standing", "uuid", "agent"):
        assert derived not in posted
    assert not re.search(r'name="[^"]*skill[^"]*"', html)


def test_the_owner_changes_the_subset_and_the_skills_follow(owner: Any, persona: Persona) -> None:
    """S9-SKL-3, S9-SCN-4: saving a new subset in the admin recomputes the skills."""
    persona = make_persona(make_agent(owner), persona_class="project-lead")
    client = signed_in(owner)
    data = saving(client.get(change_url(persona)))
    data["verb_subset"] = [*persona.verb_subset, "create_for"]
    with run_on_commit():
        response = client.post(change_url(persona), data)
    assert response.status_code == 302
    proposal = persona.proposals.get()
    assert proposal.diff["skills_added"] == ["delegate-work"]
    with run_on_commit():
        services.proposal_approve(proposal=proposal, actor=owner)
    after = snapshot(persona)
    assert {"work-todos", "delegate-work"} <= {skill["id"] for skill in after["skills"]}
    assert after["generation"] == 2


def test_a_verb_outside_the_grant_is_refused_and_nothing_is_saved(owner: Any, agent: Agent) -> None:
    """S9-SCN-2: a forged out-of-grant verb never reaches the database."""
    narrow = make_agent(owner, name="narrow", granted_verbs=REVIEWER_VERBS, granted_queues=["q"])
    persona = make_persona(narrow, verb_subset=REVIEWER_VERBS, queues=["q"])
    client = signed_in(owner)
    data = saving(client.get(change_url(persona)))
    data["verb_subset"] = [*REVIEWER_VERBS, "trigger_webhook"]
    before = snapshot(persona)
    response = client.post(change_url(persona), data)
    assert response.status_code == 200
    assert "trigger_webhook" in response.context["adminform"].form.errors["verb_subset"][0]
    assert snapshot(persona) == before


def test_service_errors_land_on_their_field_and_nothing_is_saved(
    owner: Any, persona: Persona
) -> None:
    """The form's clean() surfaces the service's ValidationError on the field it names."""
    client = signed_in(owner)
    data = saving(client.get(change_url(persona)))
    data["name"] = "Renamed"
    data["human_surface_bindings"] = "teams-1\nteams-1"
    before = snapshot(persona)
    generations = Generation.objects.count()
    with run_on_commit() as queued:
        response = client.post(change_url(persona), data)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "duplicate values: teams-1" in errors["human_surface_bindings"][0]
    assert snapshot(persona) == before
    assert Generation.objects.count() == generations
    assert queued == []


# The two-step add --------------------------------------------------------------------------------


def test_adding_first_asks_for_one_of_the_owners_own_agents(owner: Any, agent: Agent) -> None:
    """S9-REC-2: a persona belongs to exactly one agent, chosen from the owner's own."""
    foreign = make_agent(make_owner("mallory"), name="mallory-bot")
    client = signed_in(owner)
    chooser = client.get(ADD).content.decode()
    assert f'<option value="{agent.pk}">ada-bot</option>' in chooser
    assert "mallory-bot" not in chooser
    refused = client.get(f"{ADD}?agent={foreign.pk}").content.decode()
    assert "Choose one of your own agents" in refused
    assert 'name="verb_subset"' not in refused


def test_an_owner_without_agents_is_asked_to_add_one_first() -> None:
    html = signed_in(make_owner("newcomer")).get(ADD).content.decode()
    assert 'href="/admin/personas/agent/add/"' in html


def test_the_owner_adds_a_persona_in_two_steps(owner: Any) -> None:
    """S9-REC-1, S9-SKL-1, S9-DISC-1: agent, authored prompt and subset; skills derived;
    listing at creation is the owner's explicit, audited choice."""
    agent = make_agent(owner, name="ada-bot", granted_queues=["reviews", "deploys"])
    client = signed_in(owner)
    page = client.get(f"{ADD}?agent={agent.pk}")
    html = page.content.decode()
    assert sorted(checkbox_values(html, "verb_subset")) == sorted(agent.granted_verbs)
    assert set(checkbox_values(html, "verb_subset")) <= VERB_NAMES
    data = saving(page)
    data.update(
        name="Ada Deployer",
        system_prompt="You deploy reviewed releases.",
        persona_class="project-lead",
        address=str(address("work/core/lead").pk),
        verb_subset=standing_verbs("project-lead", *DEPLOYER_VERBS),
        queues="deploys",
        discoverable="on",
    )
    with run_on_commit():
        response = client.post(f"{ADD}?agent={agent.pk}", data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    persona = Persona.objects.get(name="Ada Deployer")
    with run_on_commit():
        services.proposal_approve(proposal=persona.proposals.get(), actor=owner)
    persona.refresh_from_db()
    assert persona.agent == agent
    assert persona.verb_subset == standing_verbs("project-lead", *DEPLOYER_VERBS)
    assert {"work-todos", "deploy-releases"} <= {skill["id"] for skill in persona.skills}
    assert persona.discoverable
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.DISCOVERABILITY, persona=persona)
    assert (event.actor, event.data["via"]) == (owner, "admin-form")


def test_an_add_beyond_the_chosen_agents_grant_persists_nothing(owner: Any) -> None:
    """S9-SCN-2: the second step offers and accepts only the chosen agent's grant."""
    narrow = make_agent(owner, name="narrow", granted_verbs=REVIEWER_VERBS, granted_queues=["q"])
    client = signed_in(owner)
    data = saving(client.get(f"{ADD}?agent={narrow.pk}"))
    data.update(
        name="Too Big",
        system_prompt="You do everything.",
        persona_class="coder-deputy",
        address=str(address("work/core/reviewer").pk),
        verb_subset=[*REVIEWER_VERBS, "create_for"],
        queues=["q", "deploys"],
    )
    response = client.post(f"{ADD}?agent={narrow.pk}", data)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert "create_for" in errors["verb_subset"][0]
    assert "deploys" in errors["queues"][0]
    assert not Persona.objects.exists()


# Discoverability ---------------------------------------------------------------------------------


def test_the_owner_lists_and_delists_from_the_changelist(owner: Any, persona: Persona) -> None:
    """S9-DISC-1: the per-row toggle goes through the service and is audited."""
    client = signed_in(owner)
    html = client.get(CHANGELIST).content.decode()
    assert f'formaction="{toggle_url(persona)}" name="discoverable" value="on">List<' in html
    response = client.post(toggle_url(persona), {"discoverable": "on"})
    assert response.status_code == 302
    assert response["Location"] == CHANGELIST
    assert snapshot(persona)["discoverable"]
    html = client.get(CHANGELIST).content.decode()
    assert f'formaction="{toggle_url(persona)}" name="discoverable" value="off">Delist<' in html
    client.post(toggle_url(persona), {"discoverable": "off"})
    assert not snapshot(persona)["discoverable"]
    events = AuditEvent.objects.filter(kind=AuditEvent.Kind.DISCOVERABILITY).order_by("id")
    assert [(e.actor, e.data["from"], e.data["to"], e.data["via"]) for e in events] == [
        (owner, False, True, "admin-list"),
        (owner, True, False, "admin-list"),
    ]


def test_the_toggle_accepts_only_post(owner: Any, persona: Persona) -> None:
    response = signed_in(owner).get(toggle_url(persona))
    assert response.status_code == 405


def test_the_owner_toggles_from_the_persona_form(owner: Any, persona: Persona) -> None:
    """S9-DISC-1: the form's checkbox is the same audited service call."""
    client = signed_in(owner)
    data = saving(client.get(change_url(persona)))
    data["discoverable"] = "on"
    assert client.post(change_url(persona), data).status_code == 302
    after = snapshot(persona)
    assert after["discoverable"]
    assert after["generation"] == 1
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.DISCOVERABILITY)
    assert (event.actor, event.data["from"], event.data["to"], event.data["via"]) == (
        owner,
        False,
        True,
        "admin-form",
    )


def test_the_owner_lists_several_personas_with_an_action(owner: Any, agent: Agent) -> None:
    """S9-DISC-1"""
    personas = [make_persona(agent, name=f"P{n}", verb_subset=REVIEWER_VERBS) for n in range(2)]
    action = {
        "action": "list_in_directory",
        "_selected_action": [p.pk for p in personas],
        "index": 0,
    }
    signed_in(owner).post(CHANGELIST, action)
    assert all(snapshot(p)["discoverable"] for p in personas)


def test_a_moderator_may_delist_any_persona_but_never_list_one(
    owner: Any, persona: Persona
) -> None:
    """S9-DISC-1: a moderator delists; listing stays the owner's explicit choice."""
    moderator_user = make_moderator()
    moderator = signed_in(moderator_user)
    html = moderator.get(CHANGELIST).content.decode()
    assert f'formaction="{toggle_url(persona)}"' not in html

    moderator.post(toggle_url(persona), {"discoverable": "on"})
    assert not snapshot(persona)["discoverable"]
    action = {"action": "list_in_directory", "_selected_action": [persona.pk], "index": 0}
    refused = moderator.post(CHANGELIST, action, follow=True)
    assert "only the owner may list a persona" in refused.content.decode()
    assert not snapshot(persona)["discoverable"]

    signed_in(owner).post(toggle_url(persona), {"discoverable": "on"})
    html = moderator.get(CHANGELIST).content.decode()
    assert f'formaction="{toggle_url(persona)}" name="discoverable" value="off">Delist<' in html
    moderator.post(toggle_url(persona), {"discoverable": "off"})
    assert not snapshot(persona)["discoverable"]
    last = AuditEvent.objects.filter(kind=AuditEvent.Kind.DISCOVERABILITY).first()
    assert (last.actor, last.data["to"]) == (moderator_user, False)


def test_a_moderator_delists_from_the_read_only_persona_page(owner: Any, persona: Persona) -> None:
    """S9-DISC-1: the change-form action works where the form itself is read-only."""
    signed_in(owner).post(toggle_url(persona), {"discoverable": "on"})
    moderator = signed_in(make_moderator())
    action = {"CHANGE_FORM-action": "delist_from_directory", "_selected_action": [persona.pk]}
    assert moderator.post(change_url(persona), action).status_code == 302
    assert not snapshot(persona)["discoverable"]


def test_the_audit_trail_is_on_the_persona_page_read_only(owner: Any, persona: Persona) -> None:
    """S9-DISC-1: who toggled, when, from what, to what, visible and not editable."""
    client = signed_in(owner)
    client.post(toggle_url(persona), {"discoverable": "on"})
    response = client.get(change_url(persona))
    html = response.content.decode()
    assert "not listed → listed (via admin-list)" in html
    posted = form_data(response, "persona_form")
    assert not [name for name in posted if re.match(r"audit_events-0-(at|kind|actor)", name)]


def test_the_persona_page_shows_each_audit_event_once(owner: Any, persona: Persona) -> None:
    """VX-OPS-11 (issue 43): the audit trail on the persona's page has one row per event, each
    said once, however the persona changed."""
    client = signed_in(owner)
    client.post(toggle_url(persona), {"discoverable": "on"})
    services.persona_set_discoverable(
        persona=persona, actor=owner, discoverable=False, via="admin-list"
    )
    html = client.get(change_url(persona)).content.decode()
    events = AuditEvent.objects.filter(persona=persona).count()
    assert events >= 2
    assert len(set(re.findall(r'id="audit_events-(\d+)"', html))) == events
    assert html.count("not listed → listed (via admin-list)") == 1
    assert html.count("listed → not listed (via admin-list)") == 1


# Deleting ---------------------------------------------------------------------------------------


def test_the_owner_deletes_a_persona_through_the_service(owner: Any, persona: Persona) -> None:
    client = signed_in(owner)
    delete = f"/admin/personas/persona/{persona.pk}/delete/"
    assert client.get(delete).status_code == 200
    assert client.post(delete, {"post": "yes"}).status_code == 302
    assert not Persona.objects.filter(pk=persona.pk).exists()


# Big tables -------------------------------------------------------------------------------------


def count_changelist_queries(owner: Any, django_assert_max_num_queries: Any, bound: int) -> None:
    client = signed_in(owner)
    with django_assert_max_num_queries(bound):
        response = client.get(CHANGELIST)
    assert response.status_code == 200


def test_the_changelist_costs_the_same_queries_for_few_and_many_personas(
    owner: Any, agent: Agent, django_assert_max_num_queries: Any
) -> None:
    """The page's query count does not grow with the number of personas."""
    make_persona(agent, name="first", verb_subset=REVIEWER_VERBS)
    count_changelist_queries(owner, django_assert_max_num_queries, 8)
    other = make_agent(owner, name="second-bot")
    for number in range(30):
        make_persona(other if number % 2 else agent, name=f"p{number}", verb_subset=REVIEWER_VERBS)
    count_changelist_queries(owner, django_assert_max_num_queries, 8)


# The stamps app's pieces on the persona page ---------------------------------------------------


def test_the_owner_sees_the_generations_and_their_stamps(owner: Any, persona: Persona) -> None:
    """V1-STAMP-1: the stamp is owner-private; its owner reads it from the persona's page."""
    client = signed_in(owner)
    html = client.get(change_url(persona)).content.decode()
    assert "generations and capability stamps" in html.lower()
    stamp_page = f"/admin/personas/persona/{persona.pk}/generations/1/stamp/"
    assert client.get(stamp_page).status_code == 200
    assert signed_in(make_owner("mallory")).get(stamp_page).status_code == 404
    assert Client().get(stamp_page)["Location"].startswith("/admin/login/")
