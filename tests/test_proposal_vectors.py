"""The diff page of a pending grant proposal lists which of the persona's policy vectors the
proposal would change (VX-EXPLAIN-2, issue 26): the vectors of its current grant replayed
against the stamp the proposal would make, composed and never written."""

from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.test import Client

from personas import services
from personas.models import GrantProposal, Persona
from runtime import vectors
from tests.factories import address, run_on_commit, update_persona
from tests.runtime_support import standing_persona

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, settings: Any) -> Path:
    settings.VIRGO_HOME = tmp_path / "home"
    return settings.VIRGO_HOME


def rows() -> dict[str, int]:
    return {model._meta.label: model.objects.count() for model in apps.get_models()}


def tree(root: Path) -> list[tuple[str, int]]:
    return sorted(
        (str(path.relative_to(root)), path.stat().st_mtime_ns) for path in root.rglob("*")
    )


def propose(persona: Persona, **changes: Any) -> GrantProposal:
    with run_on_commit():
        change = services.persona_submit(
            persona=persona, actor=persona.agent.owner, via=GrantProposal.Via.API, **changes
        )
    assert change.proposal is not None
    return change.proposal


def page_url(proposal: GrantProposal) -> str:
    return f"/admin/personas/grantproposal/{proposal.pk}/change/"


def test_the_diff_page_lists_each_vector_whose_verdict_would_change(private_home: Path) -> None:
    """VX-EXPLAIN-2: an ask-first lifted and a tool added: the page lists the calls whose
    verdict changes (from -> to), exactly those `virgo stamp test` names once it is approved,
    and showing it writes nothing."""
    persona = standing_persona(ask_first_verbs=["list_peers"])
    stored = vectors.export(persona)
    proposal = propose(
        persona, ask_first_verbs=[], verb_subset=[*persona.verb_subset, "list_todos"]
    )
    client = Client()
    client.force_login(persona.agent.owner)
    client.get("/admin/")  # the session exists before the counting starts
    before, files = rows(), tree(private_home)
    page = client.get(page_url(proposal))
    assert page.status_code == 200
    assert rows() == before
    assert tree(private_home) == files

    body = page.content.decode()
    assert 'id="proposal-vectors"' in body
    section = body.partition('id="proposal-vectors"')[2].partition("</fieldset>")[0]
    assert "<code>list_peers</code>" in section
    assert "confirm (stamp-access-confirm)" in section
    assert "<strong>allow (default-allow)</strong>" in section
    assert "<code>list_todos</code>" in section
    assert "refused (not_granted)" in section
    assert '{"' not in section  # arguments as name = value, not a JSON dump

    listed = {change.id for change in vectors_on(persona, proposal)}
    assert listed
    with run_on_commit():
        services.proposal_approve(proposal=proposal, actor=persona.agent.owner)
    persona.refresh_from_db()
    assert {change.id for change in vectors.replay(persona, stored).changed} == listed


def vectors_on(persona: Persona, proposal: GrantProposal) -> list[vectors.Changed]:
    proposed = services.proposal_next_generation(proposal=proposal, actor=persona.agent.owner)
    assert proposed is not None
    replayed = vectors.what_a_proposal_changes(persona, proposed)
    assert replayed is not None
    return replayed.changed


def test_a_proposal_that_changes_no_verdict_says_so() -> None:
    """A widening no vector sees (a queue added) changes none of them."""
    persona = standing_persona()
    proposal = propose(persona, queues=[*persona.queues, "triage"])
    client = Client()
    client.force_login(persona.agent.owner)
    body = client.get(page_url(proposal)).content.decode()
    assert "None: each of the" in body
    assert "would be decided as it is now" in body


def test_a_stale_or_decided_proposal_shows_no_vectors() -> None:
    persona = standing_persona(ask_first_verbs=["list_peers"])
    proposal = propose(persona, ask_first_verbs=[])
    update_persona(persona, name="Renamed")
    client = Client()
    client.force_login(persona.agent.owner)
    body = client.get(page_url(proposal)).content.decode()
    assert 'id="proposal-vectors"' not in body
    proposal.refresh_from_db()
    assert services.proposal_next_generation(proposal=proposal, actor=persona.agent.owner) is None


def test_a_draft_has_no_vectors_to_replay_and_says_why() -> None:
    persona = standing_persona()
    with run_on_commit():
        draft = services.persona_draft(
            agent=persona.agent,
            actor=persona.agent.owner,
            via=GrantProposal.Via.API,
            without_prompt=True,
            name="Draft",
            persona_class=persona.persona_class,
            address=address("work/core/draft"),
            verb_subset=persona.verb_subset,
            queues=["reviews"],
        )
    assert draft.proposal is not None
    client = Client()
    client.force_login(persona.agent.owner)
    body = client.get(page_url(draft.proposal)).content.decode()
    assert "Not replayed: the persona has no current grant to draw them from" in body


def test_only_the_owner_may_compute_it() -> None:
    from tests.factories import make_owner

    persona = standing_persona(ask_first_verbs=["list_peers"])
    proposal = propose(persona, ask_first_verbs=[])
    other = make_owner("mallory", is_superuser=True)
    assert services.proposal_next_generation(proposal=proposal, actor=other) is None


def test_only_a_dry_run_decides_under_a_stamp_other_than_the_active_one() -> None:
    from runtime.handler import decide
    from runtime.stamp import load_active_stamp

    persona = standing_persona()
    stamp = load_active_stamp(persona, dry_run=True)
    with pytest.raises(ValueError, match="only a dry run"):
        decide(persona, "list_peers", {}, "c-under", under=stamp)
    assert decide(persona, "list_peers", {}, "c-under", dry_run=True, under=stamp).verdict
