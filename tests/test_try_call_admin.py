"""The persona's "Try a call" page (VX-EXPLAIN-1): runtime.explain's answer for one call, as
admin markup, for the owner and moderators only, with nothing recorded."""

from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.test import Client

from personas.models import Persona
from runtime.admin_explain import BOUNDARY_TOOLS
from tests.factories import make_owner
from tests.runtime_support import standing_persona

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, settings: Any) -> Path:
    settings.VIRGO_HOME = tmp_path / "home"
    return settings.VIRGO_HOME


def client_for(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def url(persona: Persona) -> str:
    return f"/admin/personas/persona/{persona.pk}/try/"


def rows() -> dict[str, int]:
    return {model._meta.label: model.objects.count() for model in apps.get_models()}


def tree(root: Path) -> list[tuple[str, int]]:
    if not root.exists():
        return []
    return sorted(
        (str(path.relative_to(root)), path.stat().st_mtime_ns) for path in root.rglob("*")
    )


def test_the_persona_page_links_to_try_a_call() -> None:
    persona = standing_persona()
    page = client_for(persona.agent.owner).get(f"/admin/personas/persona/{persona.pk}/change/")
    assert f'href="{url(persona)}"' in page.content.decode()


def test_the_form_offers_the_stamp_tools_and_the_boundary_tools() -> None:
    persona = standing_persona()
    page = client_for(persona.agent.owner).get(url(persona))
    assert page.status_code == 200
    body = page.content.decode()
    assert '<ol class="breadcrumbs">' in body
    assert "In the persona&#x27;s stamp" in body
    for tool in ("workspace_write", "list_peers", *BOUNDARY_TOOLS):
        assert f'value="{tool}"' in body, tool
    assert "trigger_webhook" in BOUNDARY_TOOLS  # a boundary's tool this persona has not got


def test_a_confirmed_call_is_explained_in_words_and_nothing_is_recorded(
    private_home: Path,
) -> None:
    """VX-EXPLAIN-1: the verdict, who is asked and through what, the deciding rule, each
    consumer's view and the operation, as admin markup (no JSON); no row, no file."""
    persona = standing_persona()
    client = client_for(persona.agent.owner)
    client.get(url(persona))  # the session exists before the counting starts
    before, files = rows(), tree(private_home)
    page = client.post(
        url(persona),
        {"tool": "workspace_write", "arguments": '{"path": "memory/old.md", "mode": "delete"}'},
    )
    assert page.status_code == 200
    assert rows() == before
    assert tree(private_home) == files
    answer = page.context["answer"]
    assert answer["verdict"] == "confirm"
    assert answer["rule"]["id"] == "workspace-delete"
    body = page.content.decode()
    assert 'id="try-verdict"' in body and "<strong>confirm</strong>" in body
    assert "workspace-delete" in body
    assert "destructive-or-irreversible" in body
    assert "virgo-channel" in body  # through which surface the owner would be asked
    assert "The MCP server&#x27;s tool list</th><td>has workspace_write" in body
    assert "The launcher&#x27;s allowlist</th><td>has workspace_write" in body
    assert "The handler&#x27;s table</th><td>has workspace_write" in body
    assert "<code>workspace.write</code>" in body
    assert "memory/old.md" in body
    assert '{"verdict"' not in body and "&quot;verdict&quot;" not in body


def test_a_tool_outside_the_stamp_is_refused_and_each_consumer_lacks_it() -> None:
    persona = standing_persona()
    page = client_for(persona.agent.owner).post(
        url(persona), {"tool": "trigger_webhook", "arguments": '{"webhook": "ci"}'}
    )
    answer = page.context["answer"]
    assert (answer["verdict"], answer["refused_because"]) == ("refused", "not in the stamp")
    assert "does not have trigger_webhook" in page.content.decode()


def test_a_secret_argument_is_never_shown_back() -> None:
    persona = standing_persona()
    page = client_for(persona.agent.owner).post(
        url(persona),
        {"tool": "send_broker_message", "arguments": '{"body": "here: AKIAIOSFODNN7EXAMPLE"}'},
    )
    assert page.context["answer"]["verdict"] == "deny"
    # The form keeps what the owner typed; the answer below it never repeats the value.
    answer = page.content.decode().partition('id="try-call-answer"')[2]
    assert answer and "AKIAIOSFODNN7EXAMPLE" not in answer


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{nope", "Arguments are not JSON: Expecting property name enclosed in double quotes"),
        ('["QUEUE.md"]', "Arguments must be a JSON object such as"),
        ('"QUEUE.md"', "not a string"),
        ("7", "not a number"),
    ],
)
def test_bad_arguments_are_a_form_error_on_the_field(text: str, says: str) -> None:
    persona = standing_persona()
    page = client_for(persona.agent.owner).post(
        url(persona), {"tool": "workspace_read", "arguments": text}
    )
    assert page.status_code == 200
    assert page.context["answer"] is None
    errors = page.context["form"].errors
    assert list(errors) == ["arguments"]
    assert says in errors["arguments"][0]
    shown = page.content.decode()
    assert "field-arguments errors" in shown
    # The error sits under the field it is about, not above its label (issue 43).
    row = shown[shown.index("field-arguments errors") :]
    assert row.index('name="arguments"') < row.index('class="errorlist') < row.index("</fieldset>")
    assert 'class="errorlist' not in shown[: shown.index('name="arguments"')]


def test_empty_arguments_mean_none() -> None:
    persona = standing_persona()
    page = client_for(persona.agent.owner).post(url(persona), {"tool": "list_peers"})
    assert page.context["answer"]["verdict"] == "allow"


def test_an_unknown_tool_is_a_form_error() -> None:
    persona = standing_persona()
    page = client_for(persona.agent.owner).post(url(persona), {"tool": "no_such_tool"})
    assert list(page.context["form"].errors) == ["tool"]


def test_a_moderator_may_try_any_persona_another_owner_gets_a_404() -> None:
    persona = standing_persona()
    moderator = make_owner("moderator", is_superuser=True)
    page = client_for(moderator).post(url(persona), {"tool": "list_peers"})
    assert page.status_code == 200
    assert page.context["answer"]["verdict"] == "allow"
    stranger = client_for(make_owner("stranger"))
    assert stranger.get(url(persona)).status_code == 404
    assert stranger.post(url(persona), {"tool": "list_peers"}).status_code == 404
    assert stranger.get("/admin/personas/persona/999999/try/").status_code == 404


def test_who_is_not_staff_gets_a_403_and_the_anonymous_sign_in() -> None:
    persona = standing_persona()
    member = make_owner("member")
    member.is_staff = False
    member.save()
    assert client_for(member).get(url(persona)).status_code in (302, 403)
    anonymous = Client().get(url(persona))
    assert anonymous.status_code == 302
    assert "/admin/login/" in anonymous["Location"]
