"""Owners sign in with OpenID Connect; a password owner links an issuer's identity (VX-ID-1).

The protocol is mozilla-django-oidc's (decision 175): its request view makes the authorization
request (state, nonce and PKCE kept in the session), its backend exchanges the code at the
issuer's token endpoint, picks the signing key from the issuer's JWKS and checks the nonce, and
its callback view signs the account in. Virgo adds what the library leaves to its users:

- one client per issuer of settings.VIRGO_OIDC_ISSUERS (virgo.settings.env_oidc_issuer), its
  endpoints read from the issuer's discovery document, whose `issuer` must be the URL it was
  fetched under; each issuer has its own redirect URI, so an answer is only ever taken for the
  issuer the flow was started with (the mix-up defence of RFC 9700);
- the ID token checks the library skips (`_verify_jws`): an asymmetric algorithm the issuer
  publishes, the signature, `aud` naming this client (and `azp` when it names others too),
  `iss` the issuer, `exp` and `iat` (with VIRGO_OIDC_LEEWAY_SECONDS of clock skew), and a `sub`;
- the account rule (personas.services.identity_signin, decision 176) in place of the library's
  user matching, which takes the account with the token's e-mail address: the issuer and subject
  come from the verified ID token and nothing else, never from userinfo or typed text;
- the link flow (decision 177): a signed-in owner asks to link (a POST with CSRF), and the
  callback attaches the proven pair to the account that asked (identity_proven), refused when
  the pair is another account's (VX-ID-4);
- an answer that cannot be used (a callback without state or code, a state this browser did not
  start or already used, an error from the issuer, a token that fails a check, an issuer that
  cannot be reached) ends on a page that says which, never a 500.

URLs (virgo.urls mounts them under /admin/oidc/): `<name>/login/` starts a sign-in, `<name>/link/`
(POST) a link, `<name>/callback/` takes the issuer's answer, and `/admin/oidc/` is the signed-in
owner's page with a Link button per issuer.
"""

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
import requests
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation, ValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.cache import add_never_cache_headers
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache
from django.views.generic import View
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings
from mozilla_django_oidc.views import (
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
)

from personas import services
from personas.models import OwnerIdentity

logger = logging.getLogger(__name__)

DISCOVERY_PATH = "/.well-known/openid-configuration"
# The algorithms an ID token may be signed with: the issuer's own keys, published in its JWKS.
# Never `none`, never a MAC keyed with the client secret (HS*), which anyone holding the secret
# could forge. The library takes its key from the JWKS for the RS and ES families.
ASYMMETRIC_ALGORITHMS = ("RS256", "RS384", "RS512", "ES256", "ES384", "ES512")
# The claims an ID token must carry (OpenID Connect Core 2); `nonce` is checked by the library.
REQUIRED_CLAIMS = ["iss", "sub", "aud", "exp", "iat"]
# How long a started sign-in may wait for its answer.
FLOW_SECONDS = 600
# The session's records of a successful sign-in: the account is loaded as every other is.
SESSION_BACKEND = "django.contrib.auth.backends.ModelBackend"


@dataclass(frozen=True)
class Issuer:
    """One configured issuer, as settings.VIRGO_OIDC_ISSUERS holds it."""

    name: str
    label: str
    discovery_url: str
    client_id: str
    client_secret: str
    scopes: str
    admit: str = "none"
    allowed_domains: tuple[str, ...] | list[str] = ()

    @property
    def expected_issuer(self) -> str:
        """The issuer identifier its discovery URL names (OpenID Connect Discovery 4.3)."""
        return self.discovery_url[: -len(DISCOVERY_PATH)]


def admission_of(issuer: Issuer, claims: dict[str, Any]) -> services.Admission:
    """What `issuer`'s rule (VIRGO_OIDC_<NAME>_ADMIT) says of a verified ID token whose pair has
    no account (VX-ID-5). The domain rule takes a hosted-domain claim (`hd`) or an e-mail
    address the issuer says it verified; an unverified address is anybody's to type."""
    if issuer.admit == "everyone":
        return services.Admission.ADMITTED
    if issuer.admit == "approval":
        return services.Admission.AWAITS_APPROVAL
    if issuer.admit == "domains":
        allowed = {domain.lower() for domain in issuer.allowed_domains}
        hosted = claims.get("hd")
        email = claims.get("email")
        verified_domain = (
            email.rpartition("@")[2].lower()
            if isinstance(email, str) and "@" in email and claims.get("email_verified") is True
            else None
        )
        if (isinstance(hosted, str) and hosted.lower() in allowed) or verified_domain in allowed:
            return services.Admission.ADMITTED
    return services.Admission.REFUSED


def configured_issuers() -> list[Issuer]:
    return [Issuer(**issuer) for issuer in settings.VIRGO_OIDC_ISSUERS.values()]


def issuer_named(name: str) -> Issuer:
    found = settings.VIRGO_OIDC_ISSUERS.get(name)
    if found is None:
        raise Http404("No such OpenID Connect issuer is configured.")
    return Issuer(**found)


class SignInRefused(Exception):
    """An answer Virgo cannot sign anyone in with: the page says `reason`."""

    def __init__(self, reason: str, *, status: int = 403) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


# Discovery ----------------------------------------------------------------------------------

_discovered: dict[str, tuple[float, dict[str, Any]]] = {}
_discovered_lock = threading.Lock()


def discovered(issuer: Issuer) -> dict[str, Any]:
    """The issuer's discovery document, fetched at most every VIRGO_OIDC_DISCOVERY_SECONDS."""
    now = time.monotonic()
    with _discovered_lock:
        cached = _discovered.get(issuer.discovery_url)
    if cached is not None and now - cached[0] < settings.VIRGO_OIDC_DISCOVERY_SECONDS:
        return cached[1]
    try:
        response = requests.get(issuer.discovery_url, timeout=settings.VIRGO_OIDC_TIMEOUT_SECONDS)
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as error:
        logger.warning("OpenID Connect discovery of %s failed: %s", issuer.name, error)
        raise SignInRefused(
            f"{issuer.label} could not be reached for its configuration; try again shortly.",
            status=502,
        ) from None
    _check_discovery(issuer, document)
    with _discovered_lock:
        _discovered[issuer.discovery_url] = (now, document)
    return document


def _check_discovery(issuer: Issuer, document: Any) -> None:
    def unusable(why: str) -> SignInRefused:
        logger.warning("OpenID Connect discovery of %s unusable: %s", issuer.name, why)
        return SignInRefused(
            f"{issuer.label}'s configuration cannot be used ({why}); tell this installation's "
            "operator.",
            status=502,
        )

    if not isinstance(document, dict):
        raise unusable("its discovery document is not a JSON object")
    if document.get("issuer") != issuer.expected_issuer:
        raise unusable(f"it names the issuer {document.get('issuer')!r}, not the one it is under")
    for field in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
        value = document.get(field)
        if not isinstance(value, str) or urlsplit(value).scheme not in ("http", "https"):
            raise unusable(f"{field} is not a URL")
    if not signing_algorithms(document):
        raise unusable("it signs ID tokens with none of " + ", ".join(ASYMMETRIC_ALGORITHMS))


def signing_algorithms(document: dict[str, Any]) -> list[str]:
    """The algorithms the issuer says it signs ID tokens with that Virgo accepts."""
    offered = document.get("id_token_signing_alg_values_supported") or ["RS256"]
    if not isinstance(offered, list):
        return []
    return [algorithm for algorithm in ASYMMETRIC_ALGORITHMS if algorithm in offered]


def _basic_auth(document: dict[str, Any]) -> bool:
    """Whether the client authenticates at the token endpoint with HTTP Basic: unless the issuer
    offers client_secret_post, as its discovery document says (Basic when it says nothing)."""
    methods = document.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
    return not (isinstance(methods, list) and "client_secret_post" in methods)


def callback_url(request: HttpRequest, issuer: Issuer) -> str:
    return request.build_absolute_uri(reverse("oidc-callback", args=[issuer.name]))


# The library, one issuer at a time ---------------------------------------------------------


def _issuer_settings(issuer: Issuer, document: dict[str, Any]) -> dict[str, Any]:
    """What the library reads through `get_settings`, for this issuer."""
    return {
        "OIDC_OP_AUTHORIZATION_ENDPOINT": document["authorization_endpoint"],
        "OIDC_OP_TOKEN_ENDPOINT": document["token_endpoint"],
        "OIDC_OP_USER_ENDPOINT": document.get("userinfo_endpoint", ""),
        "OIDC_OP_JWKS_ENDPOINT": document["jwks_uri"],
        "OIDC_RP_CLIENT_ID": issuer.client_id,
        "OIDC_RP_CLIENT_SECRET": issuer.client_secret,
        "OIDC_RP_SCOPES": issuer.scopes,
        "OIDC_RP_SIGN_ALGO": signing_algorithms(document)[0],
        "OIDC_RP_IDP_SIGN_KEY": None,
        "OIDC_USE_NONCE": True,
        "OIDC_USE_PKCE": True,
        "OIDC_ALLOW_UNSECURED_JWT": False,
        "OIDC_VERIFY_KID": True,
        "OIDC_VERIFY_SSL": True,
        "OIDC_TIMEOUT": settings.VIRGO_OIDC_TIMEOUT_SECONDS,
        "OIDC_PROXY": None,
        "OIDC_TOKEN_USE_BASIC_AUTH": _basic_auth(document),
        "OIDC_STORE_ACCESS_TOKEN": False,
        "OIDC_STORE_ID_TOKEN": False,
        # The library builds its default redirect URI by reversing this name, with no issuer
        # in it; Virgo replaces that URI by the issuer's own (get_extra_params, verified_claims).
        "OIDC_AUTHENTICATION_CALLBACK_URL": "oidc",
        "LOGIN_REDIRECT_URL": reverse("admin:index"),
    }


class IssuerClient(OIDCAuthenticationBackend):
    """The library's backend for one issuer: its token exchange and its ID token checks.

    It is no entry of AUTHENTICATION_BACKENDS, so no `authenticate()` call (the admin's password
    form, the token endpoint) ever runs an exchange: only the callback view does, for the state
    it took from the session. Its user matching (by e-mail) is not used.
    """

    def __init__(self, issuer: Issuer) -> None:
        self.issuer = issuer
        self.document = discovered(issuer)
        self.algorithms = signing_algorithms(self.document)
        self._settings = _issuer_settings(issuer, self.document)
        super().__init__()

    def get_settings(self, attr: str, *default: Any) -> Any:  # type: ignore[override]
        if attr in self._settings:
            return self._settings[attr]
        return import_from_settings(attr, *default)

    def verified_claims(
        self, request: HttpRequest, *, code: str, nonce: str, code_verifier: str | None
    ) -> dict[str, Any]:
        """Exchange `code` for tokens and return the verified ID token's claims."""
        if not nonce:
            raise SignInRefused("This sign-in has no nonce to check the ID token against.")
        self.request = request
        payload = {
            "client_id": self.OIDC_RP_CLIENT_ID,
            "client_secret": self.OIDC_RP_CLIENT_SECRET,
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": callback_url(request, self.issuer),
        }
        if code_verifier:
            payload["code_verifier"] = code_verifier
        try:
            tokens = self.get_token(payload)
        except requests.HTTPError as error:
            raise SignInRefused(
                f"{self.issuer.label} refused the sign-in code ({_token_error(error)}). "
                "Start the sign-in again.",
                status=400,
            ) from None
        except (requests.RequestException, ValueError) as error:
            logger.warning("token request to %s failed: %s", self.issuer.name, error)
            raise SignInRefused(
                f"{self.issuer.label} could not be reached to finish the sign-in; try again.",
                status=502,
            ) from None
        id_token = tokens.get("id_token") if isinstance(tokens, dict) else None
        if not isinstance(id_token, str) or not id_token:
            raise SignInRefused(f"{self.issuer.label} answered without an ID token.", status=502)
        return self.verify_token(id_token, nonce=nonce)

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        """The library's verification (key from the JWKS, signature, nonce) with Virgo's checks
        in `_verify_jws`; every failure is a SignInRefused naming the check."""
        if not kwargs.get("nonce"):
            raise SignInRefused("An ID token is only taken with the nonce its sign-in sent.")
        try:
            return super().verify_token(token, **kwargs)
        except SuspiciousOperation as error:
            raise SignInRefused(_library_refusal(self.issuer, str(error))) from None
        except requests.RequestException as error:
            logger.warning("JWKS of %s could not be fetched: %s", self.issuer.name, error)
            raise SignInRefused(
                f"{self.issuer.label}'s signing keys could not be fetched; try again.", status=502
            ) from None
        except (jwt.PyJWTError, KeyError, TypeError, ValueError) as error:
            logger.warning("ID token of %s unreadable: %r", self.issuer.name, error)
            raise SignInRefused(
                f"The ID token from {self.issuer.label} cannot be read as one signed with "
                "a key it publishes."
            ) from None

    def _verify_jws(self, payload: Any, key: Any) -> dict[str, Any]:
        header = jwt.get_unverified_header(payload)
        algorithm = header.get("alg")
        if algorithm not in self.algorithms:
            raise SignInRefused(
                f"The ID token is signed with {algorithm!r}; {self.issuer.label} publishes "
                f"{', '.join(self.algorithms)}."
            )
        client_id = self.issuer.client_id
        label = self.issuer.label
        # The library makes its PyJWK without an algorithm when the JWK names none (RFC 7517
        # lets it), and PyJWT then takes an RSA key for RS256 only: the key itself is verified
        # under the one algorithm the token names and the issuer publishes.
        verifying_key = key.key if isinstance(key, jwt.PyJWK) else key
        try:
            claims = jwt.decode(
                payload,
                verifying_key,
                algorithms=[algorithm],
                audience=client_id,
                issuer=self.document["issuer"],
                leeway=settings.VIRGO_OIDC_LEEWAY_SECONDS,
                options={"require": REQUIRED_CLAIMS},
            )
        except jwt.InvalidSignatureError:
            raise SignInRefused(
                f"The ID token's signature does not verify against {label}'s published key."
            ) from None
        except jwt.ExpiredSignatureError:
            raise SignInRefused("The ID token has expired. Start the sign-in again.") from None
        except jwt.InvalidAudienceError:
            raise SignInRefused(
                f"The ID token was issued to another client, not to this installation "
                f"({client_id})."
            ) from None
        except jwt.InvalidIssuerError:
            raise SignInRefused(f"The ID token was not issued by {label}.") from None
        except jwt.ImmatureSignatureError:
            raise SignInRefused("The ID token was issued in the future.") from None
        except jwt.MissingRequiredClaimError as error:
            raise SignInRefused(f"The ID token lacks its {error.claim!r} claim.") from None
        except jwt.PyJWTError:
            raise SignInRefused("The ID token cannot be read as a signed ID token.") from None
        audience = claims["aud"]
        if isinstance(audience, list) and len(audience) > 1 and claims.get("azp") != client_id:
            raise SignInRefused("The ID token names other audiences but not this client as azp.")
        if not isinstance(claims["sub"], str) or not claims["sub"]:
            raise SignInRefused("The ID token names no subject.")
        return claims


def _library_refusal(issuer: Issuer, message: str) -> str:
    if "Nonce" in message:
        return (
            "The ID token does not carry the nonce this sign-in sent: it was not issued for "
            "this sign-in."
        )
    if "JWKS" in message:
        return f"The ID token is signed with a key {issuer.label} does not publish."
    return f"The ID token from {issuer.label} was refused ({message})."


def _token_error(error: requests.HTTPError) -> str:
    response = error.response
    try:
        answer = response.json() if response is not None else {}
    except ValueError:
        answer = {}
    code = answer.get("error") if isinstance(answer, dict) else None
    if isinstance(code, str) and code:
        return code[:100]
    return f"HTTP {response.status_code}" if response is not None else "no answer"


def display_name_of(claims: dict[str, Any]) -> str:
    for claim in ("name", "preferred_username", "nickname"):
        value = claims.get(claim)
        if isinstance(value, str) and value.strip():
            return value.strip()
    parts = [claims.get("given_name"), claims.get("family_name")]
    return " ".join(part.strip() for part in parts if isinstance(part, str) and part.strip())


# Views --------------------------------------------------------------------------------------


def refused_page(
    request: HttpRequest, reason: str, *, status: int, issuer: Issuer | None = None
) -> HttpResponse:
    response = TemplateResponse(
        request,
        "admin/oidc/refused.html",
        {
            **admin.site.each_context(request),
            "title": "Sign-in refused",
            "reason": reason,
            "issuer": issuer,
        },
        status=status,
    )
    add_never_cache_headers(response)
    return response


@method_decorator(never_cache, name="dispatch")
class StartView(OIDCAuthenticationRequestView):
    """GET: sign in with the issuer. POST (a signed-in owner, with CSRF): link it instead.

    The library's request view makes the authorization request and keeps its state, nonce and
    PKCE verifier in the session; the flow's issuer, and the account a link is for, are kept
    beside them.
    """

    http_method_names = ["get", "post"]
    linking = False

    def __init__(self, **kwargs: Any) -> None:
        # Not the library's __init__: it reads the endpoints before the issuer is known.
        View.__init__(self, **kwargs)

    def get_settings(self, attr: str, *default: Any) -> Any:  # type: ignore[override]
        if attr in self._settings:
            return self._settings[attr]
        return import_from_settings(attr, *default)

    def get_extra_params(self, request: HttpRequest) -> dict[str, str]:
        return {"redirect_uri": callback_url(request, self.issuer)}

    def get(self, request: HttpRequest, issuer: str) -> HttpResponse:  # type: ignore[override]
        return self._start(request, issuer)

    def post(self, request: HttpRequest, issuer: str) -> HttpResponse:
        if not request.user.is_authenticated:
            return HttpResponseRedirect(reverse("admin:login") + "?next=" + reverse("oidc"))
        self.linking = True
        return self._start(request, issuer)

    def _start(self, request: HttpRequest, name: str) -> HttpResponse:
        self.issuer = issuer_named(name)
        try:
            self._settings = _issuer_settings(self.issuer, discovered(self.issuer))
        except SignInRefused as refused:
            return refused_page(request, refused.reason, status=refused.status, issuer=self.issuer)
        self.OIDC_OP_AUTH_ENDPOINT = self._settings["OIDC_OP_AUTHORIZATION_ENDPOINT"]
        self.OIDC_RP_CLIENT_ID = self.issuer.client_id
        response = super().get(request)
        state = parse_qs(urlsplit(response["Location"]).query)["state"][0]
        request.session["oidc_states"][state].update(
            issuer=self.issuer.name, link=request.user.pk if self.linking else None
        )
        if self.linking:
            request.session["oidc_login_next"] = reverse("oidc")
        request.session.modified = True
        return response


@method_decorator(never_cache, name="dispatch")
class CallbackView(OIDCAuthenticationCallbackView):
    """The issuer's answer: the state's flow is taken out of the session (once), the code is
    exchanged and the ID token verified (IssuerClient), then the account rule signs an account
    in, or the proven pair is linked to the account that asked. The library's `login_success`
    signs the account in and goes where the flow was headed."""

    def get_settings(self, attr: str, *default: Any) -> Any:  # type: ignore[override]
        if attr == "LOGIN_REDIRECT_URL":
            return reverse("admin:index")
        return import_from_settings(attr, *default)

    def get(self, request: HttpRequest, issuer: str) -> HttpResponse:  # type: ignore[override]
        found = issuer_named(issuer)
        try:
            return self._finish(request, found)
        except SignInRefused as refused:
            logger.warning("OpenID Connect sign-in with %s refused: %s", found.name, refused)
            return refused_page(request, refused.reason, status=refused.status, issuer=found)

    def _finish(self, request: HttpRequest, issuer: Issuer) -> HttpResponse:
        flow = self._take_flow(request, issuer)
        error = request.GET.get("error")
        if error:
            description = request.GET.get("error_description", "")
            raise SignInRefused(
                f"{issuer.label} ended the sign-in with an error: {error[:100]}"
                + (f" ({description[:300]})" if description else "")
                + ". Nobody was signed in.",
                status=400,
            )
        code = request.GET.get("code")
        if flow is None or not code:
            raise SignInRefused(
                "This answer cannot finish a sign-in: it lacks its code or its state, or its "
                "state was not started in this browser, was used already or has expired. "
                "Start the sign-in again.",
                status=400,
            )
        linking_for = flow.get("link")
        if linking_for is not None and request.user.pk != linking_for:
            raise SignInRefused(
                "This link was started by another account than the one signed in now; "
                "nothing was linked. Start again from your account.",
                status=400,
            )
        claims = IssuerClient(issuer).verified_claims(
            request,
            code=code,
            nonce=flow.get("nonce") or "",
            code_verifier=flow.get("code_verifier"),
        )
        issued_by, subject = claims["iss"], claims["sub"]
        try:
            if linking_for is not None:
                user = get_user_model().objects.get(pk=linking_for)
                services.identity_proven(user=user, issuer=issued_by, subject=subject)
            else:
                user = services.identity_signin(
                    issuer=issued_by,
                    subject=subject,
                    admission=admission_of(issuer, claims),
                    display_name=display_name_of(claims),
                )
        except services.NotAdmitted:
            raise SignInRefused(
                f"This {issuer.label} identity has no account here, and {issuer.label} admits no "
                "new account on its own: ask an administrator of this Virgo to add you.",
                status=403,
            ) from None
        except ValidationError as invalid:
            raise SignInRefused(" ".join(invalid.messages)) from None
        if not user.is_active:
            raise SignInRefused(
                "The account this identity signs in to is not active: a new account waits for "
                "an administrator's approval, and one that was disabled stays so.",
                status=403,
            )
        user.backend = SESSION_BACKEND
        self.user = user
        response = self.login_success()
        if linking_for is not None:
            messages.success(
                request,
                f"Your account is linked to {issuer.label}: your cards now name {issued_by} "
                "as the issuer of your proven identity.",
            )
        return response

    @staticmethod
    def _take_flow(request: HttpRequest, issuer: Issuer) -> dict[str, Any] | None:
        """The started flow the answer's state names, taken out of the session so that it is
        used once; None unless it was started here, for this issuer, within FLOW_SECONDS."""
        state = request.GET.get("state")
        flows = request.session.get("oidc_states")
        if not state or not isinstance(flows, dict) or state not in flows:
            return None
        flow = flows.pop(state)
        request.session.modified = True
        request.session.save()
        if not isinstance(flow, dict) or flow.get("issuer") != issuer.name:
            return None
        if time.time() - float(flow.get("added_on") or 0) > FLOW_SECONDS:
            return None
        return flow


@never_cache
def link_page(request: HttpRequest) -> HttpResponse:
    """The signed-in owner's OpenID Connect page: what is linked, and a Link button per issuer."""
    if not request.user.is_authenticated:
        return HttpResponseRedirect(reverse("admin:login") + "?next=" + reverse("oidc"))
    identity = OwnerIdentity.objects.filter(user=request.user).first()
    return TemplateResponse(
        request,
        "admin/oidc/link.html",
        {
            **admin.site.each_context(request),
            "title": "OpenID Connect",
            "identity": identity if identity is not None and identity.subject_verified else None,
            "issuers": configured_issuers(),
        },
    )


urlpatterns = [
    path("", link_page, name="oidc"),
    path("<slug:issuer>/login/", StartView.as_view(http_method_names=["get"]), name="oidc-login"),
    path("<slug:issuer>/link/", StartView.as_view(http_method_names=["post"]), name="oidc-link"),
    path("<slug:issuer>/callback/", CallbackView.as_view(), name="oidc-callback"),
]
