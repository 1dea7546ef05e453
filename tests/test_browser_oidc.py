"""Signing in with OpenID Connect in a real browser: Chromium, driven by Playwright, from the
admin's login page through a real provider on loopback (tests/oidc_support.py) and back."""

from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Route, expect

from personas import oidc
from tests.browser_support import Browsers, browsers_fixture  # noqa: F401 (fixture)
from tests.oidc_support import Provider, issuer_setting
from tests.owner_clients import fresh_rate_limits  # noqa: F401 (autouse fixture)

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

LOOPBACK = {"localhost", "127.0.0.1"}


@pytest.fixture
def configured(settings: Any, live_server: Any, oidc_provider: Provider) -> Provider:
    """Virgo at the live server, registered with the provider as "Mock ID"."""
    registered = oidc_provider.register(f"{live_server.url}/admin/oidc/mock/callback/")
    settings.VIRGO_OIDC_ISSUERS = {"mock": issuer_setting(oidc_provider, registered)}
    oidc_provider.set_claims("grace-sub", name="Grace Hopper", email="grace@example.org")
    return oidc_provider


def stay_on_this_machine(route: Route) -> None:
    """The provider's page asks a CDN for its stylesheet: nothing leaves loopback."""
    if urlsplit(route.request.url).hostname in LOOPBACK:
        route.continue_()
    else:
        route.abort()


def test_an_owner_signs_in_to_the_admin_through_the_provider(
    configured: Provider, browsers: Browsers
) -> None:
    """VX-ID-1: on the admin's login page the owner chooses "Sign in with Mock ID", authorizes
    as their subject at the provider, and lands in the admin signed in to a new owner account;
    the session works for the API, and their OpenID Connect page names the issuer and subject
    the verified ID token proved. Virgo's pages stay clean (no CSP violation, console error or
    foreign request of their own)."""
    page = browsers.page_for("grace")
    page.context.route("**/*", stay_on_this_machine)
    with browsers.screenshots_on_failure("oidc-sign-in"):
        page.goto("/admin/login/?next=/admin/")
        button = page.get_by_role("link", name="Sign in with Mock ID")
        expect(button).to_be_visible()
        browsers.screenshot("grace", "oidc-login-page")
        button.click()

        page.wait_for_url(f"{configured.issuer}/oauth2/authorize?*")
        page.get_by_label("Subject").fill("grace-sub")
        page.get_by_role("button", name="Authorize", exact=True).click()

        page.wait_for_url("**/admin/")
        expect(page.locator("#user-tools")).to_contain_text("127.0.0.1-")
        expect(page.locator("#user-tools")).to_contain_text("OpenID Connect")
        expect(page.locator("#user-tools")).not_to_contain_text("Change password")
        assert page.request.get("/api/agents/").status == 200

        page.get_by_role("link", name="OpenID Connect").click()
        expect(page.locator("#content-main")).to_contain_text(
            f"Your account is linked to {configured.issuer}, subject grace-sub"
        )
        browsers.screenshot("grace", "oidc-signed-in")

        # An answer that cannot finish a sign-in (here: no code, no state) is a page saying so.
        page.goto("/admin/oidc/mock/callback/?error=access_denied&error_description=Declined")
        expect(page.locator(".errornote")).to_contain_text(
            "Mock ID ended the sign-in with an error: access_denied (Declined)"
        )
        browsers.screenshot("grace", "oidc-refused")

    watch = browsers.watches["grace"]
    # The refused page's 400 is the page's own answer, not an error of its making.
    watch.console = [line for line in watch.console if "status of 400" not in line]
    ours = browsers.base_url
    assert not watch.csp_violations, watch.csp_violations
    assert not watch.page_errors, watch.page_errors
    assert not [line for line in watch.console if ours in line], watch.console
    elsewhere = {f"{urlsplit(url).scheme}://{urlsplit(url).netloc}" for url in watch.requests}
    assert elsewhere <= {ours, configured.issuer, "https://cdn.jsdelivr.net"}, elsewhere
    assert oidc.issuer_named("mock").label == "Mock ID"
