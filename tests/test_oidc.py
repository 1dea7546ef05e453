"""Owners sign in with OpenID Connect (personas.oidc): the issuer and subject an owner's cards
name come only from an ID token verified against a real provider's keys (VX-ID-1), and no owner
takes another's identity (VX-ID-4).

The provider is real: oidc-provider-mock as its own process on loopback (tests/oidc_support.py),
with registered clients, required nonces and its own signing key. The browser's part (following
redirects, authorizing at the provider) is played with HTTP; tests/test_browser_oidc.py plays it
in Chromium.
"""

import base64
import json
import time
import warnings
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth import get_user_model
from django.test import Client
from jwt.warnings import InsecureKeyLengthWarning

from cards.rendering import IDENTITY_EXTENSION
from personas import oidc
from personas.models import AuditEvent, OwnerIdentity, Persona
from tests.factories import make_agent, make_owner, make_persona, run_on_commit
from tests.oidc_support import Provider, RegisteredClient, issuer_setting
from tests.owner_clients import PASSWORD, fresh_rate_limits  # noqa: F401 (autouse fixture)

# `mutation`: its provider is a process of its own that imports nothing of Virgo.
pytestmark = [pytest.mark.live, pytest.mark.mutation, pytest.mark.django_db]

CALLBACK = "http://testserver/admin/oidc/mock/callback/"
User = get_user_model()


@pytest.fixture
def client_of(oidc_provider: Provider) -> RegisteredClient:
    """Virgo registered with the provider (its callback as redirect URI), as an operator does."""
    return oidc_provider.register(CALLBACK)


@pytest.fixture(autouse=True)
def issuer(
    settings: Any,
    oidc_provider: Provider,
    client_of: RegisteredClient,
) -> Iterator[oidc.Issuer]:
    settings.VIRGO_OIDC_ISSUERS = {"mock": issuer_setting(oidc_provider, client_of)}
    yield oidc.issuer_named("mock")


# The person's part ---------------------------------------------------------------------------


def start(client: Client, url: str = "/admin/oidc/mock/login/?next=/admin/", **post: str) -> str:
    """The client starts a sign-in (GET) or a link (POST): the provider's authorization URL."""
    response = client.post(url, post) if post or "link" in url else client.get(url)
    assert response.status_code == 302, response.content
    return response["Location"]


CALLBACK_REQUEST = "req-oidc-callback"


def come_back(client: Client, location: str) -> Any:
    """The browser follows the provider's redirect back to Virgo's callback (under a request id
    the audit trail should name)."""
    parts = urlsplit(location)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == CALLBACK
    with run_on_commit():
        return client.get(f"{parts.path}?{parts.query}", HTTP_X_REQUEST_ID=CALLBACK_REQUEST)


def the_linking_event(user: Any) -> AuditEvent:
    """VX-AUDIT-1: a proven identity is one "identity linked" naming the account by name,
    through the admin, under the callback's request id."""
    events = list(AuditEvent.objects.filter(kind=AuditEvent.Kind.IDENTITY_LINKED))
    assert len(events) == 1, [(e.actor_name, e.data) for e in events]
    event = events[0]
    assert (event.actor, event.actor_name) == (user, user.username)
    assert (event.channel, event.correlation_id) == ("admin", CALLBACK_REQUEST)
    return event


def sign_in(client: Client, provider: Provider, subject: str) -> Any:
    return come_back(client, provider.authorize(start(client), subject))


def signed_in_user(client: Client) -> Any:
    response = client.get("/admin/")
    assert response.status_code == 200, response.status_code
    return response.wsgi_request.user


def identity_card(persona: Persona, client: Client) -> dict[str, Any]:
    response = client.get(f"/a/{persona.uuid}/.well-known/agent-card.json")
    assert response.status_code == 200, response.content
    extensions = json.loads(response.content)["capabilities"]["extensions"]
    (chain,) = [entry for entry in extensions if entry["uri"] == IDENTITY_EXTENSION]
    return chain["params"]


def refused(response: Any, status: int, *words: str) -> str:
    """A clear page, not a 500: the status, and the reason in words."""
    assert response.status_code == status, (response.status_code, response.content[:400])
    page = response.content.decode()
    assert "Sign-in refused" in page
    for word in words:
        assert word in page, (word, page)
    return page


def nobody_signed_in(client: Client) -> None:
    assert client.get("/admin/").status_code == 302


# Signing in ----------------------------------------------------------------------------------


def test_a_first_sign_in_makes_a_staff_owner_whose_card_names_the_proven_pair(
    oidc_provider: Provider,
) -> None:
    """VX-ID-1: an unlinked (issuer, subject) gets an account of its own: a staff owner named
    after the issuer's host and a digest of the pair, with no usable password, its display name
    from the ID token's name claim, its issuer and subject those of the verified ID token, proven
    since now and audited once, by the new account's name through the callback (VX-AUDIT-1).
    The session it gets works in the admin and the API, and the card of
    a persona it makes names the issuer and subject as proven by oidc."""
    oidc_provider.set_claims("alice-sub", name="Alice Example", email="alice@example.org")
    client = Client()
    response = sign_in(client, oidc_provider, "alice-sub")
    assert (response.status_code, response["Location"]) == (302, "/admin/")

    user = signed_in_user(client)
    assert user.username.startswith("127.0.0.1-")
    assert user.is_staff and not user.is_superuser and not user.has_usable_password()
    assert user.email == ""  # the account is the pair's; an e-mail address matches nothing
    identity = OwnerIdentity.objects.get(user=user)
    assert (identity.display_name, identity.identity_issuer, identity.identity_subject) == (
        "Alice Example",
        oidc_provider.issuer,
        "alice-sub",
    )
    assert identity.identity_verified_at is not None
    event = the_linking_event(user)
    assert event.data == {"issuer": oidc_provider.issuer, "subject": "alice-sub", "replaced": None}

    # The session is an ordinary Django session: DRF's SessionAuthentication takes it.
    assert client.get("/api/agents/").status_code == 200
    persona = make_persona(make_agent(user))
    owner = identity_card(persona, client)["owner"]
    assert owner == {
        "issuer": oidc_provider.issuer,
        "subject": "alice-sub",
        "subjectType": "public",
        "verification": "oidc",
        "verifiedAt": identity.identity_verified_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def test_signing_in_again_signs_in_the_same_account_and_changes_no_card(
    oidc_provider: Provider,
) -> None:
    """VX-ID-1: a linked pair signs in to its account; the proof keeps its first date, nothing
    is audited again and no persona of the owner gets a new generation (cards do not churn)."""
    first = Client()
    sign_in(first, oidc_provider, "bob-sub")
    bob = signed_in_user(first)
    persona = make_persona(make_agent(bob))
    proven_since = OwnerIdentity.objects.get(user=bob).identity_verified_at

    again = Client()
    response = sign_in(again, oidc_provider, "bob-sub")
    assert response.status_code == 302
    assert signed_in_user(again) == bob
    assert User.objects.filter(username__startswith="127.0.0.1-").count() == 1
    assert OwnerIdentity.objects.get(user=bob).identity_verified_at == proven_since
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.IDENTITY_LINKED).count() == 1
    assert Persona.objects.get(pk=persona.pk).generation == persona.generation


def test_an_unlinked_sign_in_with_an_accounts_email_makes_a_new_account_not_a_merge(
    oidc_provider: Provider,
) -> None:
    """VX-ID-1, VX-ID-4: an ID token naming the e-mail address (and the name) of an existing
    password owner signs in to a new account of its own; the existing owner's account and
    identity are untouched, and their cards name no proven subject."""
    carol = make_owner("carol", oidc=False)
    carol.email = "carol@example.org"
    carol.save()
    oidc_provider.set_claims(
        "carol-at-idp", name="Carol", email="carol@example.org", email_verified=True
    )
    client = Client()
    sign_in(client, oidc_provider, "carol-at-idp")
    someone = signed_in_user(client)
    assert someone != carol
    carol_identity = OwnerIdentity.objects.get(user=carol)
    assert carol_identity.identity_verified_at is None
    assert carol_identity.identity_subject != "carol-at-idp"
    assert OwnerIdentity.objects.get(user=someone).identity_subject == "carol-at-idp"


# Linking ---------------------------------------------------------------------------------------


def password_session(user: Any) -> Client:
    client = Client(enforce_csrf_checks=True)
    assert client.login(username=user.get_username(), password=PASSWORD)
    return client


def csrf_of(client: Client) -> str:
    page = client.get("/admin/oidc/")
    assert page.status_code == 200
    return client.cookies["csrftoken"].value


def test_a_password_owner_links_the_identity_and_their_cards_follow(
    oidc_provider: Provider,
) -> None:
    """VX-ID-1: a signed-in password owner links explicitly (a POST with CSRF from their
    OpenID Connect page); the proven pair is attached to that account, audited once as an
    identity linked by dora through the admin's callback (VX-AUDIT-1), and every card
    of theirs is republished naming it. Later, signing in with the issuer signs in to that
    account."""
    dora = make_owner("dora", oidc=False)
    persona = make_persona(make_agent(dora))
    assert identity_card(persona, password_session(dora))["owner"] == {"verification": "unverified"}
    client = password_session(dora)
    page = client.get("/admin/oidc/").content.decode()
    assert "No OpenID Connect identity is linked" in page and "Link Mock ID" in page
    assert client.post("/admin/oidc/mock/link/").status_code == 403  # no CSRF token: refused

    location = start(client, "/admin/oidc/mock/link/", csrfmiddlewaretoken=csrf_of(client))
    response = come_back(client, oidc_provider.authorize(location, "dora-sub"))
    assert (response.status_code, response["Location"]) == (302, "/admin/oidc/")
    page = client.get("/admin/oidc/").content.decode()
    assert "Your account is linked to Mock ID" in page  # the message, once
    assert f"linked to <strong>{oidc_provider.issuer}</strong>, subject <code>dora-sub" in page
    assert signed_in_user(client) == dora

    identity = OwnerIdentity.objects.get(user=dora)
    assert (identity.identity_issuer, identity.identity_subject) == (
        oidc_provider.issuer,
        "dora-sub",
    )
    assert identity.display_name == "Dora"  # linking proves the pair; it renames nobody
    assert the_linking_event(dora).data["subject"] == "dora-sub"
    assert Persona.objects.get(pk=persona.pk).generation == persona.generation + 1
    owner = identity_card(persona, client)["owner"]
    assert (owner["issuer"], owner["subject"], owner["verification"]) == (
        oidc_provider.issuer,
        "dora-sub",
        "oidc",
    )

    later = Client()
    sign_in(later, oidc_provider, "dora-sub")
    assert signed_in_user(later) == dora


def test_linking_an_identity_that_is_another_accounts_is_refused(
    oidc_provider: Provider,
) -> None:
    """VX-ID-1, VX-ID-4: a pair that already signs in to one account cannot be linked to
    another: the link ends on a page saying so, and neither account's identity changes."""
    first = Client()
    sign_in(first, oidc_provider, "erin-sub")
    erin = signed_in_user(first)
    mallory = make_owner("mallory", oidc=False)

    client = password_session(mallory)
    location = start(client, "/admin/oidc/mock/link/", csrfmiddlewaretoken=csrf_of(client))
    response = come_back(client, oidc_provider.authorize(location, "erin-sub"))
    refused(response, 403, "already linked to another Virgo account")
    assert signed_in_user(client) == mallory
    assert OwnerIdentity.objects.get(user=mallory).identity_verified_at is None
    assert OwnerIdentity.objects.get(user=erin).identity_subject == "erin-sub"
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.IDENTITY_LINKED).count() == 1


def test_a_link_finishes_only_for_the_account_that_started_it(
    oidc_provider: Provider,
) -> None:
    """VX-ID-1, VX-ID-4: a link started by one account and answered while another is signed in
    in the same browser links nothing, to either account."""
    frank = make_owner("frank", oidc=False)
    grace = make_owner("grace", oidc=False)
    client = password_session(frank)
    location = start(client, "/admin/oidc/mock/link/", csrfmiddlewaretoken=csrf_of(client))
    answer = oidc_provider.authorize(location, "frank-sub")
    client.logout()
    assert client.login(username="grace", password=PASSWORD)
    # The session was replaced at sign-in: the started link is no longer this browser's.
    refused(come_back(client, answer), 400, "Start the sign-in again")
    for owner in (frank, grace):
        assert OwnerIdentity.objects.get(user=owner).identity_verified_at is None


# Refused ID tokens -----------------------------------------------------------------------------


def client_for(issuer: oidc.Issuer) -> oidc.IssuerClient:
    return oidc.IssuerClient(issuer)


def forged_token(claims: dict[str, Any], *, kid: str) -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})


def good_claims(provider: Provider, client: RegisteredClient, **changes: Any) -> dict[str, Any]:
    now = int(time.time())
    claims = {
        "iss": provider.issuer,
        "sub": "victim-sub",
        "aud": [client.client_id],
        "iat": now,
        "exp": now + 600,
        "nonce": "the-nonce",
    }
    claims.update(changes)
    return claims


def test_a_token_signed_by_another_key_is_refused(
    oidc_provider: Provider,
    client_of: RegisteredClient,
    issuer: oidc.Issuer,
) -> None:
    """VX-ID-1: an ID token with every claim right but signed by a key the issuer does not
    hold is refused by the library's verification against the issuer's real JWKS, whether it
    names the issuer's key id or another."""
    (published,) = oidc_provider.jwks()["keys"]
    claims = good_claims(oidc_provider, client_of)
    verifier = client_for(issuer)
    with pytest.raises(oidc.SignInRefused, match="signature does not verify"):
        verifier.verify_token(forged_token(claims, kid=published["kid"]), nonce="the-nonce")
    with pytest.raises(oidc.SignInRefused, match="key Mock ID does not publish"):
        verifier.verify_token(forged_token(claims, kid="not-the-issuers"), nonce="the-nonce")


def test_unsigned_and_secret_keyed_tokens_are_refused(
    oidc_provider: Provider,
    client_of: RegisteredClient,
    issuer: oidc.Issuer,
) -> None:
    """VX-ID-1: `alg: none`, and a MAC keyed with the client secret (which anyone holding it
    could forge), are no signature of the issuer's."""
    (published,) = oidc_provider.jwks()["keys"]
    claims = good_claims(oidc_provider, client_of)
    header = {"alg": "none", "kid": published["kid"], "typ": "JWT"}
    unsigned = ".".join(
        base64.urlsafe_b64encode(json.dumps(part).encode()).rstrip(b"=").decode()
        for part in (header, claims)
    )
    with warnings.catch_warnings():  # the secret is short for a MAC key: beside the point
        warnings.simplefilter("ignore", InsecureKeyLengthWarning)
        keyed = jwt.encode(
            claims, client_of.client_secret, algorithm="HS256", headers={"kid": published["kid"]}
        )
    verifier = client_for(issuer)
    for token in (unsigned + ".", keyed):
        with pytest.raises(oidc.SignInRefused, match="signed with"):
            verifier.verify_token(token, nonce="the-nonce")


def test_a_token_issued_to_another_client_is_refused(
    oidc_provider: Provider,
    issuer: oidc.Issuer,
) -> None:
    """VX-ID-1: a real ID token of this issuer, signed with its key, but issued to another
    client (its audience) is refused."""
    other = oidc_provider.register("http://elsewhere.example/callback")
    token = oidc_provider.id_token(
        other, "http://elsewhere.example/callback", "victim-sub", nonce="the-nonce"
    )
    with pytest.raises(oidc.SignInRefused, match="issued to another client"):
        client_for(issuer).verify_token(token, nonce="the-nonce")


def test_a_token_with_another_nonce_is_refused(
    oidc_provider: Provider,
    client_of: RegisteredClient,
    issuer: oidc.Issuer,
) -> None:
    """VX-ID-1: a real ID token for this client, but carrying another sign-in's nonce (a
    replayed token), is refused, at the verification step and through the callback."""
    token = oidc_provider.id_token(client_of, CALLBACK, "victim-sub", nonce="an-old-nonce")
    with pytest.raises(oidc.SignInRefused, match="nonce"):
        client_for(issuer).verify_token(token, nonce="this-sign-ins-nonce")

    browser = Client()
    location = start(browser)
    state = dict(browser.session["oidc_states"])
    (flow,) = state.values()
    flow["nonce"] = "not-what-the-provider-was-sent"
    session = browser.session
    session["oidc_states"] = state
    session.save()
    response = come_back(browser, oidc_provider.authorize(location, "victim-sub"))
    refused(response, 403, "nonce")
    nobody_signed_in(browser)
    assert not OwnerIdentity.objects.filter(identity_subject="victim-sub").exists()


def test_an_expired_token_is_refused(
    settings: Any,
    expired_tokens_provider: Provider,
) -> None:
    """VX-ID-1: a real ID token of an issuer, right in every other way but expired, is refused,
    at the verification step and through the callback."""
    registered = expired_tokens_provider.register(CALLBACK)
    settings.VIRGO_OIDC_ISSUERS = {"mock": issuer_setting(expired_tokens_provider, registered)}
    token = expired_tokens_provider.id_token(registered, CALLBACK, "late-sub", nonce="n")
    with pytest.raises(oidc.SignInRefused, match="expired"):
        client_for(oidc.issuer_named("mock")).verify_token(token, nonce="n")

    browser = Client()
    refused(sign_in(browser, expired_tokens_provider, "late-sub"), 403, "expired")
    nobody_signed_in(browser)
    assert not OwnerIdentity.objects.filter(identity_subject="late-sub").exists()


# Answers that cannot finish a sign-in ------------------------------------------------------------


def test_callbacks_without_a_usable_state_or_code_end_on_a_clear_page(
    oidc_provider: Provider,
) -> None:
    """VX-ID-1: a callback with no state or code, a garbled or unknown state, a garbled code,
    an answer used twice: each is a page saying why (400), never a 500, and nobody is signed
    in."""
    browser = Client()
    refused(browser.get("/admin/oidc/mock/callback/"), 400, "lacks its code or its state")
    refused(browser.get("/admin/oidc/mock/callback/?code=abc"), 400, "Start the sign-in again")
    refused(browser.get("/admin/oidc/mock/callback/?code=abc&state=%00%ff"), 400, "state")

    start(browser)  # a started flow: its state is in the session
    (state,) = browser.session["oidc_states"]
    page = browser.get(f"/admin/oidc/mock/callback/?state={state}&code=garbled")
    refused(page, 400, "refused the sign-in code", "invalid_grant")

    answer = oidc_provider.authorize(start(browser), "henry-sub")
    assert come_back(browser, answer).status_code == 302
    browser.logout()
    refused(come_back(browser, answer), 400, "was used already")
    nobody_signed_in(browser)


def test_a_wrong_client_secret_ends_on_a_clear_page(
    settings: Any, oidc_provider: Provider, client_of: RegisteredClient
) -> None:
    """VX-ID-1: the provider checks the client secret Virgo was configured with: a wrong one
    gets no token, and the page names the provider's refusal."""
    wrong = issuer_setting(oidc_provider, client_of)
    wrong["client_secret"] = "not-the-secret"
    settings.VIRGO_OIDC_ISSUERS = {"mock": wrong}
    browser = Client()
    refused(sign_in(browser, oidc_provider, "ivan-sub"), 400, "invalid_client")
    nobody_signed_in(browser)


def test_an_error_from_the_provider_ends_on_a_clear_page(
    oidc_provider: Provider,
) -> None:
    """VX-ID-1: the person declines at the provider: Virgo's page names the provider's error."""
    browser = Client()
    response = come_back(browser, oidc_provider.deny(start(browser)))
    refused(response, 400, "access_denied", "Nobody was signed in")
    nobody_signed_in(browser)


def test_an_issuer_that_cannot_be_reached_or_is_unknown_ends_on_a_clear_page(
    settings: Any,
    oidc_provider: Provider,
    client_of: RegisteredClient,
) -> None:
    """VX-ID-1: an issuer whose discovery cannot be fetched is a 502 page naming it; an issuer
    this installation does not know is a 404."""
    gone = issuer_setting(oidc_provider, client_of, name="gone", label="Gone ID")
    gone["discovery_url"] = "http://127.0.0.1:9/.well-known/openid-configuration"
    settings.VIRGO_OIDC_ISSUERS = {**settings.VIRGO_OIDC_ISSUERS, "gone": gone}
    browser = Client()
    refused(browser.get("/admin/oidc/gone/login/"), 502, "Gone ID could not be reached")
    assert browser.get("/admin/oidc/nobody/login/").status_code == 404
    assert browser.get("/admin/oidc/nobody/callback/?code=a&state=b").status_code == 404


# Admission (VX-ID-5) -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("admit", "domains", "claims", "status", "words"),
    [
        ("none", (), {}, 403, ("admits no new account on its own",)),
        ("approval", (), {}, 403, ("waits for an administrator",)),
        ("domains", ("corp.example",), {"email": "kim@other.example", "email_verified": True},
         403, ("admits no new account on its own",)),
    ],
)  # fmt: skip
def test_an_issuer_admits_a_new_identity_only_by_its_rule(
    settings: Any,
    oidc_provider: Provider,
    client_of: RegisteredClient,
    admit: str,
    domains: tuple[str, ...],
    claims: dict[str, Any],
    status: int,
    words: tuple[str, ...],
) -> None:
    """VX-ID-5: through the real provider, a subject with no account at an issuer that admits no
    one (the default), awaits approval, or is outside its domains, is not signed in; awaiting
    approval leaves an inactive account a superuser can activate, the others none."""
    settings.VIRGO_OIDC_ISSUERS = {
        "mock": issuer_setting(oidc_provider, client_of, admit=admit, allowed_domains=domains)
    }
    subject = f"newcomer-{admit}"
    oidc_provider.set_claims(subject, **claims)
    users = get_user_model().objects
    before = users.count()
    client = Client()
    refused(sign_in(client, oidc_provider, subject), status, *words)
    nobody_signed_in(client)
    made = users.count() - before
    assert made == (1 if admit == "approval" else 0)
    if admit == "approval":
        waiting = users.latest("pk")
        assert not waiting.is_active
        waiting.is_active = True
        waiting.save()
        sign_in(client, oidc_provider, subject)
        assert signed_in_user(client) == waiting


def test_an_issuer_admits_its_verified_domain(
    settings: Any, oidc_provider: Provider, client_of: RegisteredClient
) -> None:
    """VX-ID-5: a verified address in an allowed domain gets its owner account at once."""
    settings.VIRGO_OIDC_ISSUERS = {
        "mock": issuer_setting(
            oidc_provider, client_of, admit="domains", allowed_domains=("corp.example",)
        )
    }
    oidc_provider.set_claims("kim-at-corp", email="kim@corp.example", email_verified=True)
    client = Client()
    sign_in(client, oidc_provider, "kim-at-corp")
    assert signed_in_user(client).is_staff
