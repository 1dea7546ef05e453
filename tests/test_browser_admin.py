"""The admin in a real browser: Chromium, driven by Playwright, against a live server.

One owner builds an agent and a persona the way a person does, with the admin's own forms, and
lists it; another owner signs in beside them and finds none of it. Every page either of them
opens is watched: no CSP violation, no console error, nothing loaded from another origin.
"""

import re
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from personas import services
from personas.models import PersonaClass
from tests.browser_support import (
    Browsers,
    browsers_fixture,  # noqa: F401 (fixture)
    sign_in,
    tick,
    ticked,
)
from tests.factories import (
    REVIEWER_VERBS,
    make_agent,
    make_owner,
    make_persona,
    standing_verbs,
)
from tests.owner_clients import PASSWORD, fresh_rate_limits  # noqa: F401 (autouse fixture)

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

# A project lead may assign work (create_for, in the tasks: assign bundle); a coder deputy may not.
PERSONA_CLASS = PersonaClass.PROJECT_LEAD
ADDRESS = "work/core/lead"
PERSONA_VERBS = standing_verbs(PERSONA_CLASS, *REVIEWER_VERBS)
AGENT_VERBS = [*PERSONA_VERBS, "create_for"]


def derived_skills(page: Page) -> str:
    return page.locator(".field-derived_skills .readonly").inner_text()


def directory(page: Page) -> dict[str, Any]:
    """The directory's entries by name, as the page's signed-in owner reads it (the browser's
    own session)."""
    response = page.request.get("/api/directory/")
    assert response.status == 200, response.text()
    return {entry["name"]: entry for entry in response.json()["results"]}


def object_id(page: Page) -> str:
    found = re.search(r"/admin/personas/persona/(\d+)/change/", page.url)
    assert found, f"not on a persona's page: {page.url}"
    return found[1]


@pytest.fixture
def accounts() -> None:
    """Two owners, and the address their personas may take (a moderator registers it)."""
    moderator = make_owner("moderator")
    moderator.is_superuser = True
    moderator.save()
    services.address_register(actor=moderator, path=ADDRESS)
    make_owner("ada")
    make_persona(make_agent(make_owner("mallory"), name="mallory-bot"), name="Mallory Persona")


def test_an_owner_builds_and_lists_a_persona_that_another_owner_never_sees(
    accounts: None, browsers: Browsers, live_server: Any
) -> None:
    """S9-AUTH-2, S9-SKL-1, S9-SCN-4, S9-DISC-1, S9-HDR-1: in Chromium, an owner signs in,
    creates an agent (its grant ticked from the verb catalogue) and a persona of it (the
    two-step add, whose grant waits on its diff page until she confirms it: VX-REV-1), adds
    create_for and sees delegate-work derived and generation 3 on the persona's page, then
    lists it with the changelist's toggle: it is in the directory and its card is served.
    Another owner, signed in beside them, sees neither agent nor persona and
    is turned away from their pages. No page violates its CSP, logs an error or loads anything
    from outside the site."""
    ada = browsers.page_for("ada")
    mallory = browsers.page_for("mallory")
    with browsers.screenshots_on_failure("admin-in-a-browser"):
        sign_in(ada, "ada")

        # The agent: its vended grant is ticked from the catalogue, its queues typed.
        ada.goto("/admin/personas/agent/add/")
        ada.fill("#id_name", "ada-bot")
        ada.fill("#id_self_description", "Ada's review runtime.")
        tick(ada, "granted_verbs", AGENT_VERBS)
        ada.fill("#id_granted_queues", "reviews\ndeploys")
        ada.click("input[name=_save]")
        expect(ada.locator(".messagelist .success")).to_contain_text("ada-bot")
        expect(ada.locator("#result_list")).to_contain_text("ada-bot")

        # The persona, step one: which agent. Step two: only that agent's grant is offered.
        ada.goto("/admin/personas/persona/add/")
        ada.select_option("#id_agent", label="ada-bot")
        ada.click("input[type=submit][value=Continue]")
        offered = ada.locator('input[type=checkbox][name="verb_subset"]')
        expect(offered).to_have_count(len(AGENT_VERBS))
        assert sorted(offered.evaluate_all("boxes => boxes.map(box => box.value)")) == sorted(
            AGENT_VERBS
        )
        ada.fill("#id_name", "Ada Reviewer")
        ada.fill("#id_description", "Reviews pull requests for the core project.")
        ada.fill("#id_system_prompt", "You review pull requests. Be precise and kind.")
        ada.select_option("#id_persona_class", PERSONA_CLASS.value)
        tick(ada, "verb_subset", PERSONA_VERBS)
        tick(ada, "queues", ["reviews"])
        ada.select_option("#id_address", label=ADDRESS)
        ada.click("input[name=_continue]")
        # Even the owner's own form grants nothing yet (VX-REV-1): the persona is made, and
        # what it may do waits on its diff page until Ada confirms it.
        expect(ada.locator(".messagelist .warning")).to_contain_text("granting nothing yet")
        for tool in REVIEWER_VERBS:
            expect(ada.locator("#diff-tools-added")).to_contain_text(tool)
        ada.click("#confirm-proposal")
        expect(ada.locator(".messagelist .success")).to_contain_text("Confirmed")
        persona_id = object_id(ada)
        agent_path = ada.locator(".field-agent a").get_attribute("href")
        assert agent_path and agent_path.startswith("/admin/personas/agent/")
        assert sorted(ticked(ada, "verb_subset")) == sorted(PERSONA_VERBS)
        assert "Work through todos" in derived_skills(ada)
        assert "delegate-work" not in derived_skills(ada)
        expect(ada.locator(".field-generation .readonly")).to_have_text("2")

        # The verb subset grows by create_for: that widens the grant, so it waits on its diff
        # page until Ada confirms; then the skills and a new generation follow.
        tick(ada, "verb_subset", ["create_for"])
        ada.click("input[name=_continue]")
        expect(ada.locator("#diff-tools-added")).to_have_text("create_for")
        ada.click("#confirm-proposal")
        expect(ada.locator(".messagelist .success")).to_contain_text("Confirmed")
        assert "create_for" in ticked(ada, "verb_subset")
        assert "delegate-work" in derived_skills(ada)
        expect(ada.locator(".field-generation .readonly")).to_have_text("3")
        generations = ada.locator("#generations-group tr.has_original")
        expect(generations.locator("td.field-number")).to_have_text(["3", "2", "1"])
        expect(generations.first.locator("td.field-standing_state")).to_have_text("standing")
        expect(ada.locator(".field-standing .readonly img")).to_have_attribute("alt", "True")
        card_path = ada.locator(".field-card_link a").get_attribute("href")
        assert card_path and card_path.endswith("/.well-known/agent-card.json")
        browsers.screenshot("ada", "persona-page")

        # Until its owner lists it, the persona is in no directory and its card is not public.
        assert "Ada Reviewer" not in directory(ada)
        assert httpx.get(live_server.url + card_path).status_code == 404

        # Listing is the owner's explicit choice, made with the changelist's toggle.
        ada.goto("/admin/personas/persona/")
        row = ada.locator("#result_list tbody tr", has_text="Ada Reviewer")
        row.locator("button[name=discoverable][value=on]").click()
        expect(ada.locator(".messagelist .success")).to_contain_text("Listed 1: Ada Reviewer")
        expect(row.locator("button[name=discoverable][value=off]")).to_be_visible()

        # In the directory (read with Ada's session), and the card is served publicly.
        entry = directory(ada)["Ada Reviewer"]
        assert entry["card_url"].endswith(card_path)
        assert "delegate-work" in {skill["id"] for skill in entry["skills"]}
        card = httpx.get(live_server.url + card_path)
        assert card.status_code == 200
        assert card.headers["Content-Type"].startswith("application/json")
        assert card.json()["name"] == "Ada Reviewer"
        assert "delegate-work" in {skill["id"] for skill in card.json()["skills"]}

        # Another owner: nothing of Ada's in their lists, and her pages are closed to them.
        sign_in(mallory, "mallory")
        for changelist, own in (
            ("/admin/personas/persona/", "Mallory Persona"),
            ("/admin/personas/agent/", "mallory-bot"),
        ):
            mallory.goto(changelist)
            expect(mallory.locator("#result_list")).to_contain_text(own)
            expect(mallory.locator("#content")).not_to_contain_text("Ada Reviewer")
            expect(mallory.locator("#content")).not_to_contain_text("ada-bot")
        persona_path = f"/admin/personas/persona/{persona_id}/"
        for url in (persona_path + "change/", persona_path + "history/", agent_path):
            mallory.goto(url)
            assert mallory.url == live_server.url + "/admin/", url
            expect(mallory.locator(".messagelist .warning")).to_contain_text("doesn\u2019t exist")
            expect(mallory.locator("#content")).not_to_contain_text("Ada Reviewer")

        browsers.assert_all_clean()


def test_the_watch_catches_violations_errors_and_foreign_requests(
    browsers: Browsers, live_server: Any
) -> None:
    """S9-HDR-1: the clean-page assertion above can fail. A script the page did not ship, an
    image from elsewhere, and a request to another origin each leave their trace."""
    page = browsers.page_for("visitor")
    page.goto("/admin/login/")
    page.evaluate(
        """() => {
        window.violations = 0;
        document.addEventListener("securitypolicyviolation", () => window.violations++);
        const script = document.createElement("script");
        script.textContent = "window.injected = true";
        document.body.append(script);
        const image = document.createElement("img");
        image.src = "http://127.0.0.1:9/tracker.png";
        document.body.append(image);
    }"""
    )
    page.wait_for_function("() => window.violations >= 2")
    watch = browsers.watches["visitor"]

    with pytest.raises(AssertionError, match="CSP violations"):
        watch.assert_clean()
    assert page.evaluate("() => window.injected") is None
    assert {v["directive"] for v in watch.csp_violations} == {"script-src-elem", "img-src"}
    assert any("Content Security Policy" in line for line in watch.console)

    with page.expect_event("requestfailed", lambda request: request.url.endswith("/elsewhere")):
        page.evaluate("() => { window.location.href = 'http://127.0.0.1:9/elsewhere'; }")
    assert watch.foreign_requests() == [
        "http://127.0.0.1:9/tracker.png",
        "http://127.0.0.1:9/elsewhere",
    ]
