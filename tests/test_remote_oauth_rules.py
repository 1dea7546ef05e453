"""Virgo as the authorization server, rule by rule (serving.oauth, serving.access; VX-REMOTE-1,
VX-REMOTE-2): what the consent page refuses when it is posted to directly, what the token
endpoint answers when refused or flooded, and who holds a bearer token, each in exact words.
The flows end to end: tests/test_remote_mcp.py and the live tests."""

import json
import uuid
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client, RequestFactory
from django.utils import timezone
from oauth2_provider.models import AccessToken, Grant, set_token_value

from personas.services import persona_revoke
from serving import access
from serving.access import Refused, check_access, connection_label
from serving.oauth import NOT_THE_OWNER, ONE_RESOURCE, PersonaAuthorizationView, grantable_persona
from serving.resources import SCOPE, metadata_url, persona_uuid_of, resource_url
from tests.factories import make_owner, run_on_commit
from tests.owner_clients import fresh_rate_limits  # noqa: F401 (autouse)
from tests.remote_support import (
    authorize_query,
    consent,
    granted,
    pkce,
    public_client,
    refresh,
)
from tests.runtime_support import standing_persona

pytestmark = pytest.mark.django_db
SKIPS = (
    "this client is set to skip the owner's consent, which Virgo never does: clear its skip "
    "authorization setting"
)


def signed_in(user: Any) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


# The consent page --------------------------------------------------------------------------------


def test_the_consent_page_names_the_persona_it_grants() -> None:
    """VX-REMOTE-1: the page the owner approves says which persona, under its own title."""
    persona = standing_persona()
    app = public_client(persona.agent.owner)
    _, challenge = pkce()
    page = signed_in(persona.agent.owner).get(
        authorize_query(app, challenge, [resource_url(persona.uuid)])
    )
    assert page.status_code == 200
    assert page.context["persona"] == persona
    assert page.context["title"] == "Grant access to a persona's tools"


@pytest.mark.parametrize("resources", ["other-owner", "none", "absent", "two"])
def test_a_posted_consent_is_refused_as_the_page_would_refuse_it(resources: str) -> None:
    """VX-REMOTE-1, attacker: the consent form posted directly (no page shown first) for
    another owner's persona, for an empty or a missing resource or for two is refused with the
    page's reason, 400, and no code is made."""
    persona = standing_persona()
    owner = persona.agent.owner
    app = public_client(owner)
    theirs = standing_persona(make_owner())
    named = {
        "other-owner": resource_url(theirs.uuid),
        "none": "",
        "absent": None,
        "two": f"{resource_url(persona.uuid)} {resource_url(theirs.uuid)}",
    }[resources]
    _, challenge = pkce()
    form = consent_form(app, challenge, named)
    posted = signed_in(owner).post("/oauth/authorize/", form)
    assert posted.status_code == 400
    assert posted.context["title"] == "Access not granted"
    # An admin page: rendered with the request, the owner signed in shown in its header.
    assert posted.context["user"] == owner
    assert posted.context["reason"] == (
        NOT_THE_OWNER if resources == "other-owner" else ONE_RESOURCE
    )
    assert not Grant.objects.exists()


def consent_form(app: Any, challenge: str, resource: str | None) -> dict[str, str]:
    form = {
        "client_id": app.client_id,
        "redirect_uri": "http://127.0.0.1:8765/callback",
        "response_type": "code",
        "scope": SCOPE,
        "state": "s",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "allow": "Allow",
    }
    return form if resource is None else {**form, "resource": resource}


def test_the_validator_makes_no_code_the_page_would_have_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """VX-REMOTE-1, defence in depth: with the consent page's own check out of the way (as a
    revocation racing the page would put it), the authorization server still makes no code for
    another owner's persona, and tells the client why with its state (RFC 6749 4.1.2.1)."""
    persona = standing_persona()
    owner = persona.agent.owner
    app = public_client(owner)
    theirs = standing_persona(make_owner())
    monkeypatch.setattr(PersonaAuthorizationView, "_refusal", lambda *args: None)
    _, challenge = pkce()
    posted = signed_in(owner).post(
        "/oauth/authorize/", consent_form(app, challenge, resource_url(theirs.uuid))
    )
    assert posted.status_code == 302
    answer = parse_qs(urlsplit(posted["Location"]).query)
    assert answer["error"] == ["invalid_target"]
    assert answer["error_description"] == [NOT_THE_OWNER]
    assert answer["state"] == ["s"]
    assert not Grant.objects.exists()


def test_a_client_set_to_skip_consent_is_refused_both_ways() -> None:
    """VX-REMOTE-1: a client whose skip-authorization flag was set (not through the admin's
    form, which never sets it) gets no code, shown the page or posted to."""
    persona = standing_persona()
    owner = persona.agent.owner
    app = public_client(owner, skip_authorization=True)
    _, challenge = pkce()
    browser = signed_in(owner)
    shown = browser.get(authorize_query(app, challenge, [resource_url(persona.uuid)]))
    posted = browser.post(
        "/oauth/authorize/",
        {"client_id": app.client_id, "resource": resource_url(persona.uuid), "allow": "Allow"},
    )
    for answer in (shown, posted):
        assert answer.status_code == 400 and answer.context["reason"] == SKIPS
    assert not Grant.objects.exists()


def test_a_code_lives_as_the_toolkit_is_set_to_let_it() -> None:
    """VX-REMOTE-1: the code the consent makes expires when the toolkit's setting says."""
    persona = standing_persona()
    app = public_client(persona.agent.owner)
    before = timezone.now()
    consent(signed_in(persona.agent.owner), app, [resource_url(persona.uuid)])
    [grant] = Grant.objects.all()
    assert before + timedelta(seconds=30) < grant.expires < timezone.now() + timedelta(minutes=11)


# Who may be granted what -------------------------------------------------------------------------


def test_grantable_persona_says_exactly_why_not() -> None:
    """VX-REMOTE-1: an inactive owner is no owner; a resource that is no endpoint is named, cut
    at 200 characters; a revoked persona is served to nobody."""
    persona = standing_persona()
    owner = persona.agent.owner
    app = public_client(owner)
    resource = resource_url(persona.uuid)
    assert grantable_persona([resource], owner, app) == persona
    owner.is_active = False
    assert grantable_persona([resource], owner, app) == NOT_THE_OWNER
    owner.is_active = True
    long = "https://elsewhere.example/" + "x" * 300
    assert grantable_persona([long], owner, app) == (
        f"{long[:200]!r} is not the MCP endpoint of a persona of this installation"
    )
    with run_on_commit():
        persona_revoke(persona=persona, actor=owner, reason_code="retired", reason="r", via="t")
    assert grantable_persona([resource], owner, app) == (
        "the persona is revoked: its tools are served to nobody"
    )


# The token endpoint ------------------------------------------------------------------------------


def test_a_refresh_for_a_revoked_persona_is_refused_naming_why() -> None:
    """VX-REMOTE-2: the toolkit settles the refresh's resource, then Virgo refuses it as
    invalid_target with the consent page's reason, as JSON that is never cached."""
    persona = standing_persona()
    app, tokens = granted(persona)
    with run_on_commit():
        persona_revoke(
            persona=persona, actor=persona.agent.owner, reason_code="retired", reason="r", via="t"
        )
    refused = refresh(app, tokens["refresh_token"])
    assert refused.status_code == 400
    assert refused["Content-Type"] == "application/json"
    assert refused["Cache-Control"] == "no-store"
    assert json.loads(refused.content) == {
        "error": "invalid_target",
        "error_description": "the persona is revoked: its tools are served to nobody",
    }


def test_a_flood_of_token_requests_slows_down(settings: Any) -> None:
    """VX-SEC-2: past the per-address budget the token endpoint answers 429 slow_down, saying
    when to come back, never cached; the budget is the token endpoint's own."""
    settings.VIRGO_TOKEN_RATE_LIMIT = "2/m"
    answers = [Client().post("/oauth/token/", {"grant_type": "refresh_token"}) for _ in range(3)]
    assert [answer.status_code for answer in answers[:2]] == [400, 400]
    flooded = answers[2]
    assert flooded.status_code == 429
    assert json.loads(flooded.content) == {
        "error": "slow_down",
        "error_description": "Too many token requests.",
    }
    assert 0 < int(flooded["Retry-After"]) <= 60
    assert flooded["Cache-Control"] == "no-store"


# Who holds a bearer token ------------------------------------------------------------------------


def bearer_for(persona: Any, **fields: Any) -> str:
    """A token of the persona's owner for its endpoint (unless `fields` say otherwise)."""
    raw = f"raw-{persona.uuid}-{len(fields)}"
    token = AccessToken(
        user=fields.pop("user", persona.agent.owner),
        application=fields.pop("application", public_client(persona.agent.owner)),
        resource=fields.pop("resource", [resource_url(persona.uuid)]),
        scope=fields.pop("scope", SCOPE),
        expires=fields.pop("expires", timezone.now() + timedelta(minutes=5)),
    )
    set_token_value(token, raw)
    token.save()
    return raw


def asked(persona: Any, authorization: str | None) -> Refused | AccessToken:
    headers = {"HTTP_AUTHORIZATION": authorization} if authorization is not None else {}
    request = RequestFactory().post(f"/mcp/{persona.uuid}", **headers)
    try:
        return check_access(request, persona)
    except Refused as refused:
        return refused


def test_a_bearer_token_is_checked_in_one_query(django_assert_num_queries: Any) -> None:
    """VX-REMOTE-2: the token, its owner and its client in one query (each call looks it up
    again), and the audit trail names the connection by its client."""
    persona = standing_persona()
    raw = bearer_for(persona)
    request = RequestFactory().post("/", HTTP_AUTHORIZATION=f"bearer {raw}")
    with django_assert_num_queries(1):
        token = check_access(request, persona)
        label = connection_label(token)
    assert label == f"Agent host (OAuth client {token.application.client_id})"


@pytest.mark.parametrize(
    ("case", "status", "error", "reason"),
    [
        ("no header", 401, None, "a bearer token for this persona's endpoint is required"),
        ("basic scheme", 401, None, "a bearer token for this persona's endpoint is required"),
        ("trailing words", 401, "invalid_token", "the token was not issued here, or was revoked"),
        ("unknown", 401, "invalid_token", "the token was not issued here, or was revoked"),
        ("expiring now", 401, "invalid_token", "the token has expired: refresh it"),
        ("other resource", 401, "invalid_token", "the token was issued for another resource"),
        (
            "closed account",
            401,
            "invalid_token",
            "the persona's owner did not grant it, or their account is closed",
        ),
        ("no mcp scope", 403, "insufficient_scope", "the token lacks the mcp scope"),
    ],
)
def test_each_refusal_of_a_bearer_token_is_said_exactly(
    case: str, status: int, error: str | None, reason: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-REMOTE-1, VX-REMOTE-2, attacker: every way a token fails is its own status, RFC 6750
    error and reason; a challenge names the resource metadata and the scope."""
    persona = standing_persona()
    raw = bearer_for(persona)
    header: str | None = f"Bearer {raw}"
    if case == "no header":
        header = None
    elif case == "basic scheme":
        header = f"Basic {raw}"
    elif case == "trailing words":
        header = f"Bearer {raw} extra"
    elif case == "unknown":
        header = "Bearer not-a-token-of-ours"
    elif case == "expiring now":
        now = timezone.now()
        header = f"Bearer {bearer_for(persona, expires=now, scope=SCOPE + ' x')}"
        monkeypatch.setattr(access.timezone, "now", lambda: now)
    elif case == "other resource":
        header = f"Bearer {bearer_for(persona, resource=[resource_url(persona.uuid) + 'x'])}"
    elif case == "closed account":
        persona.agent.owner.is_active = False
        persona.agent.owner.save()
    elif case == "no mcp scope":
        header = f"Bearer {bearer_for(persona, scope='read')}"
    refused = asked(persona, header)
    assert isinstance(refused, Refused)
    assert (refused.status, refused.error, refused.reason) == (status, error, reason)
    challenge = refused.challenge(persona)
    assert challenge.startswith(
        f'Bearer resource_metadata="{metadata_url(persona.uuid)}", scope="{SCOPE}"'
    )
    if error is not None:
        assert challenge.endswith(f'error="{error}", error_description="{reason}"')


def test_only_the_endpoints_own_spelling_names_a_persona(settings: Any) -> None:
    """VX-REMOTE-1: a grant is bound to one exact resource string (RFC 8707), the endpoint's own
    URL: another spelling of the same uuid, which the endpoint would never match, names none."""
    named = uuid.uuid4()
    assert persona_uuid_of(resource_url(named)) == named
    for spelling in (named.hex, str(named).upper(), f"{{{named}}}", f"urn:uuid:{named}"):
        assert persona_uuid_of(f"{settings.VIRGO_PUBLIC_BASE_URL}/mcp/{spelling}") is None


def test_no_user_grants_nothing_and_the_owners_grant_is_one_query(
    django_assert_num_queries: Any,
) -> None:
    """VX-REMOTE-1: a token request with no user behind it is refused as not the owner's; the
    owner's grant is checked with one query, the persona read with its agent."""
    persona = standing_persona()
    owner = persona.agent.owner
    app = public_client(owner)
    resources = [resource_url(persona.uuid)]
    assert grantable_persona(resources, None, app) == NOT_THE_OWNER
    with django_assert_num_queries(1):
        assert grantable_persona(resources, owner, app) == persona
