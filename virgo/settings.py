"""Settings read from the environment.

With nothing configured Virgo runs on its embedded default: SQLite, Celery tasks executed
eagerly in-process, a local-memory cache. Setting DATABASE_URL and REDIS_URL switches to the
production shape (PostgreSQL, Redis-backed Celery and cache) without code changes.
"""

import ipaddress
import os
import re
from collections.abc import Collection
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.retry import Retry

from virgo import kek, telemetry
from virgo.envfile import home_env_file, load_env_file, read_secret_file
from virgo.home import private_embedded_home
from virgo.public_url import normalise_base_url
from virgo.resolvers import parse_nameserver

BASE_DIR = Path(__file__).resolve().parent.parent

# Every name these settings read from the environment: what the MCP server `virgo launch`
# configures is given, in an owner-private file, instead of the agent's environment.
ENVIRONMENT_SETTINGS: set[str] = set()


def _env(name: str) -> str | None:
    ENVIRONMENT_SETTINGS.add(name)
    return os.environ.get(name)


def _unusable(name: str, value: str, expected: str, default: object) -> ImproperlyConfigured:
    """A setting's value that cannot be used: one line naming it, the problem and the fix, as
    every entry point prints it (virgo.startup)."""
    return ImproperlyConfigured(
        f"{name}: {value!r} is not {expected}; correct it, or unset {name} for the default "
        f"({default})"
    )


TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"", "0", "false", "no", "off"}
# django-ratelimit's rate: a count per (a number of) seconds, minutes, hours or days; it reads
# the period's first letter (60/minute is 60/m) and takes an unknown one for seconds (60/M).
RATE = re.compile(r"\d+/\d*[smhd][a-z]*")


def env_str(name: str, default: str = "") -> str:
    value = _env(name)
    return default if value is None else value


def env_bool(name: str, default: bool = False) -> bool:
    value = _env(name)
    if value is None:
        return default
    word = value.strip().lower()
    if word not in TRUE_WORDS | FALSE_WORDS:
        raise _unusable(name, value, "1 or 0 (true/false, yes/no, on/off)", int(default))
    return word in TRUE_WORDS


def env_int(name: str, default: int) -> int:
    value = _env(name)
    if value is None or value.strip() == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise _unusable(name, value, "a whole number", default) from None


def env_float(name: str, default: float) -> float:
    value = _env(name)
    if value is None or value.strip() == "":
        return default
    try:
        return float(value)
    except ValueError:
        raise _unusable(name, value, "a number", default) from None


def env_rate(name: str, default: str) -> str:
    value = env_str(name, default).strip()
    if not RATE.fullmatch(value):
        raise _unusable(name, value, "a rate such as 60/m (per s, m, h or d; or 100/5m)", default)
    return value


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in env_str(name, default).split(",") if item.strip()]


def env_base_url(name: str, default: str) -> str:
    """A public base URL in the one spelling every machine renders and compares
    (virgo.public_url)."""
    value = env_str(name, default)
    try:
        return normalise_base_url(value)
    except ValueError as problem:
        raise _unusable(name, value, f"a public base URL ({problem})", default) from None


def check_url(name: str, schemes: Collection[str]) -> None:
    """A URL setting that is set must use one of `schemes`, before the sections below hand it to
    a library whose error would not name it."""
    value = os.environ.get(name)
    scheme, separator, _ = (value or "").partition("://")
    if value and (not separator or scheme not in schemes):
        raise ImproperlyConfigured(
            f"{name}: the URL does not start with one of {', '.join(f'{s}://' for s in schemes)}"
            f"; set {name} to such a URL (see docs/configuration.md), or unset it"
        )


# An issuer's short name: lower case, as it appears in URLs (/admin/oidc/<name>/...) and,
# upper-cased with `-` as `_`, in the names of its variables.
OIDC_ISSUER_NAME = re.compile(r"[a-z][a-z0-9-]{0,31}")
DISCOVERY_PATH = "/.well-known/openid-configuration"
LOOPBACK_HOSTS = {"localhost", "127.0.0.1", "::1"}


# Who an issuer admits without an account (VX-ID-5): nobody (the default, right for a public
# issuer), verified e-mail or hosted domains, anybody pending a superuser's approval, anybody.
OIDC_ADMISSION_RULES = ("none", "domains", "approval", "everyone")


def env_oidc_issuer(name: str) -> dict[str, Any]:
    """One OpenID Connect issuer Virgo signs owners in with (personas.oidc), read from
    VIRGO_OIDC_<NAME>_*: its discovery URL, the client id Virgo is registered under, the client
    secret (from the environment, or from an owner-private file), the button's label and the
    scopes asked for."""
    if not OIDC_ISSUER_NAME.fullmatch(name):
        raise ImproperlyConfigured(
            f"VIRGO_OIDC_ISSUERS: {name!r} is not an issuer name; use lower-case letters, digits "
            "and '-', starting with a letter (at most 32), e.g. VIRGO_OIDC_ISSUERS=corp,google"
        )
    prefix = f"VIRGO_OIDC_{name.upper().replace('-', '_')}_"
    discovery_url = env_str(prefix + "DISCOVERY_URL").strip()
    parts = urlsplit(discovery_url)
    secure = parts.scheme == "https" or (
        parts.scheme == "http" and (parts.hostname or "") in LOOPBACK_HOSTS
    )
    if not (secure and parts.hostname and parts.path.endswith(DISCOVERY_PATH)):
        raise ImproperlyConfigured(
            f"{prefix}DISCOVERY_URL: {discovery_url!r} is not an issuer's discovery URL; set it "
            f"to https://<issuer>{DISCOVERY_PATH} (plain http only for a provider on this "
            "machine's loopback)"
        )
    client_id = env_str(prefix + "CLIENT_ID").strip()
    if not client_id:
        raise ImproperlyConfigured(
            f"{prefix}CLIENT_ID: not set; set it to the client id the issuer registered Virgo as"
        )
    secret = env_str(prefix + "CLIENT_SECRET")
    secret_file = env_str(prefix + "CLIENT_SECRET_FILE")
    if bool(secret) == bool(secret_file):
        raise ImproperlyConfigured(
            f"{prefix}CLIENT_SECRET: set either it or {prefix}CLIENT_SECRET_FILE (the path of an "
            "owner-private file holding the secret), and only one of them"
        )
    if secret_file:
        secret = read_secret_file(secret_file, variable=prefix + "CLIENT_SECRET_FILE")
    admit = env_str(prefix + "ADMIT", "none").strip() or "none"
    if admit not in OIDC_ADMISSION_RULES:
        raise ImproperlyConfigured(
            f"{prefix}ADMIT: {admit!r} is not an admission rule; one of "
            f"{', '.join(OIDC_ADMISSION_RULES)} (who without an account may sign in and get one)"
        )
    domains = [domain.lower() for domain in env_list(prefix + "ALLOWED_DOMAINS")]
    if (admit == "domains") != bool(domains):
        raise ImproperlyConfigured(
            f"{prefix}ALLOWED_DOMAINS: set it (e-mail or hosted domains, comma-separated) with "
            f"{prefix}ADMIT=domains, and only then"
        )
    scopes = env_str(prefix + "SCOPES", "openid profile").strip() or "openid profile"
    if admit == "domains" and "email" not in scopes.split():
        # The domain rule reads the token's e-mail claims.
        scopes += " email"
    return {
        "name": name,
        "label": env_str(prefix + "LABEL", parts.hostname).strip() or parts.hostname,
        "discovery_url": discovery_url,
        "client_id": client_id,
        "client_secret": secret,
        "scopes": scopes,
        "admit": admit,
        "allowed_domains": domains,
    }


def read_keks(value: str, path: str) -> list[str]:
    """The key-encryption keys from VIRGO_KEY_ENCRYPTION_KEY or the file
    VIRGO_KEY_ENCRYPTION_KEY_FILE names (one of them), first the one that seals."""
    if value and path:
        raise ImproperlyConfigured(
            "VIRGO_KEY_ENCRYPTION_KEY_FILE: set either it or VIRGO_KEY_ENCRYPTION_KEY, not both"
        )
    if path:
        text = read_secret_file(path, variable="VIRGO_KEY_ENCRYPTION_KEY_FILE")
        return kek.parse(text, variable="VIRGO_KEY_ENCRYPTION_KEY_FILE")
    return kek.parse(value, variable="VIRGO_KEY_ENCRYPTION_KEY") if value else []


def check_database_url() -> None:
    check_url("DATABASE_URL", ("postgres", "postgresql", "pgsql", "sqlite"))
    try:
        if value := os.environ.get("DATABASE_URL"):
            dj_database_url.parse(value)
    except ValueError:
        raise ImproperlyConfigured(
            "DATABASE_URL: the URL cannot be parsed (a port that is not a number, or a "
            "password with unquoted characters such as / or @); percent-encode them"
        ) from None


# The owner-private settings file VIRGO_ENV_FILE names, if any, then the installation's own in
# VIRGO_HOME (`make run` writes it); real environment variables win over both (virgo.envfile).
load_env_file(os.environ.get("VIRGO_ENV_FILE"))
VIRGO_HOME = Path(env_str("VIRGO_HOME", str(BASE_DIR / "var")))
load_env_file(home_env_file(VIRGO_HOME), variable="VIRGO_HOME", required=False)
check_database_url()
check_url("REDIS_URL", ("redis", "rediss", "unix"))
check_url("REDIS_CACHE_URL", ("redis", "rediss", "unix"))
# Tracing (virgo.telemetry): on only when one of these says where the OTLP/HTTP collector is.
check_url(telemetry.ENDPOINT, ("http", "https"))
check_url(telemetry.TRACES_ENDPOINT, ("http", "https"))
for _name in telemetry.VARIABLES:
    _env(_name)


DEBUG = env_bool("DEBUG", False)
# The embedded default (`make run`, the test suite): one local process over plain HTTP.
EMBEDDED = env_bool("VIRGO_EMBEDDED", False)
LOCAL = DEBUG or EMBEDDED

SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not LOCAL:
        raise ImproperlyConfigured(
            f"SECRET_KEY: not set; set it in the environment or in {home_env_file(VIRGO_HOME)} "
            "(`make run` writes one for the embedded default), or set VIRGO_EMBEDDED=1 for a "
            "local run"
        )
    # Development only: a per-checkout key that never leaves this machine.
    SECRET_KEY = "virgo-insecure-development-key-" + str(BASE_DIR)

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost,testserver" if LOCAL else "")

# Where the serving processes count their metrics, a directory per group (virgo.metrics); must
# be local to the machine (not a VIRGO_HOME shared with other machines).
VIRGO_METRICS_DIR = Path(env_str("VIRGO_METRICS_DIR", str(VIRGO_HOME / "metrics")))
# A secret the Prometheus scraper sends as `Authorization: Bearer <token>`; superusers may also
# read /metrics signed in. Unset: superusers only.
VIRGO_METRICS_TOKEN = env_str("VIRGO_METRICS_TOKEN", "")
# The function counting the owed-work backlog (/readyz and /metrics), by kind.
VIRGO_BACKLOG = "settling.reconciliation.owed_work"
# The function raising when this process cannot sign cards (/readyz, VX-SCALE-2).
VIRGO_SIGNING_READINESS = "cards.keys.check_can_sign"
# The function raising when this process's public base URL is not the installation's (/readyz,
# VX-SCALE-4).
VIRGO_BASE_URL_READINESS = "cards.base_url.check_base_url"
# Whether this machine's workspace directory is the one every machine shares (decision 275).
VIRGO_WORKSPACES_READINESS = "runtime.workspace_directory.check_workspaces"
# The function saying what a persona change does to its grant (stamps.grant), from the stamp
# rules: personas.services holds a change that widens it for the owner's review and refuses one
# that would leave the persona unable to stand.
VIRGO_GRANT_DIFF = "stamps.review.grant_diff"
# The verbs a persona class may not have, each with the factory's reason: the admin form offers
# only the others.
VIRGO_CLASS_REFUSALS = "stamps.grant.class_refusals"
# The tools a persona class must have to stand: a card import and the demo give them first.
VIRGO_CLASS_REQUIRED_TOOLS = "stamps.profiles.required_tools"
VIRGO_PUBLIC_BASE_URL = env_base_url("VIRGO_PUBLIC_BASE_URL", "http://127.0.0.1:8000")
# Whom a card names as provider when its owner has proven no organization (VX-ID-2): this
# installation, which the card's identity extension then says.
VIRGO_PROVIDER_ORGANIZATION = env_str(
    "VIRGO_PROVIDER_ORGANIZATION", f"Virgo at {urlsplit(VIRGO_PUBLIC_BASE_URL).netloc}"
)
VIRGO_PROVIDER_URL = env_str("VIRGO_PROVIDER_URL", VIRGO_PUBLIC_BASE_URL + "/")
# How a card names its owner's OIDC subject: as the issuer gave it (`public`), or as an
# identifier of this installation's own that peers cannot join across installations (`pairwise`).
VIRGO_IDENTITY_SUBJECTS = env_str("VIRGO_IDENTITY_SUBJECTS", "public")
if VIRGO_IDENTITY_SUBJECTS not in ("public", "pairwise"):
    raise ImproperlyConfigured(
        f"VIRGO_IDENTITY_SUBJECTS: {VIRGO_IDENTITY_SUBJECTS!r} is neither public nor pairwise"
    )
VIRGO_CARD_RATE_LIMIT = env_rate("VIRGO_CARD_RATE_LIMIT", "60/m")
VIRGO_DIRECTORY_RATE_LIMIT = env_rate("VIRGO_DIRECTORY_RATE_LIMIT", "120/m")
VIRGO_MUTATION_RATE_LIMIT = env_rate("VIRGO_MUTATION_RATE_LIMIT", "120/m")
VIRGO_TOKEN_RATE_LIMIT = env_rate("VIRGO_TOKEN_RATE_LIMIT", "10/m")
VIRGO_CHANNEL_CALLBACK_RATE_LIMIT = env_rate("VIRGO_CHANNEL_CALLBACK_RATE_LIMIT", "600/m")
# Calls to personas' remote MCP endpoints per source address (serving/): an agent host's calls
# are paced by its model, so this bounds a flood, not an agent.
VIRGO_MCP_RATE_LIMIT = env_rate("VIRGO_MCP_RATE_LIMIT", "1200/m")
# Failed password sign-ins (admin and token) per username and per source address in a window of
# VIRGO_SIGNIN_LOCKOUT_SECONDS; once either is spent, sign-in is refused until it ends
# (virgo.signin).
VIRGO_SIGNIN_FAILURES_PER_USERNAME = env_int("VIRGO_SIGNIN_FAILURES_PER_USERNAME", 5)
VIRGO_SIGNIN_FAILURES_PER_ADDRESS = env_int("VIRGO_SIGNIN_FAILURES_PER_ADDRESS", 20)
VIRGO_SIGNIN_LOCKOUT_SECONDS = env_int("VIRGO_SIGNIN_LOCKOUT_SECONDS", 900)
# Outside local mode limits need a shared cache (virgo.E020) unless one process is meant.
VIRGO_RATE_LIMITS_PER_PROCESS = env_bool("VIRGO_RATE_LIMITS_PER_PROCESS", False)
VIRGO_CARD_MAX_AGE = env_int("VIRGO_CARD_MAX_AGE", 300)
# The longest a web process keeps a card it has not seen change (a safety net: changes replace
# the card's token in Redis, and the next request reloads; see cards.fastpath).
VIRGO_CARD_PROCESS_CACHE_SECONDS = env_int("VIRGO_CARD_PROCESS_CACHE_SECONDS", 60)
# Card signatures (cards.signing, cards.keys): the algorithm of keys Virgo makes (ES256 or
# EdDSA), where their owner-private files go, how long a rotated-out key keeps signing and stays
# in the JWKS, and how long peers may cache the JWKS.
VIRGO_SIGNING_ALGORITHM = env_str("VIRGO_SIGNING_ALGORITHM", "ES256")
if VIRGO_SIGNING_ALGORITHM not in ("ES256", "EdDSA"):
    raise ImproperlyConfigured(
        f"VIRGO_SIGNING_ALGORITHM: {VIRGO_SIGNING_ALGORITHM!r} is not one Virgo signs with; "
        "set ES256 (the default) or EdDSA (Ed25519)"
    )
VIRGO_SIGNING_KEYS_DIR = env_str("VIRGO_SIGNING_KEYS_DIR", "")
VIRGO_SIGNING_KEY_GRACE_SECONDS = env_int("VIRGO_SIGNING_KEY_GRACE_SECONDS", 7 * 86400)
VIRGO_JWKS_MAX_AGE = env_int("VIRGO_JWKS_MAX_AGE", 300)
# How long peers may cache the revocation status list (cards.status_list, VX-TRUST-7): short, as
# it is how late a peer may learn of a revocation.
VIRGO_STATUS_LIST_MAX_AGE = env_int("VIRGO_STATUS_LIST_MAX_AGE", 60)
# How long one signed status list is valid (its validFrom/validUntil, VX-TRUST-8): the longest a
# cache or mirror can keep a revocation from a peer that checks the dates. It is signed again
# every half of it, so a list served has at least half left.
VIRGO_STATUS_LIST_VALIDITY = env_int("VIRGO_STATUS_LIST_VALIDITY", 3600)
# Key-encryption keys (virgo.kek, VX-SCALE-1): signing keys are sealed under the first in the
# database, every one opens; every machine of a deployment needs the same. Local mode without one
# falls back to a key derived from SECRET_KEY (it only opens, once one is configured).
VIRGO_KEY_ENCRYPTION_KEYS = read_keks(
    env_str("VIRGO_KEY_ENCRYPTION_KEY"), env_str("VIRGO_KEY_ENCRYPTION_KEY_FILE")
)
if not VIRGO_KEY_ENCRYPTION_KEYS and not LOCAL:
    raise ImproperlyConfigured(
        "VIRGO_KEY_ENCRYPTION_KEY: not set; the card signing keys are sealed under it in the "
        "database, so every machine needs the same one: set it (or VIRGO_KEY_ENCRYPTION_KEY_FILE, "
        "an owner-private file) to what `python -m virgo.kek` prints"
    )
if LOCAL:
    VIRGO_KEY_ENCRYPTION_KEYS.append(kek.development_kek(SECRET_KEY))
# Cards per task when a change of the signing set re-signs every card (settling.tasks).
VIRGO_RESIGN_BATCH_SIZE = env_int("VIRGO_RESIGN_BATCH_SIZE", 500)
VIRGO_MAX_BODY_BYTES = env_int("VIRGO_MAX_BODY_BYTES", 64 * 1024)
VIRGO_DIRECTORY_PAGE_SIZE = env_int("VIRGO_DIRECTORY_PAGE_SIZE", 50)
VIRGO_DIRECTORY_MAX_PAGE_SIZE = env_int("VIRGO_DIRECTORY_MAX_PAGE_SIZE", 100)
# Other ARD registries an ARD search refers clients to (federation=referrals or auto); Virgo
# never calls them itself.
VIRGO_ARD_REFERRALS = env_list("VIRGO_ARD_REFERRALS")
for _referral in VIRGO_ARD_REFERRALS:
    if urlsplit(_referral).scheme != "https" or not urlsplit(_referral).hostname:
        raise _unusable(
            "VIRGO_ARD_REFERRALS", _referral, "an https:// URL of an ARD registry", "none"
        )
# A federated search (cards.ard.federation): how long it waits for every peer in all, and how
# much of one peer's answer it reads.
VIRGO_ARD_FEDERATION_SECONDS = env_float("VIRGO_ARD_FEDERATION_SECONDS", 3.0)
VIRGO_ARD_FEDERATION_BYTES = env_int("VIRGO_ARD_FEDERATION_BYTES", 1024 * 1024)
VIRGO_RECOMPUTE_BATCH_SIZE = env_int("VIRGO_RECOMPUTE_BATCH_SIZE", 500)
# Processes `virgo check` verifies the stamp files in (stamps.checks): the cores it may use.
VIRGO_CHECK_PROCESSES = env_int("VIRGO_CHECK_PROCESSES", os.process_cpu_count() or 1)
# Names of further environment variables `virgo launch` passes to the agent (its own API key...);
# the agent gets no other variable of the launcher's environment (serving.launcher).
VIRGO_LAUNCH_PASS_ENV = env_list("VIRGO_LAUNCH_PASS_ENV")

INSTALLED_APPS = [
    "virgo.admin_site.VirgoAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.forms",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "csp",
    "personas",
    "stamps",
    "cards",
    "settling",
    "runtime",
    "channel",
    "serving",
    "oauth2_provider",
    "virgo",
]

MIDDLEWARE = [
    "virgo.middleware.ResponseCountMiddleware",
    # Through what and under which id the request's changes are audited (VX-AUDIT-1).
    "virgo.auditing.AuditContextMiddleware",
    # The header-setting layers come first (outermost), so that every response carries the
    # security headers, including those an inner layer answers early: the 413 of the body
    # limit, the 400 of a disallowed Host, a redirect.
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "virgo.middleware.ContentTypeCSPMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Static files are answered here, before sessions and the rest, with long-lived caching.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Before any layer that could read the body.
    "virgo.middleware.BodySizeLimitMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # Innermost: a view the database failed answers 503, before any layer sees an error.
    "virgo.middleware.DatabaseUnavailableMiddleware",
]

ROOT_URLCONF = "virgo.urls"

# Pages that need a signed-in owner (the consent page of serving.oauth) send others to sign in.
LOGIN_URL = "/admin/login/"

# Virgo as the OAuth 2.1 authorization server of its personas' remote MCP endpoints (serving/,
# VX-REMOTE-1), on django-oauth-toolkit: authorization code with PKCE (S256 only), each token
# bound to one persona's resource (RFC 8707, held by serving.oauth), short-lived, stored as its
# SHA-256 alone (RFC 9700), the issuer named in every authorization response (RFC 9207), refresh
# tokens rotated and a reused one ending its family.
OAUTH2_PROVIDER = {
    "SCOPES": {"mcp": "Call the persona's tools, as its stamp allows"},
    "DEFAULT_SCOPES": ["mcp"],
    "PKCE_REQUIRED": True,
    "ACCESS_TOKEN_EXPIRE_SECONDS": env_int("VIRGO_MCP_TOKEN_SECONDS", 600),
    "REFRESH_TOKEN_EXPIRE_SECONDS": env_int("VIRGO_MCP_REFRESH_SECONDS", 30 * 24 * 3600),
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": 60,
    "OAUTH2_VALIDATOR_CLASS": "serving.oauth.PersonaResourceValidator",
    # What the token endpoint takes, and so all its metadata offers: a persona's owner consents
    # to each client (a code), which then refreshes; a client credentials token would have no
    # owner to consent, and no device authorization endpoint is served. Owners register public
    # clients (PKCE, no secret); a superuser may register a confidential one.
    "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": [
        "none",
        "client_secret_basic",
        "client_secret_post",
    ],
    "ALLOWED_REDIRECT_URI_SCHEMES": ["https", "http"],
    "ALLOW_LOCALHOST_LOOPBACK": True,
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    "COMPLIANT_BCP_RFC9700_REFRESH_TOKEN": True,
    "COMPLIANT_BCP_RFC9700_REDIRECT_URI_MATCHING": True,
    "COMPLIANT_BCP_RFC9700_PKCE_REQUIRED": True,
    # The issuer is the installation, whichever host name a request came in by.
    "OIDC_ISS_ENDPOINT": VIRGO_PUBLIC_BASE_URL,
    # Owners see their clients and connections as serving's (serving.admin); the toolkit's own
    # lists are a superuser's.
    "APPLICATION_ADMIN_CLASS": "serving.admin.SuperuserOnlyAdmin",
    "REFRESH_TOKEN_ADMIN_CLASS": "serving.admin.SuperuserOnlyAdmin",
    "ACCESS_TOKEN_ADMIN_CLASS": "serving.admin.SuperuserOnlyAdmin",
    "GRANT_ADMIN_CLASS": "serving.admin.SuperuserOnlyAdmin",
    "ID_TOKEN_ADMIN_CLASS": "serving.admin.SuperuserOnlyAdmin",
}
WSGI_APPLICATION = "virgo.wsgi.application"
# WSGI layers virgo.wsgi puts in front of Django, outermost first: the public card's fast path
# answers current cards from memory before Django is entered.
VIRGO_WSGI_LAYERS = ["cards.fastpath.PublicCardFastPath"]

# Widgets may be drawn by the project's templates/ (personas.forms.VerbGrid), like every page.
FORM_RENDERER = "django.forms.renderers.TemplatesSetting"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASE_URL = env_str("DATABASE_URL")
if not DATABASE_URL:
    # The embedded default keeps its SQLite file under VIRGO_HOME, beside the stamps; both are
    # the owner's alone, whatever the umask (virgo.home).
    private_embedded_home(VIRGO_HOME, VIRGO_HOME / "virgo.sqlite3")
    DATABASE_URL = f"sqlite:///{VIRGO_HOME / 'virgo.sqlite3'}"
DATABASES = {
    "default": dj_database_url.parse(
        DATABASE_URL,
        conn_max_age=env_int("DB_CONN_MAX_AGE", 60),
        # A persistent connection is checked before its first use in each request, so one that a
        # database restart left stale is replaced instead of failing that request.
        conn_health_checks=env_bool("DB_CONN_HEALTH_CHECKS", True),
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL")
# The cache (rate-limit counts, card tokens: one round trip per public card request) may reach
# the same Redis another way, e.g. a Unix socket when it runs on this machine.
REDIS_CACHE_URL = env_str("REDIS_CACHE_URL") or REDIS_URL
# Every call to Redis (cache, limits, card tokens, the broker) gives up after these many seconds
# to connect and to answer, and is tried once more on a fresh connection when the one it had was
# stale (the server restarted); a connection idle longer than the interval is PINGed first.
# A process that found Redis unreachable counts its limits alone and tries it again after
# VIRGO_DEGRADED_RETRY_SECONDS, also the Retry-After of what it refuses meanwhile (virgo.outages).
REDIS_CONNECT_TIMEOUT = env_float("REDIS_CONNECT_TIMEOUT", 1.0)
REDIS_TIMEOUT = env_float("REDIS_TIMEOUT", 1.0)
REDIS_HEALTH_CHECK_INTERVAL = env_int("REDIS_HEALTH_CHECK_INTERVAL", 30)
VIRGO_DEGRADED_RETRY_SECONDS = env_int("VIRGO_DEGRADED_RETRY_SECONDS", 5)


def redis_cache(location: str) -> dict[str, object]:
    """The django-redis cache on `location`, with the timeouts, retry and health checks above."""
    return {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": location,
        "OPTIONS": {
            "SOCKET_CONNECT_TIMEOUT": REDIS_CONNECT_TIMEOUT,
            "SOCKET_TIMEOUT": REDIS_TIMEOUT,
            "CONNECTION_POOL_KWARGS": {
                "retry": Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
                "health_check_interval": REDIS_HEALTH_CHECK_INTERVAL,
            },
        },
    }


# The toolkit warns that `http` redirect URIs are allowed at all; an agent host's client needs
# them for its loopback redirect (RFC 8252), and serving.admin refuses `http` to any other host.
SILENCED_SYSTEM_CHECKS = ["oauth2_provider.W008"]
if REDIS_URL:
    CACHES = {"default": redis_cache(REDIS_CACHE_URL)}
else:
    # The embedded default runs one server process, where the local-memory cache is an exact,
    # atomic counter for django-ratelimit. It is not shared between processes: outside local
    # mode virgo.E020 refuses it (virgo.checks), so django-ratelimit's own is silenced here.
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    SILENCED_SYSTEM_CHECKS += ["django_ratelimit.E003", "django_ratelimit.W001"]

RATELIMIT_USE_CACHE = "default"
RATELIMIT_ENABLE = env_bool("RATELIMIT_ENABLE", True)
# Per-address limits count the client behind the reverse proxies named here (virgo.clients):
# addresses or networks whose X-Forwarded-For is believed. Empty: REMOTE_ADDR is the client.
VIRGO_TRUSTED_PROXIES = env_list("VIRGO_TRUSTED_PROXIES")
for _proxy in VIRGO_TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_proxy, strict=False)
    except ValueError:
        raise ImproperlyConfigured(
            f"VIRGO_TRUSTED_PROXIES: {_proxy!r} is not an IP address or network; write the "
            "proxies' addresses or networks, comma-separated (e.g. 10.0.0.7,10.20.0.0/16)"
        ) from None
RATELIMIT_IP_META_KEY = "virgo.clients.client_ip"

AUTHENTICATION_BACKENDS = [
    "virgo.signin.LockoutBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Owners may sign in with OpenID Connect (personas.oidc; decisions 175-177): the issuers named in
# VIRGO_OIDC_ISSUERS (comma-separated short names), each configured by VIRGO_OIDC_<NAME>_*
# (env_oidc_issuer). None named: password sign-in only, as the embedded default has it.
VIRGO_OIDC_ISSUERS = {
    name: env_oidc_issuer(name) for name in dict.fromkeys(env_list("VIRGO_OIDC_ISSUERS"))
}
# Seconds an issuer's discovery document is kept before it is fetched again; the bound on every
# request to an issuer (discovery, token, keys); the clock skew an ID token's exp and iat allow.
VIRGO_OIDC_DISCOVERY_SECONDS = env_int("VIRGO_OIDC_DISCOVERY_SECONDS", 3600)
VIRGO_OIDC_TIMEOUT_SECONDS = env_float("VIRGO_OIDC_TIMEOUT_SECONDS", 5.0)
VIRGO_OIDC_LEEWAY_SECONDS = env_int("VIRGO_OIDC_LEEWAY_SECONDS", 60)
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# In the release, not VIRGO_HOME (VX-SCALE-2): `make static` collects them once per build, so a
# new machine serves them (and the admin's manifest entries) from its first request.
STATIC_ROOT = Path(env_str("VIRGO_STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Production serves `collectstatic` output with hashed names (cacheable forever); the
    # embedded default serves straight from the apps, with nothing to collect.
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if LOCAL
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}
# Locally WhiteNoise finds files in the apps on each request: nothing to collect, no warning.
WHITENOISE_USE_FINDERS = LOCAL
WHITENOISE_AUTOREFRESH = LOCAL

# Request bodies: the middleware answers 413 before Django would raise its own 400.
DATA_UPLOAD_MAX_MEMORY_SIZE = VIRGO_MAX_BODY_BYTES
FILE_UPLOAD_MAX_MEMORY_SIZE = VIRGO_MAX_BODY_BYTES

# Security headers on every response (SPEC-0009 "Security Headers").
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "strict-origin-when-cross-origin"
X_FRAME_OPTIONS = "DENY"
CSRF_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_SAMESITE = "Lax"
SESSION_COOKIE_HTTPONLY = True
SESSION_ENGINE = "virgo.sessions"
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not LOCAL)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not LOCAL)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not LOCAL)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if LOCAL else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", not LOCAL)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", not LOCAL)
if env_bool("SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# HTML pages may load only from this site; JSON responses get default-src 'none'
# (virgo.middleware.ContentTypeCSPMiddleware).
CONTENT_SECURITY_POLICY = {"DIRECTIVES": {"default-src": ["'self'"]}}
VIRGO_JSON_CSP = {"default-src": ["'none'"], "frame-ancestors": ["'none'"]}

REST_FRAMEWORK = {
    # Token first: an anonymous caller of any endpoint gets 401 with `WWW-Authenticate: Token`
    # (session authentication has no challenge to offer, so DRF would answer 403).
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "virgo.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "EXCEPTION_HANDLER": "virgo.api.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    "DEFAULT_SCHEMA_CLASS": "virgo.openapi.VirgoAutoSchema",
}

# The OpenAPI 3 schema (/api/schema/) and its browsable docs (/api/docs/) are for signed-in
# owners, like every endpoint but the public card; Swagger UI is served from this site
# (drf-spectacular-sidecar), so the pages hold to CSP default-src 'self'.
SPECTACULAR_SETTINGS = {
    "TITLE": "Virgo API",
    "DESCRIPTION": "Personas as scoped A2A Agent Cards: the owners' API, the directory, the "
    "well-known cards and the health probes.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SERVE_AUTHENTICATION": [
        "virgo.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # One name for each choice set the API uses in several places.
    "ENUM_NAME_OVERRIDES": {
        "VerbEnum": "personas.catalogue.VERBS_BY_NAME",
        "PersonaClassEnum": "personas.models.PersonaClass",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "virgo.openapi.add_plain_django_endpoints",
    ],
}

# Celery: eager in-process unless a broker is configured.
CELERY_BROKER_URL = REDIS_URL or "memory://localhost/"
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", not REDIS_URL)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker whose Redis went away waits for it as long as it takes (2 s, 4 s ... every 30 s), where
# Celery's default gives up after 100 tries (about 45 minutes) and ends the worker (VX-SCALE-4).
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_BROKER_CONNECTION_TIMEOUT = REDIS_CONNECT_TIMEOUT
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "max_retries": 1,
    "interval_start": 0,
    "interval_step": 0.5,
    "socket_connect_timeout": REDIS_CONNECT_TIMEOUT,
    "socket_timeout": REDIS_TIMEOUT,
    "health_check_interval": REDIS_HEALTH_CHECK_INTERVAL,
}
# A publish retries once, at once, on a fresh connection: the change it follows is committed and
# its work is owed in the database, so a broker that stays unreachable costs no more than that.
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0}

LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # The SDK's resolver logs every card it fetches, whole, at INFO: an import would copy a
        # stranger's bytes (up to the fetch bound) into Virgo's log. Its failures still show.
        "a2a.client.card_resolver": {"level": "WARNING"},
        # The MCP SDK logs four INFO lines for every request its stateless manager answers (one
        # per remote call); the audit trail and the metrics already say what each call did.
        "mcp.server": {"level": "WARNING"},
    },
}
if CELERY_TASK_ALWAYS_EAGER:
    # Tasks run inside the command or request that queued them: Celery's "Task ... succeeded"
    # line would land in the middle of a command's output. A failure still shows.
    LOGGING["loggers"]["celery.app.trace"] = {"level": "WARNING"}

# Production shape: several web processes and workers on one PostgreSQL and one Redis ----------

# Load balancers probe over plain HTTP from inside the network; the probes must not be redirected.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
# /readyz answers within this many seconds whatever hangs; a check still running is a failure.
VIRGO_READYZ_TIMEOUT_SECONDS = env_float("VIRGO_READYZ_TIMEOUT_SECONDS", 2.0)
# How long a probe waits for the backlog count (by default not at all: it shows the last one),
# and how long a finished count is reused (virgo.health: the count scans every persona).
VIRGO_READYZ_BACKLOG_WAIT_SECONDS = env_float("VIRGO_READYZ_BACKLOG_WAIT_SECONDS", 0.0)
VIRGO_READYZ_BACKLOG_FRESH_SECONDS = env_float("VIRGO_READYZ_BACKLOG_FRESH_SECONDS", 5.0)
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # A request or a readiness probe fails, rather than hangs, while the database is unreachable.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
        "connect_timeout", env_int("DB_CONNECT_TIMEOUT", 5)
    )
    DATABASES["default"]["OPTIONS"].setdefault(
        "server_side_binding", env_bool("DB_SERVER_SIDE_BINDING", True)
    )

# The reconciler (settling.reconciliation) pays every stamp and card still owed: the on-commit
# task is only the fast path. It leaves alone generations younger than the grace period, whose
# task is most likely still on its way; a run that outlasts the interval expires the next one.
VIRGO_RECONCILE_INTERVAL_SECONDS = env_int("VIRGO_RECONCILE_INTERVAL_SECONDS", 60)
VIRGO_RECONCILE_GRACE_SECONDS = env_int("VIRGO_RECONCILE_GRACE_SECONDS", 30)
# The verification sweep (stamps.quarantine) reads every standing stamp file and compares it
# with its stored stamp: a lost file is rewritten, a broken one quarantines its persona alone.
VIRGO_STAMP_VERIFY_INTERVAL_SECONDS = env_int("VIRGO_STAMP_VERIFY_INTERVAL_SECONDS", 300)

# virgo-channel: the hub that reaches human surfaces (channel/, docs/channel.md). Stamps carry
# only binding names; the hub's credential and the callback secret live here, never in a stamp.
VIRGO_CHANNEL_URL = env_str("VIRGO_CHANNEL_URL").rstrip("/")
VIRGO_CHANNEL_TOKEN = env_str("VIRGO_CHANNEL_TOKEN")
VIRGO_CHANNEL_SECRET = env_str("VIRGO_CHANNEL_SECRET")
VIRGO_CHANNEL_TIMEOUT = env_float("VIRGO_CHANNEL_TIMEOUT", 5.0)
VIRGO_CHANNEL_RETRIES = env_int("VIRGO_CHANNEL_RETRIES", 3)
VIRGO_CHANNEL_BACKOFF = env_float("VIRGO_CHANNEL_BACKOFF", 0.25)
VIRGO_CHANNEL_BACKOFF_MAX = env_float("VIRGO_CHANNEL_BACKOFF_MAX", 4.0)
VIRGO_CHANNEL_MAX_FILE_BYTES = env_int("VIRGO_CHANNEL_MAX_FILE_BYTES", 4 * 1024 * 1024)
VIRGO_CHANNEL_CALLBACK_TOLERANCE = env_int("VIRGO_CHANNEL_CALLBACK_TOLERANCE", 300)
VIRGO_WEBHOOK_TIMEOUT_SECONDS = env_float("VIRGO_WEBHOOK_TIMEOUT_SECONDS", 10.0)
# Networks an outbound URL a persona gives (a webhook, a publication target) may lead to even
# though they are not public: loopback, private, link-local... (virgo.outbound). Empty: none.
# Metadata, unspecified and multicast addresses are refused whatever this says.
VIRGO_OUTBOUND_ALLOWED_NETWORKS = env_list("VIRGO_OUTBOUND_ALLOWED_NETWORKS")
for _network in VIRGO_OUTBOUND_ALLOWED_NETWORKS:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError:
        raise ImproperlyConfigured(
            f"VIRGO_OUTBOUND_ALLOWED_NETWORKS: {_network!r} is not an IP address or network; "
            "write networks such as 127.0.0.0/8,10.20.0.0/16, comma-separated"
        ) from None
VIRGO_GRAPH_TIME_BUDGET_MS = env_int("VIRGO_GRAPH_TIME_BUDGET_MS", 2000)
VIRGO_CHANNEL_CALLBACK_MAX_BYTES = env_int("VIRGO_CHANNEL_CALLBACK_MAX_BYTES", 16 * 1024)
if VIRGO_CHANNEL_URL and not LOCAL and not VIRGO_CHANNEL_SECRET:
    raise ImproperlyConfigured(
        "VIRGO_CHANNEL_SECRET: not set while VIRGO_CHANNEL_URL is, so the hub's decision "
        "callbacks could not be authenticated; set VIRGO_CHANNEL_SECRET to the secret the hub "
        "signs them with"
    )

CELERY_BEAT_SCHEDULE = {
    "reconcile-owed-stamps-and-cards": {
        "task": "personas.tasks.reconcile_owed",
        "schedule": VIRGO_RECONCILE_INTERVAL_SECONDS,
        "options": {"expires": VIRGO_RECONCILE_INTERVAL_SECONDS},
    },
    # Rotated-out signing keys leave the JWKS once their grace ends (cards.keys).
    "retire-signing-keys": {
        "task": "settling.tasks.retire_due_keys",
        "schedule": VIRGO_RECONCILE_INTERVAL_SECONDS,
        "options": {"expires": VIRGO_RECONCILE_INTERVAL_SECONDS},
    },
    "verify-stamp-files": {
        "task": "stamps.tasks.verify_stamp_files",
        "schedule": VIRGO_STAMP_VERIFY_INTERVAL_SECONDS,
        "options": {"expires": VIRGO_STAMP_VERIFY_INTERVAL_SECONDS},
    },
    # Confirmation cards whose delivery to the hub ended unknown are sent again (same key).
    "redeliver-confirmations": {
        "task": "channel.tasks.redeliver_confirmations",
        "schedule": VIRGO_RECONCILE_INTERVAL_SECONDS,
        "options": {"expires": VIRGO_RECONCILE_INTERVAL_SECONDS},
    },
}

# Organization domains (VX-ID-2): how proofs are checked and rechecked (personas.proofs) -------

# DNS servers for proofs and outbound names, `address[:port]` comma-separated (`[v6]:port`);
# empty: the system's resolver (virgo.resolvers).
VIRGO_DNS_NAMESERVERS = env_list("VIRGO_DNS_NAMESERVERS")
for _nameserver in VIRGO_DNS_NAMESERVERS:
    try:
        parse_nameserver(_nameserver)
    except ValueError as _problem:
        raise ImproperlyConfigured(
            f"VIRGO_DNS_NAMESERVERS: {_problem}; write servers such as 127.0.0.1:5353,9.9.9.9, "
            "comma-separated, or unset it for the system's resolver"
        ) from None
# A PEM bundle of the certificate authorities outbound HTTPS trusts instead of httpx's own
# (certifi): an operator's private CA, the test suite's. Empty: httpx's.
VIRGO_OUTBOUND_CA_BUNDLE = env_str("VIRGO_OUTBOUND_CA_BUNDLE")
if VIRGO_OUTBOUND_CA_BUNDLE and not Path(VIRGO_OUTBOUND_CA_BUNDLE).is_file():
    raise ImproperlyConfigured(
        f"VIRGO_OUTBOUND_CA_BUNDLE: {VIRGO_OUTBOUND_CA_BUNDLE!r} is not a file; name a PEM file "
        "of certificate authorities, or unset it for httpx's own bundle"
    )
# How old a DNS or HTTPS proof may get before it is checked again; beat looks for those due
# every hour (or every interval, if shorter). A proof no longer found un-verifies its domain.
VIRGO_DOMAIN_RECHECK_SECONDS = env_int("VIRGO_DOMAIN_RECHECK_SECONDS", 86400)
if VIRGO_DOMAIN_RECHECK_SECONDS < 1:
    raise _unusable(
        "VIRGO_DOMAIN_RECHECK_SECONDS", str(VIRGO_DOMAIN_RECHECK_SECONDS), "at least 1", 86400
    )
VIRGO_DOMAIN_RECHECK_SWEEP_SECONDS = min(VIRGO_DOMAIN_RECHECK_SECONDS, 3600)
CELERY_BEAT_SCHEDULE["recheck-organization-domains"] = {
    "task": "settling.tasks.recheck_organization_domains",
    "schedule": VIRGO_DOMAIN_RECHECK_SWEEP_SECONDS,
    "options": {"expires": VIRGO_DOMAIN_RECHECK_SWEEP_SECONDS},
}
