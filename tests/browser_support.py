"""A real Chromium, driven by Playwright, for the tests that use the admin the way people do.

The browser is Debian's `chromium` at /usr/bin/chromium (`make test` installs it when missing);
Playwright is only the driver and never downloads a browser of its own. Without the browser a
test skips, saying so, except under `make test` (VIRGO_REQUIRE_SERVICES=1), where it fails.

Every page is watched from its first byte: console messages, uncaught errors, Content Security
Policy violations (a listener installed before any of the page's own scripts runs, reporting
through a binding that survives navigation), every request it makes and every 5xx answer, so a
test can assert the page stayed clean, loaded nothing from outside the site and met no server
error. `misreadings` says what on a page a reviewer could not read: horizontal scroll at the
walk's width, a "None" or a uuid where a name belongs.

Playwright's sync API runs an event loop in the test's thread, where Django's ORM refuses to
work: a test builds its rows in fixtures requested before `browsers`, and checks through the
pages and HTTP once the browser runs (the live server's thread has no loop and is unaffected).
"""

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.contrib.contenttypes.models import ContentType
from playwright.sync_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Page,
    Request,
    Response,
    expect,
    sync_playwright,
)

from tests.live import REPO, unavailable
from tests.owner_clients import PASSWORD

CHROMIUM = Path("/usr/bin/chromium")
# The background-networking flags keep Chromium from calling home: this machine's closed
# network refuses those connections, and a test must depend only on the server it drives.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
ARTIFACTS = Path(os.environ.get("VIRGO_ARTIFACTS_DIR") or REPO / "tmp" / "artifacts")
# Generous bounds on how long a broken page hangs the run; not performance assertions.
TIMEOUT_MS = 20_000

# Runs in every document before its own scripts. Playwright injects it over the DevTools
# protocol, so the page's own CSP does not apply to it.
_REPORT_CSP_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", (event) => {
  window.virgoCspViolation({
    page: document.location.href,
    directive: event.violatedDirective,
    blocked: event.blockedURI,
    source: event.sourceFile,
    line: event.lineNumber,
    sample: event.sample,
  });
});
"""


@dataclass
class PageWatch:
    """What one signed-in person's pages did that a clean admin never does."""

    origin: str
    console: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    csp_violations: list[dict[str, Any]] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    server_errors: list[str] = field(default_factory=list)

    def watch(self, context: BrowserContext) -> None:
        context.expose_binding("virgoCspViolation", self._csp_violation)
        context.add_init_script(_REPORT_CSP_VIOLATIONS)
        context.on("page", self._watch_page)

    def _watch_page(self, page: Page) -> None:
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.page_errors.append(str(error)))
        page.on("request", self._request)
        page.on("response", self._response)

    def _csp_violation(self, source: Any, violation: dict[str, Any]) -> None:
        self.csp_violations.append(violation)

    def _console(self, message: ConsoleMessage) -> None:
        # Chromium reports CSP refusals, failed loads and script errors at these levels.
        if message.type not in {"error", "warning"}:
            return
        # The admin's pages name their icon; on anything else (a JSON answer, a card) the
        # browser asks for /favicon.ico on its own, which the site does not serve: only that
        # request's 404 is not the page's doing.
        if message.location.get("url") == f"{self.origin}/favicon.ico":
            return
        self.console.append(f"{message.type}: {message.text} ({message.location})")

    def _request(self, request: Request) -> None:
        self.requests.append(request.url)

    def _response(self, response: Response) -> None:
        if response.status >= 500:
            self.server_errors.append(f"{response.status} {response.request.method} {response.url}")

    def foreign_requests(self) -> list[str]:
        """Every request not to the live server itself (scheme, host and port)."""
        return [url for url in self.requests if _origin(url) != self.origin]

    def assert_clean(self) -> None:
        """S9-HDR-1: the pages ran under their CSP without a single violation, logged no
        error or warning, threw nothing, loaded nothing from outside the site, and the server
        answered none of their requests with a 5xx."""
        assert self.requests, "no request was watched: the watch is not attached"
        # A plain module: pytest does not rewrite these asserts, so each says what it found.
        assert not self.csp_violations, f"CSP violations: {self.csp_violations}"
        assert not self.console, f"console errors and warnings: {self.console}"
        assert not self.page_errors, f"uncaught errors: {self.page_errors}"
        assert not self.server_errors, f"server errors: {self.server_errors}"
        foreign = self.foreign_requests()
        assert not foreign, f"requests outside {self.origin}: {foreign}"


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


class Browsers:
    """One Chromium; each person gets a browser context of their own (own cookies, own watch)."""

    def __init__(self, browser: Browser, base_url: str) -> None:
        self.browser = browser
        self.base_url = base_url.rstrip("/")
        self.watches: dict[str, PageWatch] = {}
        self.pages: dict[str, Page] = {}

    def page_for(self, person: str, *, width: int = 1280, height: int = 720) -> Page:
        context = self.browser.new_context(
            base_url=self.base_url, viewport={"width": width, "height": height}
        )
        context.set_default_timeout(TIMEOUT_MS)
        watch = PageWatch(origin=_origin(self.base_url))
        watch.watch(context)
        page = context.new_page()
        self.watches[person] = watch
        self.pages[person] = page
        return page

    def assert_all_clean(self) -> None:
        for person, watch in self.watches.items():
            try:
                watch.assert_clean()
            except AssertionError as exc:
                raise AssertionError(f"{person}'s pages: {exc}") from exc

    def screenshot(self, person: str, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{_safe(name)}.png"
        self.pages[person].screenshot(path=path, full_page=True)
        return path

    @contextmanager
    def screenshots_on_failure(self, test_name: str) -> Iterator[None]:
        """When the block fails, every person's page as it was is saved, then the failure goes
        on as it was (a screenshot that cannot be taken never hides the real failure)."""
        try:
            yield
        except BaseException:
            for person, page in self.pages.items():
                if page.is_closed() or page.url == "about:blank":
                    continue
                try:
                    self.screenshot(person, f"{test_name}-{person}-failed")
                except Exception as exc:
                    print(f"no screenshot of {person}'s page: {exc}")
            print(f"screenshots of the failure are in {ARTIFACTS}")
            raise


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name)


@pytest.fixture(name="browsers")
def browsers_fixture(live_server: Any) -> Iterator[Browsers]:
    """Chromium against the live server; every context and the browser closed afterwards."""
    if not os.access(CHROMIUM, os.X_OK):
        unavailable(f"needs Debian's Chromium at {CHROMIUM} (apt-get install chromium)")
    # The admin logs each change under its model's content type, read from a per-process cache
    # that a test before this one in the process may have filled with a row its rollback
    # removed: read them afresh, as the live server's requests must.
    ContentType.objects.clear_cache()
    # The web-first assertions wait as long as every other browser action may.
    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield Browsers(browser, live_server.url)
        finally:
            browser.close()


def sign_in(page: Page, username: str, password: str = PASSWORD) -> None:
    page.goto("/admin/login/?next=/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    expect(page.locator("#user-tools")).to_contain_text(username)


def tick(page: Page, field: str, values: list[str]) -> None:
    for value in values:
        page.check(f'input[type=checkbox][name="{field}"][value="{value}"]')


def ticked(page: Page, field: str) -> list[str]:
    return page.locator(f'input[type=checkbox][name="{field}"]:checked').evaluate_all(
        "boxes => boxes.map(box => box.value)"
    )


# The screen of the owner's walk (issue 24): every page must fit it.
WIDTH, HEIGHT = 1280, 800


# Every visible text of the page, read as a reviewer reads it. A uuid is in place in a URL or a
# path (a card's address), in code, and in the field that shows the uuid itself; anywhere else it
# stands where a name belongs. "None" as a value (a text of its own, or after a colon, an equals
# sign or a bracket) is Python's None printed; a sentence may still begin "None: ...".
_MISREADINGS = r"""
() => {
  const uuid = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i;
  const found = [];
  const scrollWidth = document.documentElement.scrollWidth;
  if (scrollWidth > window.innerWidth) {
    found.push(`scrolls sideways: ${scrollWidth} px wide in ${window.innerWidth} px`);
  }
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const element = node.parentElement;
    if (!element || !element.checkVisibility()) continue;
    const text = node.textContent.trim();
    const place = `${element.closest("[id]")?.id ?? "body"} > ${element.tagName.toLowerCase()}`;
    if (/(^|[:=(,]\s*)None\s*([),.;]|$)/.test(text)) found.push(`"None" in ${place}: ${text}`);
    if (element.closest("code, pre, .field-uuid")) continue;
    if (text.split(/\s+/).some(word => uuid.test(word) && !word.includes("/"))) {
      found.push(`a uuid in ${place}: ${text}`);
    }
  }
  return found;
}
"""


def misreadings(page: Page) -> list[str]:
    """What on the page a reviewer cannot read at its width: horizontal scroll, and each visible
    "None" or uuid where a name belongs, with where it is."""
    return page.evaluate(_MISREADINGS)


def admin_page(page: Page, *, form: bool) -> None:
    """The admin's own frame: its breadcrumbs, and on a form page its submit row."""
    expect(page.locator("ol.breadcrumbs")).to_be_visible()
    if form:
        expect(page.locator(".submit-row").first).to_be_visible()
