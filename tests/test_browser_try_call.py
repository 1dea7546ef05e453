"""An owner tries a call and reads the audit trail, in Chromium at 1280x800 (issue 26).

Walks, as tests/test_browser_walk.py does, the pages of issue 26: "Try a call" from the persona's
page (the form, a call filled in and explained: its verdict, rule, who is asked and each
consumer's view; then bad arguments, answered on the field), the diff page of a pending proposal
with the policy vectors it would change, and the audit trail. No page may scroll sideways; each
has the admin's breadcrumbs; a screenshot of each is saved beside the walk's
(tmp/artifacts/walk-*.png, or VIRGO_ARTIFACTS_DIR) for a person to look at.
"""

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from personas import services
from personas.models import GrantProposal
from tests.browser_support import (
    HEIGHT,
    WIDTH,
    Browsers,
    admin_page,
    browsers_fixture,  # noqa: F401 (fixture)
    sign_in,
)
from tests.factories import make_owner, make_persona, run_on_commit
from tests.owner_clients import fresh_rate_limits  # noqa: F401 (autouse fixture)
from tests.runtime_support import standing_persona

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def tryer() -> dict[str, Any]:
    """Ada's reviewer, asking first before it lists its peers, a proposal to stop asking, and
    a retired persona whose revocation the audit trail holds."""
    ada = make_owner("ada")
    persona = standing_persona(ada, ask_first_verbs=["list_peers"])
    retired = make_persona(persona.agent, name="Retired reviewer")
    with run_on_commit():
        services.persona_revoke(
            persona=retired,
            actor=ada,
            reason_code="superseded",
            reason="replaced by the reviewer",
            via="test",
        )
        change = services.persona_submit(
            persona=persona,
            actor=ada,
            via=GrantProposal.Via.API,
            ask_first_verbs=[],
            verb_subset=[*persona.verb_subset, "list_todos"],
        )
    assert change.proposal is not None
    return {"persona": persona.pk, "name": persona.name, "proposal": change.proposal.pk}


def no_sideways_scroll(page: Page) -> None:
    widths = page.evaluate(
        "() => ({page: document.documentElement.scrollWidth,"
        " body: document.body.scrollWidth, view: window.innerWidth})"
    )
    assert widths["page"] <= WIDTH and widths["body"] <= WIDTH, widths
    assert widths["view"] == WIDTH, widths


def test_an_owner_tries_a_call_and_reads_the_trail_at_1280_px(
    tryer: dict[str, Any], browsers: Browsers
) -> None:
    """VX-EXPLAIN-1, VX-EXPLAIN-2, VX-AUDIT-2, issue 26: "Try a call" filled, submitted and
    answered; bad arguments named on their field; the diff page's vectors; the audit trail;
    every page in the admin's frame without sideways scroll, each screenshot kept."""
    ada = browsers.page_for("ada", width=WIDTH, height=HEIGHT)

    def shot(name: str) -> None:
        browsers.screenshot("ada", f"walk-{name}")

    with browsers.screenshots_on_failure("walk-try"):
        sign_in(ada, "ada")
        ada.goto(f"/admin/personas/persona/{tryer['persona']}/change/")
        ada.click("#try-call-link")
        admin_page(ada, form=True)
        expect(ada.locator("ol.breadcrumbs")).to_contain_text(tryer["name"])
        expect(ada.locator("#try-call-form select[name=tool]")).to_be_visible()
        no_sideways_scroll(ada)
        shot("try-call")

        ada.select_option("select[name=tool]", "workspace_write")
        ada.fill(
            "textarea[name=arguments]",
            '{"path": "memory/a-rather-long-file-name-for-an-old-note.md", "mode": "delete"}',
        )
        ada.click("#try-call-submit")
        expect(ada.locator("#try-verdict")).to_contain_text("confirm")
        expect(ada.locator("#try-rule")).to_contain_text("workspace-delete")
        expect(ada.locator("#try-rule")).to_contain_text("destructive-or-irreversible")
        expect(ada.locator("#try-asks")).to_contain_text("virgo-channel")
        expect(ada.locator("#try-consumers")).to_contain_text("has workspace_write")
        expect(ada.locator("#try-operation")).to_contain_text("workspace.write")
        admin_page(ada, form=True)
        no_sideways_scroll(ada)
        shot("try-call-answer")

        ada.select_option("select[name=tool]", "list_peers")
        ada.fill("textarea[name=arguments]", '["not", "an", "object"]')
        ada.click("#try-call-submit")
        expect(ada.locator(".field-arguments .errorlist")).to_contain_text(
            "Arguments must be a JSON object"
        )
        expect(ada.locator("#try-call-answer")).to_have_count(0)
        no_sideways_scroll(ada)
        shot("try-call-error")

        ada.goto(f"/admin/personas/grantproposal/{tryer['proposal']}/change/")
        admin_page(ada, form=True)
        expect(ada.locator("#vectors-changed")).to_contain_text("list_peers")
        expect(ada.locator("#vectors-changed")).to_contain_text("allow (default-allow)")
        no_sideways_scroll(ada)
        shot("diff-vectors")

        ada.goto("/admin/personas/auditevent/")
        admin_page(ada, form=False)
        expect(ada.locator("#result_list")).to_contain_text("ada")
        no_sideways_scroll(ada)
        shot("try-audit-trail")

        browsers.assert_all_clean()
