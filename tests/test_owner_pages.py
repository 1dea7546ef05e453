"""The owner's pages (issue 24): the admin's index and persona list, the grouped verb form, the
landing page, the error pages and the directory in a browser. The same pages are walked in
Chromium at 1280x800 by tests/test_browser_walk.py; these check what they hold."""

import re
from typing import Any

import pytest
from django.db import connection
from django.template import loader
from django.test import Client
from django.test.utils import CaptureQueriesContext

from personas import services
from personas.models import PersonaClass
from stamps.grant import class_refusals
from tests.factories import DEPLOYER_VERBS, make_agent, make_owner, make_persona, run_on_commit
from tests.owner_clients import fresh_rate_limits  # noqa: F401 (autouse fixture)

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/personas/persona/"


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def revoke(persona: Any, **kwargs: Any) -> None:
    with run_on_commit():
        services.persona_revoke(
            persona=persona,
            actor=persona.agent.owner,
            reason_code="compromised",
            reason="key leaked",
            via="test",
            **kwargs,
        )


# The index -------------------------------------------------------------------------------------


def test_the_index_puts_personas_first_and_names_every_app_plainly() -> None:
    """S9-HDR-1, issue 24: Personas is the first app and Persona its first model; the runtime's
    records and the channel follow under plain names."""
    page = signed_in(make_owner("ivy")).get("/admin/").content.decode()
    headings = re.findall(r'<caption>\s*<a [^>]*class="section"[^>]*>([^<]+)</a>', page)
    assert headings[:3] == ["Personas", "Runtime records", "Human channel"]
    personas = page[page.index("app-personas") :]
    assert personas.index("/admin/personas/persona/") < personas.index("/admin/personas/agent/")
    assert "virgo-channel" not in page.lower()


# The persona list ------------------------------------------------------------------------------


def test_the_list_shows_skills_as_a_count_a_short_id_and_the_card_state() -> None:
    """VX-TRUST-5, issue 24: each row names its persona with the start of its uuid (two of one
    name are told apart), counts its skills with their ids on hover, and says in words whether
    its card stands or is revoked."""
    owner = make_owner("june")
    agent = make_agent(owner)
    kept = make_persona(agent, name="Twin")
    gone = make_persona(agent, name="Twin")
    revoke(gone)
    page = signed_in(owner).get(CHANGELIST).content.decode()
    for persona in (kept, gone):
        assert f'title="{persona.uuid}">{str(persona.uuid)[:8]}</span>' in page
    ids = ", ".join(skill["id"] for skill in kept.skills)
    assert f'<span title="{ids}">{len(kept.skills)}</span>' in page
    assert "virgo-state-revoked" in page and "revoked: compromised" in page
    assert ">stands<" in page


def test_the_list_filters_revoked_personas_and_the_generation_revoked_alike() -> None:
    """VX-TRUST-5, issue 24: the card-state filter finds a revoked persona and one whose
    current generation is revoked, and leaves them out of "Stands"."""
    owner = make_owner("kim")
    agent = make_agent(owner)
    standing = make_persona(agent, name="Standing one")
    revoked = make_persona(agent, name="Revoked one")
    generation_revoked = make_persona(agent, name="Generation one")
    revoke(revoked)
    revoke(generation_revoked, generation=generation_revoked.generation)
    client = signed_in(owner)

    def names(state: str) -> set[str]:
        page = client.get(CHANGELIST, {"state": state}).content.decode()
        return {n for n in ("Standing one", "Revoked one", "Generation one") if f"{n} <" in page}

    assert names("revoked") == {"Revoked one", "Generation one"}
    assert names("stands") == {standing.name}
    assert "generation 1 revoked" in client.get(CHANGELIST).content.decode()


def test_the_owner_column_is_a_moderators_alone() -> None:
    """VX-ID-4, issue 24: an owner's list holds only their personas, so it spends no column on
    the owner; a moderator's names each persona's owner."""
    owner = make_owner("lea")
    make_persona(make_agent(owner))
    moderator = make_owner("mod", is_superuser=True)
    assert "column-owner" not in signed_in(owner).get(CHANGELIST).content.decode()
    assert "column-owner" in signed_in(moderator).get(CHANGELIST).content.decode()


def test_the_list_reads_the_same_number_of_queries_for_any_number_of_personas() -> None:
    """VX-SCALE-1, issue 24: the list's card state, agent and address come with the page's own
    queries, never one more per row."""
    owner = make_owner("max")
    agent = make_agent(owner)
    client = signed_in(owner)
    make_persona(agent)
    client.get(CHANGELIST)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(CHANGELIST).status_code == 200
        return len(captured)

    few = queries()
    for _ in range(4):
        revoke(make_persona(agent))
    assert queries() == few


def test_the_list_links_to_drafting_a_persona_from_a_card() -> None:
    """VX-IMP-1, issue 24: the list and the add page both lead to "from an agent card"."""
    owner = make_owner("ned")
    make_agent(owner)
    client = signed_in(owner)
    for url in (CHANGELIST, "/admin/personas/persona/add/"):
        assert 'href="/admin/personas/persona/from-card/"' in client.get(url).content.decode()


# The persona form ------------------------------------------------------------------------------


def test_the_form_groups_verbs_by_bundle_with_ask_first_beside_each() -> None:
    """VX-GRANT-4, issue 24: the verb subset is a table per capability bundle; each verb no
    boundary governs has its ask-first box on its own row, and a boundary verb says it always
    asks instead; a verb the class refuses is greyed out with the reason."""
    owner = make_owner("olga")
    persona = make_persona(
        make_agent(owner), verb_subset=list(DEPLOYER_VERBS), persona_class=PersonaClass.PROJECT_LEAD
    )
    page = signed_in(owner).get(f"/admin/personas/persona/{persona.pk}/change/").content.decode()
    assert page.count('<table class="verb-grid">') >= 5
    row = re.search(r"<tr[^>]*>(?:(?!</tr>).)*value=\"claim\"(?:(?!</tr>).)*</tr>", page, re.S)
    assert row and 'name="ask_first_verbs" value="claim"' in row[0]
    hook = re.search(r"<tr[^>]*>(?:(?!</tr>).)*value=\"register_webhook\".*?</tr>", page, re.S)
    assert hook and "always asks" in hook[0] and "ask_first_verbs" not in hook[0]
    refused = sorted(class_refusals(PersonaClass.PROJECT_LEAD))
    if refused:
        greyed = re.search(rf'value="{refused[0]}"[^>]*disabled', page)
        assert greyed, f"{refused[0]} is not greyed out"
    # The ask-first field has no row of its own: its boxes are drawn in the table only.
    assert page.count('name="ask_first_verbs" value="claim"') == 1


def test_every_place_field_explains_itself_and_the_lead_select_offers_no_delete() -> None:
    """Issue 24: address, owning lead, graph namespace and queues carry help text; the owning
    lead's select offers neither to add, change nor delete a lead from this form."""
    owner = make_owner("pia")
    persona = make_persona(make_agent(owner))
    page = signed_in(owner).get(f"/admin/personas/persona/{persona.pk}/change/").content.decode()
    for field in ("address", "owning_lead", "graph_namespace", "queues"):
        row = re.search(
            rf'class="form-row field-{field}">.*?<div class="help[^>]*>\s*<div>(\S+)', page, re.S
        )
        assert row, f"{field} has no help text"
    lead = page[page.index('id="id_owning_lead"') : page.index('id="id_graph_namespace"')]
    assert "delete_id_owning_lead" not in lead and "add_id_owning_lead" not in lead


def test_the_audit_trail_names_accounts_without_linking_to_the_accounts_admin() -> None:
    """VX-AUDIT-2, issue 24: who acted is named; the page never links an owner to the accounts
    admin, which only a superuser may open (a 403 for them)."""
    owner = make_owner("quinn")
    persona = make_persona(make_agent(owner))
    with run_on_commit():
        services.persona_set_discoverable(
            persona=persona, actor=owner, discoverable=True, via="test"
        )
    page = signed_in(owner).get(f"/admin/personas/persona/{persona.pk}/change/").content.decode()
    trail = page[page.index("audit_events-heading") :]
    assert "quinn" in trail
    assert "/admin/auth/user/" not in page


# The landing page and the error pages ----------------------------------------------------------


def test_the_landing_page_names_the_installation_and_its_doors_without_a_query(
    settings,
) -> None:
    """S9-HDR-1, issue 24: `/` is a page in the admin's look naming the installation and
    linking to the admin, the directory, the API docs and the JWKS; it asks the database
    nothing, and holds the HTML pages' CSP."""
    settings.VIRGO_PROVIDER_ORGANIZATION = "Example Virgo"
    with CaptureQueriesContext(connection) as captured:
        response = Client().get("/")
    page = response.content.decode()
    assert response.status_code == 200 and len(captured) == 0
    assert "Example Virgo" in page and 'id="site-name"' in page
    doors = ("/admin/", "/api/directory/", "/api/docs/", "/.well-known/jwks.json")
    for href in (*doors, "/.well-known/status/revocation", "/.well-known/ai-catalog.json"):
        assert f'href="{href}"' in page
    assert "default-src 'self'" in response["Content-Security-Policy"]


def test_an_unknown_page_is_a_page_in_the_admins_look_and_stays_json_under_the_api() -> None:
    """S9-HDR-1, issue 24: a 404 off the JSON surfaces is a styled page naming the path; under
    /api/ and /a/ it stays the JSON error shape."""
    page = Client().get("/nothing-here")
    assert page.status_code == 404
    assert '<ol class="breadcrumbs">' in page.content.decode()
    assert "/nothing-here" in page.content.decode()
    api = Client().get("/api/nothing-here/")
    assert (api.status_code, api.json()["code"]) == (404, "not_found")


def test_a_page_an_owner_may_not_open_is_a_styled_403() -> None:
    """Issue 24: an owner opening the accounts admin gets a page saying why, not a bare 403."""
    response = signed_in(make_owner("rex")).get("/admin/auth/user/")
    assert response.status_code == 403
    page = response.content.decode()
    assert "Not yours to see" in page and '<ol class="breadcrumbs">' in page


def test_the_server_error_page_renders_without_a_request_or_the_database(
    django_assert_num_queries,
) -> None:
    """Issue 24: 500.html is rendered with no context at all (Django's handler), so it must
    render so: no request, no user, no query."""
    with django_assert_num_queries(0):
        page = loader.get_template("500.html").render()
    assert "Something failed on our side" in page and 'id="site-name"' in page


# The directory in a browser --------------------------------------------------------------------


def listed(owner: Any, name: str) -> Any:
    persona = make_persona(make_agent(owner), name=name)
    with run_on_commit():
        return services.persona_set_discoverable(
            persona=persona, actor=owner, discoverable=True, via="test"
        )


def test_the_directory_is_a_page_for_a_browser_and_json_for_a_client() -> None:
    """VX-DIR-1, issue 24: the same URL answers a browser (Accept: text/html) with a readable
    page of the entries and a client with JSON; the answer varies by Accept."""
    owner = make_owner("sam")
    persona = listed(owner, "Browsable <b>one</b>")
    client = signed_in(owner)
    html = client.get("/api/directory/", HTTP_ACCEPT="text/html,application/xhtml+xml,*/*;q=0.8")
    assert html["Content-Type"].startswith("text/html")
    page = html.content.decode()
    assert "Browsable &lt;b&gt;one&lt;/b&gt;" in page and "<b>one</b>" not in page
    assert f'href="{persona.card_url}"' in page
    assert "Accept" in html["Vary"]
    data = client.get("/api/directory/", HTTP_ACCEPT="*/*")
    assert data["Content-Type"] == "application/json"
    assert [entry["name"] for entry in data.json()["results"]] == [persona.name]


def test_the_directory_page_names_a_bad_filter_and_asks_a_stranger_to_sign_in() -> None:
    """VX-DIR-1, issue 24: a refused filter is the 400 naming its parameter, as a page; a
    browser that is not signed in is told to sign in (401), never shown entries."""
    listed(make_owner("tess"), "Hidden from strangers")
    browser = {"HTTP_ACCEPT": "text/html"}
    refused = signed_in(make_owner("uma")).get("/api/directory/", {"q": "x" * 201}, **browser)
    assert refused.status_code == 400
    assert "q: must be at most 200 characters" in refused.content.decode()
    stranger = Client().get("/api/directory/", **browser)
    assert stranger.status_code == 401
    page = stranger.content.decode()
    assert 'id="directory-sign-in"' in page and "Hidden from strangers" not in page


def test_the_directory_page_filters_by_skill_name_and_ignores_blank_fields() -> None:
    """Issue 43: the page's form sends every field; those left blank filter nothing (the JSON
    API still refuses an empty value). Its skill filter lists the skill map by name and sends
    the id, so a skill the cards show by name is found by name."""
    owner = make_owner("wes")
    persona = listed(owner, "Findable")
    [skill] = persona.skills[:1]
    browser = {"HTTP_ACCEPT": "text/html"}
    client = signed_in(owner)
    blank = {"q": "", "skill": "", "tag": "", "provider": ""}
    page = client.get("/api/directory/", blank, **browser)
    assert page.status_code == 200 and "Findable" in page.content.decode()
    shown = page.content.decode()
    assert f'<option value="{skill["id"]}">{skill["name"]}</option>' in shown
    assert 'rel="icon" href="/static/virgo/favicon.svg"' in shown
    chosen = client.get("/api/directory/", {**blank, "skill": skill["id"]}, **browser)
    assert f'<option value="{skill["id"]}" selected>' in chosen.content.decode()
    assert "Findable" in chosen.content.decode()
    assert client.get("/api/directory/", blank, HTTP_ACCEPT="*/*").status_code == 400


def test_a_revocation_and_a_purge_read_as_words_in_the_audit_trail() -> None:
    """VX-AUDIT-2, VX-TRUST-5: the trail says what a revocation and a purge did (scope, the
    generations, the reason code and the owner's words, the channel), never "skill None None"."""
    owner = make_owner("vera")
    persona = make_persona(make_agent(owner), name="Old face")
    revoke(persona)
    moderator = make_owner("root", is_superuser=True)
    with run_on_commit():
        services.persona_purge(persona=persona, actor=moderator)
    client = signed_in(moderator)
    page = client.get("/admin/personas/auditevent/").content.decode()
    assert "the whole persona revoked (generation 1), compromised: key leaked" in page
    assert "by its owner via test" in page
    assert re.search(r"Old face \([0-9a-f-]{36}\) purged by a superuser; its tombstone kept", page)
    assert "None None" not in page


def test_the_index_shows_the_owners_own_recent_changes() -> None:
    """Issue 43: the admin's index shows what the owner last changed, from the audit trail,
    linked to the persona (not Django's "Recent actions: None available", a log Virgo's
    writes never fill); another owner's changes are not among them."""
    owner = make_owner("yan")
    persona = make_persona(make_agent(owner), name="Mine")
    make_persona(make_agent(make_owner("zoe")), name="Theirs")
    page = signed_in(owner).get("/admin/").content.decode()
    sidebar = page[page.index('id="recent-changes"') :]
    assert "Your recent changes" in sidebar and "None available" not in page
    assert f'href="/admin/personas/persona/{persona.pk}/change/">Mine</a>' in sidebar
    assert "Theirs" not in sidebar
    fresh = signed_in(make_owner("new")).get("/admin/").content.decode()
    assert "Nothing yet: each change you make is recorded" in fresh
