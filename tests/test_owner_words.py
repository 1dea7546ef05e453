"""Refusals and diffs in the owner's words (VX-OPS-11): a persona that waits for its owner says
which proposal and where to approve it, not its implementation's checklist; the grant review
page shows only what changes, names personas by name, and tells Confirm from Reject."""

import html
import io
import re
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext

from personas import audit, grant_review, services
from personas.models import AuditEvent, Persona, PersonaClass
from runtime.stamp import StampUnavailable, load_active_stamp, why_not_standing
from tests.factories import address, make_agent, make_owner, run_on_commit
from tests.owner_clients import session_client
from tests.runtime_support import CLASS_ADDRESSES, standing_persona

pytestmark = pytest.mark.django_db

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def drafted() -> Persona:
    """A persona `virgo persona add` made: it grants nothing until its owner approves."""
    owner = make_owner("words-owner")
    make_agent(owner, name="main")
    with run_on_commit():
        call_command(
            "persona", "add", "--owner", "words-owner", "--agent", "main", "--name", "Drafted",
            "--class", PersonaClass.CODER_DEPUTY, "--prompt", "You review pull requests.",
            "--address", address(CLASS_ADDRESSES[PersonaClass.CODER_DEPUTY]).path,
            "--queues", "reviews", stdout=io.StringIO(), stderr=io.StringIO(),
        )  # fmt: skip
    return Persona.objects.get(name="Drafted")


def test_a_draft_says_which_proposal_waits_and_where_to_approve_it() -> None:
    """VX-OPS-11: `mcp config`, the runtime and every consumer of its refusal say the grant
    waits for the owner, with the proposal and its review URL, once: not the class's required
    tools one line each."""
    persona = drafted()
    [proposal] = persona.proposals.all()
    with pytest.raises(StampUnavailable) as refused:
        load_active_stamp(persona)
    assert refused.value.reason.endswith(
        f"its grant waits for your approval: proposal {proposal.pk}, approve it at "
        f"{proposal.review_url}"
    )
    assert "missing tool" not in refused.value.reason
    with pytest.raises(CommandError) as config:
        call_command("mcp", "config", "--persona", str(persona.uuid))
    assert f"proposal {proposal.pk}, approve it at {proposal.review_url}" in str(config.value)


def test_missing_tools_are_one_list() -> None:
    """VX-OPS-11: with no proposal waiting, the tools a class misses are said once, as a list."""
    persona = drafted()
    generation = persona.generations.get()
    persona.proposals.update(status="rejected")
    reason = why_not_standing(generation)
    missing = [r.rpartition(" ")[2] for r in generation.not_standing_reasons]
    assert reason == f"missing the tools its class requires: {', '.join(missing)}"
    assert reason.count("missing") == 1


def test_the_review_page_shows_only_what_changes_and_names_the_lead() -> None:
    """VX-OPS-11: moving confirmations to a lead and adding a tool shows those two rows, the
    lead by name, never its uuid or a row of "none"; Confirm and Reject say what each does."""
    owner = make_owner("review-owner")
    agent = make_agent(owner)
    lead = standing_persona(owner, agent=agent, persona_class=PersonaClass.PROJECT_LEAD)
    deputy = standing_persona(owner, agent=agent)
    with run_on_commit():
        change = services.persona_submit(
            persona=deputy,
            actor=owner,
            via="test",
            owning_lead=lead,
            verb_subset=[*deputy.verb_subset, "claim"],
        )
    proposal = change.proposal
    assert proposal is not None
    page = session_client(owner).get(f"/admin/personas/grantproposal/{proposal.pk}/change/")
    assert page.status_code == 200
    shown = page.content.decode()
    table = shown[shown.index('id="grant-diff"') : shown.index("</table>")]
    rows = re.findall(r'<th scope="row">([^<]+)</th>', table)
    assert rows == ["Tools added", "Who confirms its ask-first calls"]
    assert 'id="diff-tools-added">claim<' in table
    assert f"the human owner → owning lead {lead.name}" in table
    widening = shown[shown.index('id="diff-widening"') : shown.index("</ul>")]
    assert f"owning lead {lead.name}" in widening
    assert not UUID.search(table + widening)
    assert ">none<" not in table
    assert f"Confirm: widen {deputy.name}'s grant" in shown
    assert "Reject: change nothing" in shown and 'class="button reject-proposal"' in shown


def test_why_proposals_wait_names_every_persona_with_one_query() -> None:
    """VX-OPS-11: the reasons of a persona's proposals name personas by name, never a uuid, and
    the persona page names them all with one query, however many proposals it lists."""
    owner = make_owner("reasons-owner")
    agent = make_agent(owner)
    lead = standing_persona(owner, agent=agent, persona_class=PersonaClass.PROJECT_LEAD)
    deputy = standing_persona(owner, agent=agent)
    client = session_client(owner)
    page = f"/admin/personas/persona/{deputy.pk}/change/"

    def propose(**changes: Any) -> None:
        with run_on_commit():
            services.persona_submit(
                persona=deputy, actor=owner, via="test", owning_lead=lead, **changes
            )

    def queries() -> tuple[int, str]:
        with CaptureQueriesContext(connection) as captured:
            shown = client.get(page)
        assert shown.status_code == 200
        return len(captured), shown.content.decode()

    propose(verb_subset=[*deputy.verb_subset, "claim"])
    queries()  # the first request also reads content types, which later ones have cached
    one, _ = queries()
    propose(verb_subset=[*deputy.verb_subset, "complete"])
    propose(queues=[*deputy.queues, "triage"])
    three, shown = queries()
    assert deputy.proposals.count() == 3
    assert three == one
    cells = re.findall(r'<td class="field-widening">\s*<p>(.*?)</p>', shown, re.S)
    assert len(cells) == 3 and not any(str(lead.uuid) in cell for cell in cells)
    assert all(f"to owning lead {lead.name}" in cell for cell in cells)
    diffs = {p.pk: p.diff for p in deputy.proposals.all()}
    with CaptureQueriesContext(connection) as captured:
        reasons = grant_review.widening_reasons_of(diffs, owner.pk)
    assert len(captured) == 1
    assert all(any(lead.name in r for r in found) for found in reasons.values())
    assert reasons == {
        pk: grant_review.widening_reasons(diff, owner.pk) for pk, diff in diffs.items()
    }
    assert grant_review.widening_reasons({}, owner.pk) == []


def test_a_held_change_is_audited_naming_the_personas_as_they_were_named_then() -> None:
    """VX-OPS-11: the audit trail says why a change waits in the owner's words, the owning lead
    by its name, never a uuid; an event is a record of its moment, so renaming the lead later
    leaves it as it was."""
    owner = make_owner("audit-words-owner")
    agent = make_agent(owner)
    lead = standing_persona(owner, agent=agent, persona_class=PersonaClass.PROJECT_LEAD)
    deputy = standing_persona(owner, agent=agent)
    with run_on_commit():
        services.persona_submit(
            persona=deputy,
            actor=owner,
            via="test",
            owning_lead=lead,
            verb_subset=[*deputy.verb_subset, "claim"],
        )
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.PROPOSAL_MADE, persona=deputy)
    said = audit.describe(event.kind, event.data)
    assert f"to owning lead {lead.name}" in said and not UUID.search(said)
    Persona.objects.filter(pk=lead.pk).update(name="Renamed Lead")
    event.refresh_from_db()
    assert audit.describe(event.kind, event.data) == said
    shown = session_client(owner).get(f"/admin/personas/persona/{deputy.pk}/change/")
    assert said in html.unescape(shown.content.decode())
