"""The demo of `make run`: both personas stand and their stamps are in the owner's admin."""

import io
import re

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command
from django.test import Client
from oauth2_provider.models import Application

from personas import services
from personas.models import AuditEvent, Generation, Persona
from stamps import profiles
from tests.factories import update_persona


@pytest.mark.django_db(transaction=True)
def test_the_demo_personas_stand_with_their_class_tools() -> None:
    """V1-ACC-2, V1-INV-1, VX-SEC-13: the reviewer (coder deputy) and the deployer (project
    lead) carry every required tool of their class plus their SPEC-0009 verbs, and stand; the
    reviewer asks first before it completes a todo; loading the demo again keeps them as they
    are."""
    out = io.StringIO()
    call_command("load_demo", stdout=out)
    assert "Reviewer at work/core/reviewer stands" in out.getvalue()
    assert "Deployer at work/core/lead stands" in out.getvalue()
    reviewer = Persona.objects.get(name="Reviewer")
    deployer = Persona.objects.get(name="Deployer")
    assert set(profiles.required_tools("coder-deputy")) <= set(reviewer.verb_subset)
    assert set(profiles.required_tools("project-lead")) <= set(deployer.verb_subset)
    assert {"list_todos", "claim", "complete"} <= set(reviewer.verb_subset)
    assert {"register_webhook", "trigger_webhook"} <= set(deployer.verb_subset)
    assert reviewer.owning_lead == deployer
    assert reviewer.standing is deployer.standing is True
    assert reviewer.ask_first_verbs == ["complete"]
    assert b'"access":"confirm","boundary":null,"handler_action":"todos.complete"' in (
        reviewer.generations.get().stamp.data
    )

    call_command("load_demo", stdout=io.StringIO())
    assert sorted(Persona.objects.values_list("generation", "standing")) == [(1, True), (1, True)]

    client = Client()
    client.force_login(reviewer.agent.owner)
    page = client.get(f"/admin/personas/persona/{reviewer.pk}/generations/1/stamp/")
    assert page.status_code == 200
    assert reviewer.generations.get().stamp_hash in page.content.decode()


@pytest.mark.django_db(transaction=True)
def test_the_demo_password_is_printed_when_made_and_kept_by_every_later_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """VX-REL-4: a restart (each `make run`, each `make serve`) loads the demo again and leaves
    the owner's password as it was printed; `--new-password` makes and prints a new one. The
    command it prints for that names the settings file the process was given, if any."""
    monkeypatch.delenv("VIRGO_ENV_FILE", raising=False)
    first = io.StringIO()
    call_command("load_demo", stdout=first)
    password = re.search(r"Demo owner: demo / (\S+) \(printed only now\)", first.getvalue())
    assert password is not None
    assert "Reset it:   .venv/bin/virgo load_demo --new-password" in first.getvalue()

    monkeypatch.setenv("VIRGO_ENV_FILE", "/srv/virgo/run/serve.env")
    again = io.StringIO()
    call_command("load_demo", stdout=again)
    assert "Demo owner: demo (password unchanged" in again.getvalue()
    assert password.group(1) not in again.getvalue()
    assert authenticate(username="demo", password=password.group(1)) is not None
    assert (
        "Reset it:   VIRGO_ENV_FILE=/srv/virgo/run/serve.env .venv/bin/virgo load_demo "
        "--new-password" in again.getvalue()
    )
    assert "MCP config: VIRGO_ENV_FILE=/srv/virgo/run/serve.env .venv/bin/virgo mcp config" in (
        again.getvalue()
    )

    renewed = io.StringIO()
    call_command("load_demo", "--new-password", stdout=renewed)
    new = re.search(r"Demo owner: demo / (\S+) \(printed only now\)", renewed.getvalue())
    assert new is not None and new.group(1) != password.group(1)
    assert authenticate(username="demo", password=password.group(1)) is None
    assert authenticate(username="demo", password=new.group(1)) is not None


@pytest.mark.django_db(transaction=True)
def test_the_demo_owner_has_one_agent_host_client_the_demo_never_changes() -> None:
    """VX-REMOTE-1, VX-OPS-9: the demo registers the demo owner's public client for the remote
    endpoint once and prints the command that uses it; a later run leaves the owner's edits."""
    out = io.StringIO()
    call_command("load_demo", stdout=out)
    [client] = Application.objects.all()
    assert client.user.username == "demo" and client.client_type == Application.CLIENT_PUBLIC
    reviewer = Persona.objects.get(name="Reviewer")
    assert (
        f"Remote:     .venv/bin/python -m serving.connect {reviewer.mcp_url} "
        f"--client-id {client.client_id}"
    ) in out.getvalue()
    Application.objects.filter(pk=client.pk).update(redirect_uris="http://127.0.0.1:9000/cb")
    call_command("load_demo", stdout=io.StringIO())
    [kept] = Application.objects.all()
    assert (kept.pk, kept.redirect_uris) == (client.pk, "http://127.0.0.1:9000/cb")


@pytest.mark.django_db(transaction=True)
def test_the_demo_never_undoes_what_the_owner_changed() -> None:
    """VX-OPS-9: after the owner edits the Reviewer (a description, its grant narrowed, its
    ask-first verbs cleared, delisted), renames the Deployer and narrows the agent's queues,
    the next `make run` (load_demo) keeps every change, makes no persona or generation, and
    records no audit event; a persona the owner deleted is made again, as missing."""
    call_command("load_demo", stdout=io.StringIO())
    reviewer = Persona.objects.get(name="Reviewer")
    owner = reviewer.agent.owner
    narrowed = [verb for verb in reviewer.verb_subset if verb != "claim"]
    update_persona(
        reviewer, description="Reviews only my repositories.", verb_subset=narrowed,
        ask_first_verbs=[],
    )  # fmt: skip
    services.persona_set_discoverable(persona=reviewer, actor=owner, discoverable=False, via="t")
    deployer = Persona.objects.get(name="Deployer")
    update_persona(deployer, name="Shipper")
    agent = reviewer.agent
    services.agent_update(agent=agent, actor=owner, granted_queues=["reviews", "deploys"])
    before = {
        "events": AuditEvent.objects.count(),
        "personas": list(Persona.objects.order_by("pk").values_list("pk", "name", "generation")),
        "generations": Generation.objects.count(),
    }

    call_command("load_demo", stdout=io.StringIO())
    assert AuditEvent.objects.count() == before["events"]
    assert Generation.objects.count() == before["generations"]
    assert (
        list(Persona.objects.order_by("pk").values_list("pk", "name", "generation"))
        == (before["personas"])
    )
    reviewer.refresh_from_db()
    assert reviewer.description == "Reviews only my repositories."
    assert "claim" not in reviewer.verb_subset and reviewer.ask_first_verbs == []
    assert reviewer.discoverable is False
    agent.refresh_from_db()
    assert agent.granted_queues == ["reviews", "deploys"]

    Persona.objects.filter(name="Shipper").delete()
    call_command("load_demo", stdout=io.StringIO())
    assert Persona.objects.filter(name="Deployer", revoked_at=None).exists()
