"""An owner's identity pages in a real browser (Chromium, driven by Playwright, at 1280 px).

The owner claims an organization domain the way a person does and reads how to prove it, then
opens their identity: what a card names is chosen from proven domains only, and the OIDC
issuer and subject are shown, never offered for typing.
"""

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser_support import Browsers, browsers_fixture  # noqa: F401 (fixture)
from tests.factories import make_owner
from tests.owner_clients import PASSWORD, fresh_rate_limits  # noqa: F401 (autouse fixture)

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def owners() -> dict[str, Any]:
    return {
        "ada": make_owner("ada", organization="engines.example.org"),
        "mallory": make_owner("mallory", organization=""),
    }


def test_an_owner_claims_a_domain_and_chooses_only_among_proven_ones(
    owners: dict[str, Any], browsers: Browsers
) -> None:
    """VX-ID-2, VX-ID-1, VX-ID-4: Mallory claims a domain and is shown its TXT record and
    well-known file with her own token; her identity page offers no domain to name (hers is
    unproven, Ada's is Ada's) and shows the issuer and subject read-only. Every page fits 1280
    px and stays clean."""
    page = browsers.page_for("mallory")
    with browsers.screenshots_on_failure("identity-pages"):
        page.goto("/admin/login/?next=/admin/")
        page.fill("#id_username", "mallory")
        page.fill("#id_password", PASSWORD)
        page.click("input[type=submit]")
        expect(page.locator("#user-tools")).to_contain_text("mallory")

        page.goto("/admin/personas/organizationdomain/add/")
        page.fill("#id_domain", "Mallory.Example")
        page.click("input[name=_save]")
        expect(page.locator(".field-how_to_prove")).to_contain_text(
            "_virgo-challenge.mallory.example"
        )
        expect(page.locator(".field-how_to_prove")).to_contain_text(
            "https://mallory.example/.well-known/virgo-domain-verification.txt"
        )
        browsers.screenshot("mallory", "organization-domain-claimed")
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280

        page.goto("/admin/personas/owneridentity/")
        page.click("#result_list a:text-is('Mallory')")
        page.wait_for_url("**/owneridentity/*/change/")
        offered = page.locator("#id_organization_domain option").all_inner_texts()
        assert offered == ["None: cards name this installation"]
        expect(page.locator(".field-identity_subject .readonly")).to_contain_text("sub-mallory")
        expect(page.locator("#id_identity_subject")).to_have_count(0)
        browsers.screenshot("mallory", "owner-identity")
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        browsers.assert_all_clean()
