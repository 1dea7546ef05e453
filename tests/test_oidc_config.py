"""OpenID Connect without a provider process: how issuers are configured (a client secret from
the environment or an owner-private file), which discovery documents are refused, the login
page's buttons, the issuer and subject that no typed text can set, and (with a small issuer in
this process) an ID token refused on a clear page (VX-ID-1)."""

import html
import json
import logging
import os
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.test import Client

from personas import oidc, services
from personas.admin.audit import describe_audit
from personas.models import AuditEvent, OwnerIdentity
from tests.deploy_support import manage, production_env
from tests.factories import make_owner, run_on_commit
from tests.owner_clients import form_data, fresh_rate_limits  # noqa: F401 (autouse fixture)
from virgo.settings import env_oidc_issuer

DISCOVERY = "https://id.example.org/.well-known/openid-configuration"


@pytest.fixture
def corp_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith("VIRGO_OIDC_CORP_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("VIRGO_OIDC_CORP_DISCOVERY_URL", DISCOVERY)
    monkeypatch.setenv("VIRGO_OIDC_CORP_CLIENT_ID", "virgo")
    return monkeypatch


def test_an_issuer_is_read_from_its_variables(corp_env: pytest.MonkeyPatch) -> None:
    """VX-ID-1: discovery URL, client id, client secret, the button's label (by default the
    issuer's host) and the scopes asked for."""
    corp_env.setenv("VIRGO_OIDC_CORP_CLIENT_SECRET", "s3cret")
    assert env_oidc_issuer("corp") == {
        "name": "corp",
        "label": "id.example.org",
        "discovery_url": DISCOVERY,
        "client_id": "virgo",
        "client_secret": "s3cret",
        "scopes": "openid profile",
        "admit": "none",
        "allowed_domains": [],
    }
    corp_env.setenv("VIRGO_OIDC_CORP_LABEL", "Example Corp")
    assert env_oidc_issuer("corp")["label"] == "Example Corp"


def test_a_client_secret_file_must_be_owner_private(
    corp_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """VX-ID-1: the secret may come from a file; one that others may read is refused with one
    line naming the variable and the fix, before any secret is used."""
    secret = tmp_path / "corp-secret"
    secret.write_text("from-a-file\n")
    secret.chmod(0o600)
    corp_env.setenv("VIRGO_OIDC_CORP_CLIENT_SECRET_FILE", str(secret))
    assert env_oidc_issuer("corp")["client_secret"] == "from-a-file"

    secret.chmod(0o644)
    with pytest.raises(
        ImproperlyConfigured,
        match=r"^VIRGO_OIDC_CORP_CLIENT_SECRET_FILE: .* not owner-private .*`chmod 600 ",
    ):
        env_oidc_issuer("corp")
    secret.chmod(0o600)
    corp_env.setenv("VIRGO_OIDC_CORP_CLIENT_SECRET", "and-in-the-environment")
    with pytest.raises(ImproperlyConfigured, match=r"set either it or .*_FILE"):
        env_oidc_issuer("corp")


@pytest.mark.parametrize(
    ("variable", "value", "words"),
    [
        ("VIRGO_OIDC_CORP_DISCOVERY_URL", DISCOVERY.replace("https:", "http:"), "loopback"),
        ("VIRGO_OIDC_CORP_DISCOVERY_URL", "https://id.example.org/", "discovery URL"),
        ("VIRGO_OIDC_CORP_CLIENT_ID", "", "CLIENT_ID: not set"),
        ("VIRGO_OIDC_CORP_CLIENT_SECRET", "", "set either it or"),
    ],
)
def test_an_unusable_issuer_setting_is_one_line_naming_it(
    corp_env: pytest.MonkeyPatch, variable: str, value: str, words: str
) -> None:
    """VX-ID-1: an issuer over plain http (other than on loopback), a URL that is no discovery
    URL, a missing client id or secret: each refused, naming the variable."""
    corp_env.setenv("VIRGO_OIDC_CORP_CLIENT_SECRET", "s3cret")
    corp_env.setenv(variable, value)
    with pytest.raises(ImproperlyConfigured, match=words) as refused:
        env_oidc_issuer("corp")
    assert str(refused.value).startswith(variable + ": ")
    with pytest.raises(ImproperlyConfigured, match="VIRGO_OIDC_ISSUERS: 'Corp!'"):
        env_oidc_issuer("Corp!")


def test_a_discovery_document_must_name_the_issuer_it_is_under() -> None:
    """VX-ID-1: a discovery document claiming another issuer (or no signing algorithm Virgo
    accepts) is refused, so no token is ever checked against the wrong issuer."""
    issuer = oidc.Issuer("corp", "Corp", DISCOVERY, "virgo", "s", "openid")
    document = {
        "issuer": "https://id.example.org",
        "authorization_endpoint": "https://id.example.org/authorize",
        "token_endpoint": "https://id.example.org/token",
        "jwks_uri": "https://id.example.org/jwks",
    }
    oidc._check_discovery(issuer, document)
    with pytest.raises(oidc.SignInRefused, match=r"names the issuer 'https://evil\.example'"):
        oidc._check_discovery(issuer, {**document, "issuer": "https://evil.example"})
    with pytest.raises(oidc.SignInRefused, match="signs ID tokens with none of"):
        oidc._check_discovery(
            issuer, {**document, "id_token_signing_alg_values_supported": ["HS256", "none"]}
        )


DOCUMENT = {
    "issuer": "https://id.example.org",
    "authorization_endpoint": "https://id.example.org/authorize",
    "token_endpoint": "https://id.example.org/token",
    "jwks_uri": "https://id.example.org/jwks",
}


@pytest.mark.parametrize(
    ("document", "why"),
    [
        (["not", "an", "object"], "its discovery document is not a JSON object"),
        (
            {**DOCUMENT, "token_endpoint": "ftp://id.example.org/token"},
            "token_endpoint is not a URL",
        ),
        ({**DOCUMENT, "jwks_uri": "/jwks"}, "jwks_uri is not a URL"),
        ({**DOCUMENT, "authorization_endpoint": None}, "authorization_endpoint is not a URL"),
        (
            {**DOCUMENT, "id_token_signing_alg_values_supported": ["HS256"]},
            "it signs ID tokens with none of RS256, RS384, RS512, ES256, ES384, ES512",
        ),
    ],
)
def test_an_unusable_discovery_document_is_the_issuers_fault_named(
    document: Any, why: str, caplog: pytest.LogCaptureFixture
) -> None:
    """VX-ID-1: a discovery document Virgo cannot use ends the sign-in on a 502 (the issuer's
    fault, not the person's) that says what is wrong and whom to tell, and the operator's log
    names the issuer and the defect."""
    issuer = oidc.Issuer("corp", "Corp", DISCOVERY, "virgo", "s", "openid")
    with (
        caplog.at_level(logging.WARNING, logger="personas.oidc"),
        pytest.raises(oidc.SignInRefused) as refused,
    ):
        oidc._check_discovery(issuer, document)
    assert refused.value.status == 502
    assert refused.value.reason == (
        f"Corp's configuration cannot be used ({why}); tell this installation's operator."
    )
    logged = [record.getMessage() for record in caplog.records if record.name == "personas.oidc"]
    assert logged == [f"OpenID Connect discovery of corp unusable: {why}"]


# A refused ID token, with no provider process -------------------------------------------------


@pytest.fixture
def unpublished_key_issuer(settings: Any) -> Iterator[str]:
    """An issuer in this process, on loopback, configured as `local`: its discovery document,
    a token endpoint answering every code with an ID token, and a JWKS that lacks the key the
    token names. The ID token is the issuer's alone; what it is signed with, nobody published."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    id_token = jwt.encode({"sub": "x"}, key, algorithm="RS256", headers={"kid": "unpublished"})
    answers: dict[str, Callable[[str], dict[str, Any]]] = {
        oidc.DISCOVERY_PATH: lambda base: {
            "issuer": base,
            "authorization_endpoint": f"{base}/authorize",
            "token_endpoint": f"{base}/token",
            "jwks_uri": f"{base}/jwks",
        },
        "/token": lambda base: {"id_token": id_token, "access_token": "a", "token_type": "Bearer"},
        "/jwks": lambda base: {"keys": []},
    }

    class Handler(BaseHTTPRequestHandler):
        def answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            base = f"http://127.0.0.1:{self.server.server_address[1]}"
            body = json.dumps(answers[urlsplit(self.path).path](base)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = answer

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    settings.VIRGO_OIDC_ISSUERS = {
        "local": {
            "name": "local",
            "label": "Local ID",
            "discovery_url": base + oidc.DISCOVERY_PATH,
            "client_id": "virgo",
            "client_secret": "s3cret",
            "scopes": "openid profile",
        }
    }
    try:
        yield base
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.django_db
@pytest.mark.mutation
@pytest.mark.live
def test_an_id_token_signed_with_an_unpublished_key_is_refused_on_a_clear_page(
    unpublished_key_issuer: str,
) -> None:
    """VX-ID-1: an ID token signed with a key its issuer does not publish signs nobody in: the
    answer ends on a 403 page saying so (not a 500, not a 404). The issuer is on loopback over
    plain http, as a development issuer may be: its http endpoints are used as they are."""
    browser = Client()
    started = browser.get("/admin/oidc/local/login/")
    assert started.status_code == 302, started.content
    assert started["Location"].startswith(f"{unpublished_key_issuer}/authorize?")
    (state,) = parse_qs(urlsplit(started["Location"]).query)["state"]
    response = browser.get(f"/admin/oidc/local/callback/?state={state}&code=a-code")
    assert response.status_code == 403, response.content[:400]
    page = html.unescape(response.content.decode())
    assert "Sign-in refused" in page
    assert "The ID token is signed with a key Local ID does not publish." in page
    assert "_auth_user_id" not in browser.session


# The admin ------------------------------------------------------------------------------------


def configured(settings: Any) -> None:
    settings.VIRGO_OIDC_ISSUERS = {
        name: {
            "name": name,
            "label": label,
            "discovery_url": f"https://{name}.example.org{oidc.DISCOVERY_PATH}",
            "client_id": "virgo",
            "client_secret": "s3cret",
            "scopes": "openid profile",
        }
        for name, label in (("corp", "Example Corp"), ("google", "Google"))
    }


@pytest.mark.django_db
def test_the_login_page_has_a_button_per_issuer(settings: Any) -> None:
    """VX-ID-1: one "Sign in with <issuer>" per configured issuer, carrying where the sign-in
    was headed; without issuers, the password form alone (the embedded default)."""
    page = Client().get("/admin/login/?next=/admin/personas/").content.decode()
    assert "Sign in with" not in page
    configured(settings)
    page = Client().get("/admin/login/?next=/admin/personas/").content.decode()
    assert 'href="/admin/oidc/corp/login/?next=/admin/personas/">Sign in with Example Corp' in page
    assert 'href="/admin/oidc/google/login/?next=/admin/personas/">Sign in with Google' in page
    assert 'id="login-form"' in page


@pytest.mark.django_db
def test_the_link_page_is_for_signed_in_owners(settings: Any) -> None:
    """VX-ID-1: the OpenID Connect page (linked from every admin page) needs a signed-in owner,
    and a link is started only by a POST."""
    configured(settings)
    assert Client().get("/admin/oidc/")["Location"] == "/admin/login/?next=/admin/oidc/"
    client = Client()
    client.force_login(make_owner("ada", oidc=False))
    assert 'href="/admin/oidc/">OpenID Connect</a>' in client.get("/admin/").content.decode()
    page = client.get("/admin/oidc/").content.decode()
    assert 'action="/admin/oidc/corp/link/"' in page and 'value="Link Google"' in page
    assert client.get("/admin/oidc/corp/link/").status_code == 405


# Typed text proves nothing ------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_issuer_and_subject_typed_into_the_admin_form_are_ignored() -> None:
    """VX-ID-1, VX-ID-4: the owner's identity form has no issuer or subject; posted anyway,
    they change nothing, and the card still names no proven subject."""
    owner = make_owner("ada", oidc=False)
    client = Client()
    client.force_login(owner)
    url = f"/admin/personas/owneridentity/{owner.identity.pk}/change/"
    page = client.get(url)
    assert page.status_code == 200
    data = form_data(page, "owneridentity_form")
    assert not {"identity_issuer", "identity_subject", "identity_verified_at"} & set(data)
    data.update(
        display_name="Ada L.",
        identity_issuer="https://accounts.google.com",
        identity_subject="someone-elses-subject",
        identity_verified_at="2026-01-01 00:00:00",
        _save="Save",
    )
    with run_on_commit():
        assert client.post(url, data).status_code == 302
    identity = OwnerIdentity.objects.get(user=owner)
    assert identity.display_name == "Ada L."
    assert identity.identity_verified_at is None
    assert identity.identity_subject != "someone-elses-subject"


@pytest.mark.django_db
def test_no_write_but_a_verified_sign_in_sets_the_issuer_and_subject() -> None:
    """VX-ID-1, VX-ID-4: the owner's write refuses the issuer and subject (the API and the
    admin have no other), and the API's schema offers them nowhere."""
    owner = make_owner("ada", oidc=False)
    for field in ("identity_issuer", "identity_subject", "identity_verified_at"):
        with pytest.raises(ValidationError, match="not the owner's to write"):
            services.owner_identity_update(user=owner, **{field: "https://id.example.org/"})
    assert OwnerIdentity.objects.get(user=owner).identity_verified_at is None
    client = Client()
    client.force_login(owner)
    schema = client.get("/api/schema/?format=json").content.decode()
    assert "identity_issuer" not in schema and "identity_subject" not in schema


@pytest.mark.django_db
def test_a_proven_pair_is_recorded_once_and_belongs_to_one_owner() -> None:
    """VX-ID-1, VX-ID-4: the write behind a verified sign-in: the first proof sets the date and
    is audited; the same pair again changes nothing; another owner's pair is refused."""
    ada = make_owner("ada", oidc=False)
    bob = make_owner("bob", oidc=False)
    first = services.identity_proven(user=ada, issuer="https://id.example.org", subject="a-1")
    since = first.identity_verified_at
    assert since is not None
    again = services.identity_proven(user=ada, issuer="https://id.example.org", subject="a-1")
    assert again.identity_verified_at == since
    (event,) = AuditEvent.objects.filter(kind=AuditEvent.Kind.IDENTITY_LINKED)
    assert describe_audit(event) == "OpenID Connect https://id.example.org subject a-1 proven"
    with pytest.raises(ValidationError, match="already linked to another Virgo account"):
        services.identity_proven(user=bob, issuer="https://id.example.org", subject="a-1")
    assert OwnerIdentity.objects.get(user=bob).identity_verified_at is None
    with pytest.raises(ValidationError, match="a subject of 1 to 255"):
        services.identity_proven(user=bob, issuer="https://id.example.org", subject="x" * 256)


# Deployed ---------------------------------------------------------------------------------------


@pytest.mark.live
def test_production_settings_with_an_issuer_pass_the_deploy_checks(tmp_path: Path) -> None:
    """VX-ID-1: an issuer configured with its secret in an owner-private file leaves the
    production settings passing `check --deploy` with nothing silenced; the same file readable
    by others stops `manage.py` with one line naming the variable (exit status 2)."""
    secret = tmp_path / "corp-secret"
    secret.write_text("s3cret\n")
    secret.chmod(0o600)
    env = production_env(
        # A database it can reach (the one in VIRGO_HOME): `check` fails without one (VX-OPS-7).
        VIRGO_HOME=str(tmp_path),
        VIRGO_OIDC_ISSUERS="corp",
        VIRGO_OIDC_CORP_DISCOVERY_URL=DISCOVERY,
        VIRGO_OIDC_CORP_CLIENT_ID="virgo",
        VIRGO_OIDC_CORP_CLIENT_SECRET_FILE=str(secret),
    )
    done = manage("check", "--deploy", "--fail-level", "WARNING", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    # One warning is silenced, and it alone (decision 276): the toolkit's about allowing http
    # redirects at all, which agent hosts' loopback redirects need and serving.admin confines.
    assert "System check identified no issues (1 silenced)." in done.stdout

    secret.chmod(0o640)
    refused = manage("check", "--deploy", env=env)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("manage.py: VIRGO_OIDC_CORP_CLIENT_SECRET_FILE: ")
    assert f"`chmod 600 {secret}`" in line


def test_an_issuer_admits_no_one_new_unless_told_and_says_how_to_tell_it(
    corp_env: pytest.MonkeyPatch,
) -> None:
    """VX-ID-5: the default rule is `none`; `domains` needs its domains (and asks for the e-mail
    scope it reads), the domains need that rule, and an unknown rule is one line naming both."""
    corp_env.setenv("VIRGO_OIDC_CORP_CLIENT_SECRET", "s3cret")
    assert env_oidc_issuer("corp")["admit"] == "none"
    corp_env.setenv("VIRGO_OIDC_CORP_ADMIT", "domains")
    with pytest.raises(ImproperlyConfigured, match=r"^VIRGO_OIDC_CORP_ALLOWED_DOMAINS: set it"):
        env_oidc_issuer("corp")
    corp_env.setenv("VIRGO_OIDC_CORP_ALLOWED_DOMAINS", "Example.org, corp.example")
    issuer = env_oidc_issuer("corp")
    assert (issuer["admit"], issuer["allowed_domains"]) == (
        "domains",
        ["example.org", "corp.example"],
    )
    assert issuer["scopes"] == "openid profile email"
    corp_env.setenv("VIRGO_OIDC_CORP_ADMIT", "approval")
    with pytest.raises(ImproperlyConfigured, match="and only then"):
        env_oidc_issuer("corp")
    corp_env.setenv("VIRGO_OIDC_CORP_ADMIT", "anyone")
    with pytest.raises(ImproperlyConfigured) as refused:
        env_oidc_issuer("corp")
    assert str(refused.value).startswith(
        "VIRGO_OIDC_CORP_ADMIT: 'anyone' is not an admission rule; one of none, domains, "
        "approval, everyone"
    )
