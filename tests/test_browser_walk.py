"""The owner's walk through Virgo's pages in Chromium at 1280x800 (issue 24).

An owner with a few personas (one listed, one whose grant waits on its diff page, one revoked,
long names among them) signs in and opens each page an owner meets: the landing page, the
index, the persona list, a persona's form, "from an agent card", the diff page, the revoke page,
the audit trail, the clients and connections of remote access, the consent page a client's
authorization request opens, and the directory. The list must fit the screen with every column
showing; every Virgo page must have the admin's breadcrumbs, and each form page its submit row. A
screenshot of every page is saved under the test artifacts folder (VIRGO_ARTIFACTS_DIR, else
tmp/artifacts/walk-*.png) for a person to look at; no page may violate its CSP, log an error or
load anything from elsewhere.
"""

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from personas import services
from personas.models import GrantProposal
from serving.resources import resource_url
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
from tests.remote_support import authorize_query, granted, pkce, public_client
from tests.runtime_support import standing_persona

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def walker() -> dict[str, Any]:
    """Ada's personas as an owner has them after a while: listed, waiting, revoked."""
    ada = make_owner("ada")
    listed = standing_persona(ada, extra=("claim",), discoverable=True)
    agent = listed.agent
    long_name = "Release coordinator for the platform-infrastructure team"
    make_persona(agent, name=long_name)
    revoked = make_persona(agent, name="Retired reviewer")
    with run_on_commit():
        services.persona_revoke(
            persona=revoked,
            actor=ada,
            reason_code="superseded",
            reason="replaced by the release coordinator",
            via="test",
        )
        change = services.persona_submit(
            persona=listed,
            actor=ada,
            via=GrantProposal.Via.API,
            verb_subset=[*listed.verb_subset, "complete", "list_todos"],
        )
    assert change.proposal is not None
    revoked_event = revoked.audit_events.get(kind="revoked").pk
    # A client of Ada's host holds a connection to the listed persona; another asks for one.
    granted(listed)
    asking = public_client(ada, name="Laptop agent host")
    return {
        "authorize": authorize_query(asking, pkce()[1], [resource_url(listed.uuid)]),
        "listed": listed.pk,
        "listed_name": listed.name,
        "proposal": change.proposal.pk,
        "revoked_event": revoked_event,
    }


def fits_the_screen(page: Page) -> None:
    """No horizontal scroll, of the page or of the list's own box, and every column's header
    wholly on screen."""
    widths = page.evaluate(
        """() => {
            const results = document.querySelector("#changelist .results");
            return {
                page: document.documentElement.scrollWidth,
                results: results.scrollWidth,
                box: results.clientWidth,
                headers: [...document.querySelectorAll("#result_list thead th")].map(
                    th => [th.className, th.getBoundingClientRect().right]),
            };
        }"""
    )
    assert widths["page"] <= WIDTH, widths
    assert widths["results"] <= widths["box"], widths
    off_screen = [name for name, right in widths["headers"] if right > WIDTH]
    assert not off_screen, f"columns off screen: {off_screen}"


def test_an_owner_walks_every_page_at_1280_px(walker: dict[str, Any], browsers: Browsers) -> None:
    """VX-TRUST-5, VX-DIR-1, S9-HDR-1, issue 24: every page an owner meets, at 1280x800, in the
    admin's frame, the list without horizontal scroll, each page's screenshot kept."""
    ada = browsers.page_for("ada", width=WIDTH, height=HEIGHT)

    def shot(name: str) -> None:
        browsers.screenshot("ada", f"walk-{name}")

    with browsers.screenshots_on_failure("walk"):
        ada.goto("/")
        expect(ada.locator("#landing-admin")).to_be_visible()
        shot("landing")

        sign_in(ada, "ada")
        expect(ada.locator(".app-personas caption")).to_contain_text("Personas")
        first_app = ada.locator("#content-main .module caption").first
        expect(first_app).to_contain_text("Personas")
        shot("index")

        ada.goto("/admin/personas/persona/")
        expect(ada.locator("#result_list tbody tr")).to_have_count(3)
        expect(ada.locator("#result_list")).to_contain_text("revoked: superseded")
        fits_the_screen(ada)
        shot("list")

        ada.goto(f"/admin/personas/persona/{walker['listed']}/change/")
        admin_page(ada, form=True)
        expect(ada.locator("table.verb-grid").first).to_be_visible()
        expect(ada.locator("#audit_events-heading")).to_be_visible()
        shot("form")

        ada.goto("/admin/personas/persona/")
        ada.click("#from-card-link")
        admin_page(ada, form=True)
        expect(ada.locator("#card-import-form")).to_be_visible()
        shot("from-card")

        ada.goto(f"/admin/personas/grantproposal/{walker['proposal']}/change/")
        admin_page(ada, form=True)
        expect(ada.locator("#diff-tools-added")).to_contain_text("complete")
        shot("diff")

        ada.goto("/admin/personas/persona/")
        row = ada.locator("#result_list tbody tr", has_text=walker["listed_name"])
        row.locator("input.action-select").check()
        ada.select_option("select[name=action]", "revoke")
        ada.click("button[name=index], input[name=index], .actions button[type=submit]")
        admin_page(ada, form=True)
        expect(ada.locator("#revoke-submit")).to_be_visible()
        shot("revoke")

        ada.goto("/admin/personas/auditevent/")
        admin_page(ada, form=False)
        expect(ada.locator("#result_list")).to_contain_text("ada")
        fits_the_screen(ada)  # VX-AUDIT-2
        expect(ada.locator("#date-hierarchy-label")).to_be_visible()
        shot("audit-trail")

        ada.goto(f"/admin/personas/auditevent/{walker['revoked_event']}/change/")
        admin_page(ada, form=False)
        expect(ada.locator("dl.audit-details")).to_contain_text("replaced by the release")
        assert ada.evaluate("document.documentElement.scrollWidth") <= WIDTH
        shot("audit-event")

        ada.goto("/admin/serving/connection/")
        admin_page(ada, form=False)
        expect(ada.locator("#result_list")).to_contain_text(walker["listed_name"])
        fits_the_screen(ada)
        shot("connections")

        ada.goto("/admin/serving/connection/add/")
        admin_page(ada, form=True)
        ada.select_option("#id_host_client", label="Laptop agent host")
        ada.select_option("#id_target_persona", label=walker["listed_name"])
        ada.click(".submit-row input[name=_save]")
        expect(ada.locator("#connection-command")).to_contain_text("--refresh-token-file")
        expect(ada.locator("ol.breadcrumbs")).to_be_visible()
        assert ada.evaluate("document.documentElement.scrollWidth") <= WIDTH
        shot("connection-opened")

        ada.goto("/admin/serving/client/")
        admin_page(ada, form=False)
        expect(ada.locator("#result_list")).to_contain_text("Laptop agent host")
        fits_the_screen(ada)
        shot("clients")

        ada.goto("/admin/serving/client/add/")
        admin_page(ada, form=True)
        shot("client-add")

        ada.goto(walker["authorize"])
        admin_page(ada, form=True)
        expect(ada.locator("#authorizationForm")).to_contain_text(walker["listed_name"])
        assert ada.evaluate("document.documentElement.scrollWidth") <= WIDTH
        shot("consent")

        ada.goto("/api/directory/")
        admin_page(ada, form=False)
        expect(ada.locator("#result_list")).to_contain_text(walker["listed_name"])
        shot("directory")

        browsers.assert_all_clean()
