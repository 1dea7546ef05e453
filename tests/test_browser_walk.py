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

Beside it, README's first hour on `make run`'s demo (issue 43): the demo owner signs in with the
password load_demo printed, changes the Reviewer (a narrowing change, then a widening one through
its diff page), looks in the shell (the README's commands, run by bash in the checkout against the
same database, stamp files and server), then opens the Reviewer's card and the directory. Every
page is read at 1280 px: no horizontal scroll, no "None" or uuid where a name belongs, no 5xx.
Its screenshots, the shell's transcript among them, are saved beside the walk's (first-hour-*.png
in the artifacts folder), for a reviewer to read.
"""

import html
import io
import json
import os
import re
import subprocess
import textwrap
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.core.management import call_command
from playwright.sync_api import Page, expect

from personas import services
from personas.models import GrantProposal, Persona
from serving.resources import resource_url
from tests.browser_support import (
    HEIGHT,
    WIDTH,
    Browsers,
    admin_page,
    browsers_fixture,  # noqa: F401 (fixture)
    misreadings,
    sign_in,
    tick,
)
from tests.factories import make_owner, make_persona, run_on_commit
from tests.live import DEADLINE_SECONDS, REPO, current_database_url
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


# The first hour -------------------------------------------------------------------------------

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# README step 3: "ask first" beside one verb narrows the grant; a verb added widens it. The
# demo's agent grants the Deployer's webhook verbs, which a coder deputy may have.
ASK_FIRST = "claim"
ADDED = "register_webhook"
# A line of the shell's transcript in a browser's default monospace (about 8 px a character at
# 13 px) fits 1280 px.
TRANSCRIPT_COLUMNS = 140
# The registry search of README step 5 still finds the Reviewer by these words.
DESCRIPTION = "Reviews pull requests queued for review, and asks before it claims one."


@dataclass
class Shell:
    """A second shell in the checkout, as README's first hour pastes into: bash, pipes failing
    when any part fails, nothing exported by hand but what points it at this test's installation;
    every line and what it printed are kept for the transcript."""

    env: dict[str, str]
    transcript: list[str] = field(default_factory=list)

    def run(self, line: str) -> str:
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", line],
            cwd=REPO,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=DEADLINE_SECONDS,
        )
        self.transcript += [f"$ {line}", *done.stdout.rstrip().splitlines(), ""]
        assert done.returncode == 0, f"{line}\nexited {done.returncode}:\n{done.stderr}"
        return done.stdout

    def page(self) -> str:
        """The transcript as a page. It is written into the browser's current page, whose CSP
        allows it no style of its own, so its lines are wrapped here to fit the screen."""
        lines = [
            part
            for line in self.transcript
            for part in textwrap.wrap(line, TRANSCRIPT_COLUMNS, break_on_hyphens=False) or [""]
        ]
        text = html.escape("\n".join(lines))
        return f"<!doctype html><title>The first hour in the shell</title><pre>{text}</pre>"


@pytest.fixture
def first_hour(live_server: Any, settings: Any) -> dict[str, Any]:
    """`make run`'s demo, served by the live server: load_demo as make run calls it, under the
    live server's URL as the installation's public base URL (so the cards, the signatures and the
    registry name the server the walk reaches), and a shell whose commands reach the same
    PostgreSQL database and stamp files."""
    settings.VIRGO_PUBLIC_BASE_URL = live_server.url
    printed = io.StringIO()
    with run_on_commit():
        call_command("load_demo", stdout=printed)
    password = re.search(
        r"^Demo owner: demo / (\S+) \(printed only now\)$", printed.getvalue(), re.M
    )
    assert password, printed.getvalue()
    reviewer = Persona.objects.get(agent__owner__username="demo", name="Reviewer")
    assert reviewer.standing is True
    env = {
        **os.environ,
        # The owner's shell runs Virgo's own settings (the embedded default, as make run's
        # var/virgo.env sets it) on this test's database, stamp files and keys.
        "DJANGO_SETTINGS_MODULE": "virgo.settings",
        "VIRGO_EMBEDDED": "1",
        "DATABASE_URL": current_database_url(),
        "VIRGO_HOME": str(settings.VIRGO_HOME),
        "VIRGO_PUBLIC_BASE_URL": live_server.url,
        "SECRET_KEY": settings.SECRET_KEY,
        "VIRGO_KEY_ENCRYPTION_KEY": ",".join(settings.VIRGO_KEY_ENCRYPTION_KEYS),
    }
    return {
        "password": password.group(1),
        "uuid": str(reviewer.uuid),
        "card_path": reviewer.card_path,
        "shell": Shell(env),
    }


def table(output: str) -> dict[str, dict[str, str]]:
    """A table the shell printed (cells two spaces apart or more), each row by its NAME."""
    header, *rows = (re.split(r"\s{2,}", line) for line in output.splitlines())
    return {cells[1]: dict(zip(header, cells, strict=True)) for cells in rows}


def shell_misreadings(output: str) -> list[str]:
    """A table the shell prints names what it lists: no Python None, no uuid."""
    return [
        line for line in output.splitlines() if re.search(r"\bNone\b", line) or UUID.search(line)
    ]


@pytest.mark.usefixtures("live_postgres")
def test_the_first_hour_in_the_browser_and_the_shell(
    first_hour: dict[str, Any], browsers: Browsers
) -> None:
    """VX-OPS-11, issue 43: README's first hour on the demo, every page at 1280 px without
    horizontal scroll, without a "None" or a uuid where a name belongs and without a 5xx: sign
    in, the index (each model described), the personas, the Reviewer changed at once (ask first,
    a new description) and then widened through its diff page, the shell's lists showing its
    generation moved on and standing, its allowlist and a peer's check of its card, then the
    card (with the new description) and the directory in the browser."""
    demo = browsers.page_for("demo", width=WIDTH, height=HEIGHT)
    shell: Shell = first_hour["shell"]
    watch = browsers.watches["demo"]
    problems: list[str] = []

    def look(name: str) -> None:
        """Read the page as a reviewer would, then keep its screenshot; a 5xx ends the walk."""
        assert not watch.server_errors, f"{name}: {watch.server_errors}"
        problems.extend(f"{name}: {problem}" for problem in misreadings(demo))
        browsers.screenshot("demo", f"first-hour-{name}")

    def generation() -> int:
        return int(demo.locator(".field-generation .readonly").inner_text())

    with browsers.screenshots_on_failure("first-hour"):
        # 2. Sign in to the admin.
        demo.goto("/admin/")
        expect(demo.locator("#id_username")).to_be_visible()
        look("01-sign-in")
        sign_in(demo, "demo", first_hour["password"])
        expect(demo.locator("#recent-changes")).to_be_visible()
        undescribed = demo.locator("#content-main th[scope=row]:not(:has(.model-description))")
        expect(undescribed).to_have_count(0)
        look("02-index")

        demo.click(".app-personas .model-persona th a")
        expect(demo.locator("#result_list tbody tr")).to_have_count(2)
        fits_the_screen(demo)
        look("03-personas")

        # 3. Change a persona: narrowing applies at once, as a new generation.
        demo.locator("#result_list tbody tr", has_text="Reviewer").locator("th a").click()
        admin_page(demo, form=True)
        before = generation()
        look("04-reviewer")
        demo.fill("#id_description", DESCRIPTION)
        demo.check(f'input[name=ask_first_verbs][value="{ASK_FIRST}"]')
        demo.click("input[name=_continue]")
        expect(demo.locator(".messagelist .success")).to_be_visible()
        narrowed = generation()
        assert narrowed > before
        look("05-reviewer-narrowed")

        # A verb added widens it: nothing changes before the diff page is confirmed.
        tick(demo, "verb_subset", [ADDED])
        demo.click("input[name=_continue]")
        expect(demo).to_have_url(re.compile(r"/admin/personas/grantproposal/\d+/change/$"))
        expect(demo.locator("#diff-tools-added")).to_contain_text(ADDED)
        expect(demo.locator("#reject-proposal")).to_be_visible()
        look("06-diff")
        demo.click("#confirm-proposal")
        expect(demo.locator(".messagelist .success")).to_contain_text("Confirmed")
        widened = generation()
        assert widened > narrowed
        look("07-reviewer-widened")

        # 3-5 in the shell: the lists, the allowlist, a peer's check of the card.
        agents = shell.run(".venv/bin/virgo agent list")
        assert re.search(r"^\d+\s+demo-agent\s+demo\s+2$", agents, re.M), agents
        personas = shell.run(".venv/bin/virgo persona list")
        reviewer_row = table(personas)["Reviewer"]
        assert (reviewer_row["GEN"], reviewer_row["STANDING"]) == (str(widened), "yes"), personas
        problems.extend(f"shell: {line}" for line in shell_misreadings(agents + personas))
        listed = json.loads(shell.run(".venv/bin/virgo persona list --owner demo --json"))
        [reviewer] = [persona for persona in listed if persona["name"] == "Reviewer"]
        assert reviewer["uuid"] == first_hour["uuid"]
        assert (reviewer["generation"], reviewer["standing"]) == (widened, True)
        allowlist = shell.run(
            f".venv/bin/virgo launch --persona {first_hour['uuid']} --print-allowlist"
        )
        assert ADDED in allowlist, allowlist
        problems.extend(f"shell: {line}" for line in shell_misreadings(allowlist))
        found = shell.run(
            f".venv/bin/python docs/find_virgo.py --origin {browsers.base_url} "
            '--text "review pull requests" --filter publisher=demo.virgo.example '
            "--token \"$(.venv/bin/python manage.py drf_create_token demo | awk '{print $3}')\""
        )
        assert "verified" in found and "not revoked" in found, found
        demo.set_content(shell.page())
        look("08-shell")

        # 5. The Reviewer's card, as the changes left it, and the directory.
        card = demo.goto(first_hour["card_path"])
        assert card is not None and card.status == 200
        document = card.json()
        assert (document["name"], document["description"]) == ("Reviewer", DESCRIPTION)
        look("09-card")
        demo.goto("/api/directory/")
        admin_page(demo, form=False)
        expect(demo.locator("#result_list")).to_contain_text("Reviewer")
        expect(demo.locator("#result_list")).to_contain_text("Deployer")
        look("10-directory")

        assert not problems, "\n".join(problems)
        browsers.assert_all_clean()
