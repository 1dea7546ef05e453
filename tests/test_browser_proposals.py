"""The diff page in a real browser: an owner's own admin edit that widens a grant is saved,
reviewed, then confirmed (Chromium, driven by Playwright, against a live server)."""

import re
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser_support import (
    Browsers,
    browsers_fixture,  # noqa: F401 (fixture)
    sign_in,
    tick,
    ticked,
)
from tests.factories import make_agent, make_owner, make_persona
from tests.owner_clients import fresh_rate_limits  # noqa: F401 (autouse fixture)
from tests.runtime_support import standing_persona

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

# With claim, already granted, these two make the work-todos skill.
ADDED = ["complete", "list_todos"]


@pytest.fixture
def ada_persona() -> dict[str, Any]:
    """Ada's standing, listed persona without those verbs; Mallory, another owner, beside her."""
    persona = standing_persona(make_owner("ada"), extra=("claim",), discoverable=True)
    make_persona(make_agent(make_owner("mallory")), name="Mallory Persona")
    generation = persona.generations.get(number=persona.generation)
    return {
        "id": persona.pk,
        "name": persona.name,
        "card_path": persona.card_path,
        "generation": persona.generation,
        "stamp_hash": generation.stamp_hash,
    }


def test_the_owner_widens_a_verb_subset_only_after_reviewing_its_diff(
    ada_persona: dict[str, Any], browsers: Browsers, live_server: Any
) -> None:
    """VX-REV-1, VX-REV-3: in Chromium, Ada ticks two verbs on her persona's page and saves; nothing
    changes yet: she lands on the diff page, which shows the tool added, the skill that would
    appear on the card and the current and next stamp hashes, while the card is still the old
    one. She confirms: generation 2 is built with exactly the next stamp shown, and the card
    follows. Mallory, another owner, gets a 404 for the proposal. No page violates its CSP,
    logs an error or loads anything from outside the site."""
    ada = browsers.page_for("ada")
    mallory = browsers.page_for("mallory")
    persona_page = f"/admin/personas/persona/{ada_persona['id']}/change/"
    card_url = live_server.url + ada_persona["card_path"]
    with browsers.screenshots_on_failure("grant-review-in-a-browser"):
        card_before = httpx.get(card_url)
        assert card_before.status_code == 200
        sign_in(ada, "ada")
        ada.goto(persona_page)
        assert not set(ADDED) & set(ticked(ada, "verb_subset"))
        tick(ada, "verb_subset", ADDED)
        ada.click("input[name=_continue]")

        # Saved, not applied: the diff page of the proposal.
        expect(ada).to_have_url(re.compile(r"/admin/personas/grantproposal/\d+/change/$"))
        review_path = ada.url.removeprefix(live_server.url)
        proposal_id = review_path.split("/")[-3]
        expect(ada.locator(".messagelist .warning")).to_contain_text("Nothing is changed yet")
        expect(ada.locator("#proposal-status")).to_contain_text("Waiting for the owner")
        expect(ada.locator("#proposal-status")).to_contain_text("through Admin")
        expect(ada.locator("#diff-widening")).to_contain_text(
            f"adds {len(ADDED)} tools: {', '.join(ADDED)}"
        )
        expect(ada.locator("#diff-tools-added")).to_have_text(", ".join(ADDED))
        expect(ada.locator("#diff-tools-removed")).to_have_count(0)
        expect(ada.locator("#diff-skills-added")).to_have_text("work-todos")
        expect(ada.locator("#current-stamp-hash")).to_have_text(ada_persona["stamp_hash"])
        next_hash = ada.locator("#next-stamp-hash").inner_text()
        assert re.fullmatch(r"[0-9a-f]{64}", next_hash) and next_hash != ada_persona["stamp_hash"]
        browsers.screenshot("ada", "grant-diff-page")
        card_unchanged = httpx.get(card_url)
        assert card_unchanged.headers["ETag"] == card_before.headers["ETag"]
        assert card_unchanged.content == card_before.content

        # Another owner: the proposal is a 404 to them, to read or to decide.
        sign_in(mallory, "mallory")
        assert mallory.request.get(review_path).status == 404
        assert mallory.request.get(f"/api/proposals/{proposal_id}/").status == 404

        # Confirmed on the diff page: the change is made, with the stamp it showed.
        ada.click("#confirm-proposal")
        expect(ada).to_have_url(live_server.url + persona_page)
        expect(ada.locator(".messagelist .success")).to_contain_text("Confirmed")
        assert set(ADDED) <= set(ticked(ada, "verb_subset"))
        expect(ada.locator(".field-generation .readonly")).to_have_text("2")
        stamp = ada.locator("#generations-group tr.has_original").first.locator(
            "td.field-stamp_link"
        )
        expect(stamp).to_have_text(next_hash[:16])
        card_after = httpx.get(card_url)
        assert card_after.headers["ETag"] != card_before.headers["ETag"]
        assert "work-todos" in {skill["id"] for skill in card_after.json()["skills"]}

        # Decided once: the page now says so and offers no second decision.
        ada.goto(review_path)
        expect(ada.locator("#proposal-status")).to_contain_text("Approved")
        expect(ada.locator("#proposal-status")).to_contain_text("Decided by ada")
        expect(ada.locator("#confirm-proposal")).to_have_count(0)
        browsers.assert_all_clean()
