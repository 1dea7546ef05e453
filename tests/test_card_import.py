"""A draft persona from an existing A2A agent card (issue 16, VX-IMP-1).

Cards are fetched from a real HTTP server on loopback (allowed by the test's setting) through the
a2a-sdk's resolver, or read from the fixture files of a v1.0 and a 0.3 card.
"""

import html
import json
import logging
import re
from collections.abc import Iterator
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps as django_apps
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError

from cards.models import PublishedCard
from cards.rendering import UNDESCRIBED, summarize_prompt
from personas import card_import, services
from personas.models import Agent, GrantProposal, Persona
from stamps.profiles import required_tools
from tests.card_import_support import (
    ADDRESS,
    CLASS,
    FROM_CARD,
    V03,
    V1,
    CardServer,
    admin_client,
)
from tests.factories import REVIEWER_VERBS, address, make_agent, make_owner, run_on_commit
from tests.tools_support import allow_loopback

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, settings: Any) -> Path:
    settings.VIRGO_HOME = tmp_path / "home"
    return settings.VIRGO_HOME


@pytest.fixture
def agent() -> Agent:
    """An agent granting a coder deputy's tools and the reviewer verbs, but no webhooks; the
    default skill map is there to map a card's skills to, even after a test that flushed it."""
    import_module("personas.migrations.0002_default_skills").load(django_apps, None)
    address(ADDRESS)
    owner = make_owner()
    return make_agent(owner, granted_verbs=[*required_tools(CLASS), *REVIEWER_VERBS, "create_for"])


@pytest.fixture
def served(settings: Any) -> Iterator[CardServer]:
    allow_loopback(settings)
    with CardServer(V1.read_bytes()) as server:
        yield server


def draft(source: str, agent: Agent, **kwargs: Any) -> card_import.CardImport:
    with run_on_commit():
        return card_import.import_card(
            card_import.load_card(source),
            agent=agent,
            actor=kwargs.pop("actor", agent.owner),
            persona_class=kwargs.pop("persona_class", CLASS),
            address=kwargs.pop("address", ADDRESS),
        )


def assert_a_pending_draft(outcome: card_import.CardImport, agent: Agent) -> Persona:
    persona = Persona.objects.get(pk=outcome.persona.pk)
    assert persona.agent == agent and persona.system_prompt == ""
    assert persona.verb_subset == [] and persona.discoverable is False
    assert persona.standing is False and persona.generation == 1
    assert not Persona.objects.advertised().filter(pk=persona.pk).exists()
    proposal = GrantProposal.objects.get(persona=persona)
    assert (proposal.status, proposal.via) == (GrantProposal.Status.PENDING, "import")
    assert proposal.proposed_by == agent.owner and proposal == outcome.proposal
    assert proposal.diff["widens"] and proposal.diff["next_stands"]
    return persona


def test_a_card_from_a_live_loopback_server_becomes_a_pending_draft(
    served: CardServer, agent: Agent, caplog: pytest.LogCaptureFixture
) -> None:
    """VX-IMP-1: the SDK's resolver fetches the well-known card of a bare URL (loopback allowed
    by the setting); the draft takes the card's name and description, is not discoverable, does
    not stand, and its grant is a pending proposal made through `import` by the owner."""
    with caplog.at_level(logging.DEBUG):
        outcome = draft(served.url, agent)
    assert served.paths == ["/.well-known/agent-card.json"]
    # The fetched card is a stranger's bytes: the resolver's INFO line copying it is silenced.
    assert not [r for r in caplog.records if "Works through review todos" in r.getMessage()]
    persona = assert_a_pending_draft(outcome, agent)
    assert persona.name == "Release Helper"
    assert persona.description == "Works through review todos and ships releases."
    verbs = outcome.proposal.changes["verb_subset"]
    assert set(verbs) == set(required_tools(CLASS)) | {"claim", "complete", "list_todos"}
    assert outcome.mapping.mapped == (("work-todos", "work-todos"),)


def test_every_unmappable_skill_is_listed_with_its_reason(served: CardServer, agent: Agent) -> None:
    """VX-IMP-1: by id, then by name (case ignored); a skill of no map entry, one needing verbs
    outside the agent's grant (named) and one the class may not have are each listed why."""
    outcome = draft(served.url + "/.well-known/agent-card.json", agent)
    reasons = {skipped.id: skipped.reason for skipped in outcome.mapping.unmapped}
    assert reasons == {
        "ship": (
            f"skill 'deploy-releases' needs verbs outside agent {agent.name!r}'s grant: "
            "trigger_webhook"
        ),
        "delegate-work": (
            "skill 'delegate-work' needs verbs a coder-deputy may not have: create_for"
        ),
        "paint": "no skill of Virgo's skill map has this id or name",
    }
    verbs = outcome.proposal.changes["verb_subset"]
    assert "trigger_webhook" not in verbs and "create_for" not in verbs


@pytest.mark.parametrize(("card", "name"), [(V1, "Release Helper"), (V03, "Legacy Reviewer")])
def test_v1_and_v03_card_files_are_read(card: Path, name: str, agent: Agent) -> None:
    """VX-IMP-1: a v1.0 card and a 0.3 card (through the SDK's own mapping) from files."""
    outcome = draft(str(card), agent)
    persona = assert_a_pending_draft(outcome, agent)
    assert persona.name == name
    assert {"claim", "complete", "list_todos"} <= set(outcome.proposal.changes["verb_subset"])
    if card == V03:
        assert dict(outcome.mapping.mapped) == {"Work-Todos": "work-todos", "notes": "keep-notes"}
        assert [skipped.id for skipped in outcome.mapping.unmapped] == ["poetry"]


def test_the_cards_provider_is_never_copied(agent: Agent) -> None:
    """VX-IMP-1, VX-ID-4: the provider is the importing owner's proven identity, in the draft and
    its proposal; a card naming another organization names nothing of it here."""
    for number, card in enumerate((V1, V03)):
        outcome = draft(str(card), agent, address=address(f"{ADDRESS}-{number}").path)
        persona = Persona.objects.get(pk=outcome.persona.pk)
        composition = persona.generations.get(number=1).composition
        assert composition["provider"]["organization"] == (
            agent.owner.identity.organization_domain.domain
        )
        assert composition["identity"]["organization"]["domain"] == (
            agent.owner.identity.organization_domain.domain
        )
        stored = json.dumps([composition, outcome.proposal.changes, outcome.proposal.diff])
        assert "Card Author" not in stored and "card-author" not in stored


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/",
        "http://localhost:9/card.json",
        "http://10.1.2.3/.well-known/agent-card.json",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:192.168.0.1]/",
    ],
)
def test_a_private_address_is_refused(url: str, agent: Agent, settings: Any) -> None:
    """VX-IMP-1: with the setting off, loopback, private, link-local and metadata addresses are
    refused before anything is sent, naming the argument; nothing is written."""
    settings.VIRGO_OUTBOUND_ALLOWED_NETWORKS = []
    with pytest.raises(card_import.CardImportError, match=r"^url: .*(loopback|private|metadata)"):
        card_import.load_card(url)
    assert not Persona.objects.exists()


def test_the_guard_refuses_the_loopback_server_when_the_setting_is_off(
    served: CardServer, settings: Any
) -> None:
    """VX-IMP-1: the live server is reachable only because the test's setting allows loopback."""
    settings.VIRGO_OUTBOUND_ALLOWED_NETWORKS = []
    with pytest.raises(card_import.CardImportError, match="loopback address"):
        card_import.load_card(served.url)
    assert served.paths == []


def test_the_request_goes_to_the_checked_address_with_the_host_kept(
    served: CardServer, agent: Agent
) -> None:
    """VX-IMP-1: a name is resolved and pinned once (no second lookup to rebind); the Host header
    stays the URL's."""
    url = served.url.replace("127.0.0.1", "localhost")
    draft(url, agent)
    assert served.hosts == [url.removeprefix("http://")]


@pytest.mark.parametrize("length", [True, False])
def test_a_too_large_card_is_refused_while_it_streams(
    length: bool, agent: Agent, settings: Any, tmp_path: Path
) -> None:
    """VX-IMP-1: more than 256 KiB, whether announced by Content-Length or only seen as the body
    streams in, is refused; a file is bounded the same; nothing is written."""
    allow_loopback(settings)
    card = json.loads(V1.read_bytes())
    card["description"] = "x" * card_import.CARD_LIMIT
    body = json.dumps(card).encode()
    too_large = pytest.raises(card_import.CardImportError, match=r"^url: .*larger than 262144")
    with CardServer(body, length=length) as server, too_large:
        card_import.load_card(server.url)
    big = tmp_path / "big.json"
    big.write_bytes(body)
    with pytest.raises(card_import.CardImportError, match=r"^file: .*larger than 262144"):
        card_import.load_card(str(big))
    assert not Persona.objects.exists()


def test_a_server_that_does_not_answer_in_time_is_refused(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-IMP-1: the fetch is bounded in time (5 s; shortened here)."""
    allow_loopback(settings)
    monkeypatch.setattr(card_import, "CARD_TIMEOUT", 0.3)
    late = pytest.raises(card_import.CardImportError, match=r"^url: no .*answer within 0.3 s")
    with CardServer(V1.read_bytes(), delay=2) as server, late:
        card_import.load_card(server.url)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"<html>hello</html>", r"^card: not JSON"),
        (b"[1, 2]", r"^card: a JSON object is expected, not an array"),
        (b'{"hello": "world"}', r"^card.name: missing"),
        (b'{"name": "No interfaces"}', r"^card.supportedInterfaces: missing"),
        (b'{"name": 5, "url": "https://x.example/"}', r"^card.name: expected string"),
    ],
)
def test_what_is_not_a_card_is_refused_naming_the_field(
    body: bytes, problem: str, tmp_path: Path
) -> None:
    """VX-IMP-1: bad input is a clear error naming the field and the reason."""
    path = tmp_path / "card.json"
    path.write_bytes(body)
    with pytest.raises(card_import.CardImportError, match=problem):
        card_import.load_card(str(path))


def test_another_scheme_is_refused() -> None:
    """VX-IMP-1: only http(s) is fetched."""
    for url in ("ftp://example.org/card.json", "file:///etc/passwd"):
        with pytest.raises(card_import.CardImportError, match=r"^url: only http"):
            card_import.load_card(url)


def test_another_owners_agent_is_refused(agent: Agent) -> None:
    """VX-IMP-1 (attack): an owner cannot draft a persona on someone else's agent, nor learn its
    grant from the error; nothing is written."""
    intruder = make_owner()
    with pytest.raises(PermissionDenied):
        draft(str(V1), agent, actor=intruder)
    assert not Persona.objects.exists() and not GrantProposal.objects.exists()


def test_approval_needs_the_owners_prompt_and_then_the_persona_stands(agent: Agent) -> None:
    """VX-IMP-1: the prompt is never generated: approval without one is refused and the proposal
    stays pending; with the owner's prompt the proposed grant is built and stands."""
    outcome = draft(str(V1), agent)
    owner = agent.owner
    with pytest.raises(ValidationError) as refused:
        services.proposal_approve(proposal=outcome.proposal, actor=owner)
    assert "system_prompt" in refused.value.message_dict
    assert GrantProposal.objects.get(pk=outcome.proposal.pk).status == "pending"
    with run_on_commit():
        persona = services.proposal_approve(
            proposal=outcome.proposal, actor=owner, system_prompt="Review todos, carefully."
        )
    persona.refresh_from_db()
    assert persona.system_prompt == "Review todos, carefully." and persona.generation == 2
    assert persona.standing is True and persona.discoverable is False
    assert sorted(persona.verb_subset) == sorted(outcome.proposal.changes["verb_subset"])
    assert GrantProposal.objects.get(pk=outcome.proposal.pk).status == "approved"


@pytest.mark.parametrize("description", [None, "", " \n\t "])
def test_a_card_without_a_description_makes_a_draft_that_publishes(
    description: str | None, agent: Agent, tmp_path: Path, capsys: Any
) -> None:
    """VX-GRANT-4: a persona's description is optional (SPEC-0009), so a card without one is
    imported; the draft has neither description nor prompt, and its card (every generation's is
    published) says so, where the A2A SDK refused the empty description the draft was made
    with and publishing it raised. Once the owner writes the prompt, the card describes the
    persona by the prompt's first sentence, as for any persona without a description."""
    card = json.loads(V1.read_bytes())
    card.pop("description")
    if description is not None:
        card["description"] = description
    path = tmp_path / "card.json"
    path.write_text(json.dumps(card))
    with run_on_commit():
        call_command("persona", "import-card", str(path), "--agent", str(agent.pk),
                     "--address", ADDRESS, "--class", CLASS)  # fmt: skip
    persona = Persona.objects.get()
    assert persona.description == "" and "Drafted persona" in capsys.readouterr().out
    published = PublishedCard.objects.get(persona=persona)
    assert json.loads(published.body)["description"] == UNDESCRIBED
    prompt = "You work through review todos. Carefully."
    with run_on_commit():
        services.proposal_approve(
            proposal=GrantProposal.objects.get(persona=persona),
            actor=agent.owner,
            system_prompt=prompt,
        )
    published.refresh_from_db()
    assert published.generation == 2
    assert json.loads(published.body)["description"] == summarize_prompt(prompt)


def test_a_class_whose_required_tools_the_grant_lacks_is_refused() -> None:
    """VX-IMP-1: a draft that could never stand is not made; the missing tools are named."""
    address(ADDRESS)
    owner = make_owner()
    narrow = make_agent(owner, granted_verbs=list(REVIEWER_VERBS))
    with pytest.raises(card_import.CardImportError, match=r"^agent: .*required tools"):
        draft(str(V1), narrow)
    assert not Persona.objects.exists()


def test_the_command_drafts_and_lists_what_it_left_out(agent: Agent, capsys: Any) -> None:
    """VX-IMP-1: `virgo persona import-card <file> --agent <id>` makes the draft and prints the
    proposal and every unmapped skill with its reason."""
    with run_on_commit():
        call_command(
            "persona", "import-card", str(V1), "--agent", str(agent.pk),
            "--address", ADDRESS, "--class", CLASS,
        )  # fmt: skip
    out = capsys.readouterr().out
    persona = Persona.objects.get()
    assert f"Drafted persona 'Release Helper' ({persona.uuid})" in out
    assert "Not mapped: paint: no skill of Virgo's skill map" in out
    assert "trigger_webhook" in out
    assert GrantProposal.objects.get(persona=persona).via == "import"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("http://10.0.0.7/", "url: 10.0.0.7 is a private address"),
        ("gopher://example.org/", "url: only http(s)"),
        ("/no/such/card.json", "file: cannot read"),
    ],
)
def test_the_command_fails_with_a_clear_error_and_writes_nothing(
    source: str, message: str, agent: Agent, capsys: Any
) -> None:
    """VX-IMP-1: bad input exits non-zero naming the field and reason; nothing is written.

    Through call_command: run_from_argv, which turns the CommandError into the exit status,
    also closes every database connection, the test's own included."""
    with pytest.raises(CommandError) as refused:
        call_command("persona", "import-card", source, "--agent", str(agent.pk),
                     "--address", ADDRESS, "--class", CLASS)  # fmt: skip
    assert refused.value.returncode != 0
    assert message in str(refused.value)
    assert not Persona.objects.exists()
    with pytest.raises(CommandError, match="--agent: no agent"):
        call_command("persona", "import-card", str(V1), "--agent", "999999",
                     "--address", ADDRESS, "--class", CLASS)  # fmt: skip


def test_the_admin_page_drafts_a_persona_for_its_owner(served: CardServer, agent: Agent) -> None:
    """VX-IMP-1: the owner's "new persona from an agent card" page fetches the card, drafts the
    persona on their own agent and leads to the proposal, where the prompt is written and the
    grant confirmed."""
    client = admin_client(agent.owner)
    page = client.get(FROM_CARD)
    assert page.status_code == 200 and agent.name in page.content.decode()
    form = {"url": served.url, "agent": agent.pk, "address": ADDRESS, "persona_class": CLASS}
    with run_on_commit():
        response = client.post(FROM_CARD, form)
    proposal = GrantProposal.objects.get()
    assert response.status_code == 302
    assert response["Location"] == f"/admin/personas/grantproposal/{proposal.pk}/change/"
    review = client.get(response["Location"]).content.decode()
    assert 'id="draft-prompt"' in review and "Not mapped: paint" in review
    # VX-OPS-11: a first grant adds every tool; why it waits says so once, as one list.
    [waits] = re.findall(r'<ul id="diff-widening">(.*?)</ul>', review, re.S)
    tools = proposal.diff["tools_added"]
    assert len(tools) > 1 and "<li>adds tool " not in waits and waits.count(" tools: ") == 1
    assert f"adds {len(tools)} tools: {', '.join(tools)}" in waits
    with run_on_commit():
        client.post(
            response["Location"], {"decision": "approve", "system_prompt": "Mine, written."}
        )
    persona = Persona.objects.get()
    assert persona.system_prompt == "Mine, written." and persona.standing is True


def test_the_admin_page_offers_and_accepts_only_the_owners_agents(agent: Agent) -> None:
    """VX-IMP-1 (attack): another owner sees none of the victim's agents and posting one's id
    is refused as not a choice; a file upload and a path in the URL field are handled too."""
    intruder = make_owner()
    client = admin_client(intruder)
    assert agent.name not in client.get(FROM_CARD).content.decode()
    with V1.open("rb") as card:
        form = {"file": card, "agent": agent.pk, "address": ADDRESS, "persona_class": CLASS}
        refused = client.post(FROM_CARD, form)
    assert refused.status_code == 200 and "Select a valid choice" in refused.content.decode()
    owner_client = admin_client(agent.owner)
    path_form = {"url": str(V1), "agent": agent.pk, "address": ADDRESS, "persona_class": CLASS}
    assert "only http(s)" in owner_client.post(FROM_CARD, path_form).content.decode()
    assert not Persona.objects.exists()
    with V1.open("rb") as card, run_on_commit():
        form = {"file": card, "agent": agent.pk, "address": ADDRESS, "persona_class": CLASS}
        assert owner_client.post(FROM_CARD, form).status_code == 302
    assert Persona.objects.get().agent == agent


ODD_SPELLINGS = {
    # httpx reads no leading zero: refused as not a URL, saying why.
    "http://0177.0.0.1/": (
        "url: 'http://0177.0.0.1/' is not a URL the client can send to (Invalid IPv4 address"
    ),
    "http://0177.0.0.1:8080/card.json": (
        "is not a URL the client can send to (Invalid IPv4 address: '0177.0.0.1')"
    ),
    # The resolver reads these as 127.0.0.1: resolved, then refused as loopback.
    "http://2130706433/": "url: 2130706433 (resolves to 127.0.0.1) is a loopback address",
    "http://0x7f.1/": "url: 0x7f.1 (resolves to 127.0.0.1) is a loopback address",
    "http://[64:ff9b::7f00:1]/": "url: 64:ff9b::7f00:1 is a loopback address in IPv6 form",
}


@pytest.mark.parametrize(("url", "message"), ODD_SPELLINGS.items())
def test_an_odd_spelling_of_loopback_is_one_clear_error_everywhere(
    url: str, message: str, agent: Agent
) -> None:
    """VX-SEC-3, VX-GRANT-4: an IPv4 address written oddly is refused as not a URL or resolved
    and refused: one error from the reader, the command and the admin page, never a 500 or a
    traceback (0177.0.0.1 reached the admin as httpx's InvalidURL); nothing is written."""
    with pytest.raises(card_import.CardImportError) as refused:
        card_import.load_card(url)
    assert message in str(refused.value)
    with pytest.raises(CommandError, match=re.escape(message)):
        call_command("persona", "import-card", url, "--agent", str(agent.pk),
                     "--address", ADDRESS, "--class", CLASS)  # fmt: skip
    page = admin_client(agent.owner).post(
        FROM_CARD, {"url": url, "agent": agent.pk, "address": ADDRESS, "persona_class": CLASS}
    )
    assert page.status_code == 200
    assert html.escape(message) in page.content.decode()
    assert not Persona.objects.exists()
