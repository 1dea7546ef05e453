"""VX-REMOTE-1, VX-REMOTE-2: what an owner sees of remote access in the admin: the clients they
registered and the connections those hold to their personas, each revocable there, and nothing
of another owner's."""

from typing import Any

import pytest
from django.test import Client
from oauth2_provider.models import Application, RefreshToken

from serving.resources import resource_url
from tests.factories import make_owner
from tests.owner_clients import form_data
from tests.remote_support import granted, public_client, refresh, rpc
from tests.runtime_support import standing_persona

pytestmark = pytest.mark.django_db

CLIENTS = "/admin/serving/client/"
CONNECTIONS = "/admin/serving/connection/"


def browser(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_an_owner_registers_a_client_that_can_never_skip_consent() -> None:
    """VX-REMOTE-1: the client is the owner's, public, authorization code with PKCE; a posted
    skip_authorization or grant type is not the owner's to choose."""
    owner = make_owner()
    admin = browser(owner)
    page = admin.get(CLIENTS + "add/")
    assert page.status_code == 200
    posted = admin.post(
        CLIENTS + "add/",
        {
            **form_data(page, "client_form"),
            "name": "Build host",
            "redirect_uris": "http://127.0.0.1:8765/callback",
            "skip_authorization": "on",
            "authorization_grant_type": "client-credentials",
            "client_type": "confidential",
        },
    )
    assert posted.status_code == 302, posted.content[:800]
    client = Application.objects.get(name="Build host")
    assert client.user == owner
    assert (client.client_type, client.authorization_grant_type) == (
        Application.CLIENT_PUBLIC,
        Application.GRANT_AUTHORIZATION_CODE,
    )
    assert client.skip_authorization is False


def test_an_owner_sees_and_revokes_their_connections_and_no_one_elses() -> None:
    """VX-REMOTE-2: the connection names the client and the persona; revoking it in the admin
    refuses the client's next call and its next refresh; another owner sees neither the client
    nor the connection."""
    persona = standing_persona()
    owner = persona.agent.owner
    app, tokens = granted(persona)
    stranger = make_owner()
    public_client(stranger, name="Stranger's host")

    listed = browser(owner).get(CONNECTIONS)
    assert listed.status_code == 200
    assert persona.name in listed.content.decode() and "Agent host" in listed.content.decode()
    assert "Stranger" not in browser(owner).get(CLIENTS).content.decode()
    theirs = browser(stranger)
    assert persona.name not in theirs.get(CONNECTIONS).content.decode()
    connection = RefreshToken.objects.get()
    assert theirs.get(f"{CONNECTIONS}{connection.pk}/change/").status_code in (302, 403, 404)
    theirs.post(CONNECTIONS, {"action": "revoke", "_selected_action": [connection.pk]})
    assert rpc(persona, "tools/list", token=tokens["access_token"]).status_code == 200

    revoked = browser(owner).post(
        CONNECTIONS, {"action": "revoke", "_selected_action": [connection.pk]}
    )
    assert revoked.status_code == 302
    assert rpc(persona, "tools/list", token=tokens["access_token"]).status_code == 401
    refreshed = refresh(app, tokens["refresh_token"])
    assert refreshed.status_code == 400
    assert persona.name not in browser(owner).get(CONNECTIONS).content.decode()


def test_the_toolkits_inner_records_are_a_superusers_alone() -> None:
    """Authorization codes, access tokens and ID tokens are not listed to an owner."""
    owner = make_owner()
    admin = browser(owner)
    index = admin.get("/admin/").content.decode()
    assert "Remote access" in index and "Connections" in index and "Clients" in index
    for model in ("grant", "accesstoken", "idtoken", "application", "refreshtoken"):
        assert admin.get(f"/admin/oauth2_provider/{model}/").status_code == 403
    superuser = browser(make_owner(is_superuser=True))
    assert superuser.get("/admin/oauth2_provider/accesstoken/").status_code == 200


def test_an_owner_opens_a_connection_for_a_host_with_no_browser() -> None:
    """VX-REMOTE-1, VX-REMOTE-3: the owner picks their client and persona; the page shows the
    refresh token once (kept only as its digest, never in a message or a cookie), which the
    host spends for an access token bound to that persona alone."""
    persona = standing_persona()
    owner = persona.agent.owner
    client = public_client(owner, name="CI runner")
    admin = browser(owner)
    page = admin.get(CONNECTIONS + "add/")
    assert page.status_code == 200
    opened = admin.post(
        CONNECTIONS + "add/", {"host_client": client.pk, "target_persona": persona.pk}
    )
    assert opened.status_code == 200, opened.content[:800]
    assert "no-store" in opened["Cache-Control"]
    token = opened.context["token"]
    shown = opened.content.decode()
    assert token in shown and f"--client-id {client.client_id}" in shown
    assert token not in str(opened.cookies) and token not in str(admin.session.items())
    assert list(RefreshToken.objects.values_list("token", "resource")) == [
        ("", [resource_url(persona.uuid)])
    ]
    spent = refresh(client, token)
    assert spent.status_code == 200, spent.content
    assert rpc(persona, "tools/list", token=spent.json()["access_token"]).status_code == 200
    assert "CI runner" in admin.get(CONNECTIONS).content.decode()


def test_a_connection_is_opened_only_for_the_owners_client_and_live_persona() -> None:
    """VX-REMOTE-1: another owner's client or persona is not offered, and posted anyway is
    refused with nothing made; a revoked persona is not offered either."""
    persona = standing_persona()
    owner = persona.agent.owner
    mine = public_client(owner, name="Mine")
    stranger = make_owner()
    theirs = public_client(stranger, name="Theirs")
    their_persona = standing_persona(stranger)
    admin = browser(owner)
    for posted in (
        {"host_client": theirs.pk, "target_persona": persona.pk},
        {"host_client": mine.pk, "target_persona": their_persona.pk},
    ):
        refused = admin.post(CONNECTIONS + "add/", posted)
        assert refused.status_code == 200
        assert "Select a valid choice" in refused.content.decode()
    assert not RefreshToken.objects.exists()


@pytest.mark.parametrize(
    ("redirect", "refused"),
    [
        ("http://127.0.0.1/callback", False),
        ("http://[::1]:8765/callback", False),
        ("https://host.example.org/callback", False),
        ("http://host.example.org/callback", True),
        ("https://ok.example.org/cb http://10.0.0.5/cb", True),
    ],
)
def test_a_client_redirects_in_the_clear_only_to_loopback(redirect: str, refused: bool) -> None:
    """VX-REMOTE-1: plain http carries a code only to the host's own loopback (RFC 8252);
    anywhere else it must be https, or the client is not registered."""
    admin = browser(make_owner())
    page = admin.get(CLIENTS + "add/")
    posted = admin.post(
        CLIENTS + "add/",
        {**form_data(page, "client_form"), "name": "Host", "redirect_uris": redirect},
    )
    assert (posted.status_code == 200) is refused
    assert Application.objects.exists() is not refused
    if refused:
        assert "plain http is only for a loopback redirect" in posted.content.decode()
