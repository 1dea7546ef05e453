"""Password sign-in is limited: failures per username and per source address (VX-SEC-4).

Every owner is staff, so the admin's login page and `POST /api/auth/token/` would otherwise be
an unlimited password oracle. Failed sign-ins are counted with django-ratelimit on the shared
cache (Redis in production, so the count holds across every web process), in two budgets: one
per username, VIRGO_SIGNIN_FAILURES_PER_USERNAME, and one per source address (the client
address of virgo.clients, behind VIRGO_TRUSTED_PROXIES), VIRGO_SIGNIN_FAILURES_PER_ADDRESS, each
per window of VIRGO_SIGNIN_LOCKOUT_SECONDS. Once either is spent, no password is checked for
that username or from that address until its window ends: the right password is refused too,
so the answer says nothing about it.

Failures are counted where Django reports them (`user_login_failed`, sent by every
`authenticate()`); the lockout is enforced in `authenticate()` too (LockoutBackend), so no door
that checks a password is left open, and the two doors people use answer it clearly: the admin
with an HTML page, the token endpoint with JSON, both 429 with Retry-After. A refused attempt
counts as a failure too.

A shared cache that cannot be reached (VX-REL-1) neither opens sign-in nor counts it in the
process (that would give a guesser a budget per web process): no password is checked, and both
doors answer 503 with Retry-After (`signin_unavailable`) until Redis answers again. So does a
cache that answers without a count (a backend that swallows its errors); django-ratelimit's
RATELIMIT_FAIL_OPEN, which would read such an answer as "no limit", opens nothing here.

`virgo signin unlock --username NAME | --address ADDRESS` lifts a lockout: each budget's count
is keyed with a generation, and unlocking starts a new one. The generations are kept where
every process of the installation reaches them, so the command lifts what the server counted:
in the shared cache beside the counts, and without one (the embedded default, whose counts stay
in the one server process's memory, an exact and atomic counter) as files under
VIRGO_HOME/signin-generations/, read by the server at each attempt, as the card tokens are
(cards.fastpath). A generation file that cannot be read refuses sign-in like an unreachable
cache.
"""

import contextlib
import hashlib
import ipaddress
import logging
import os
import secrets
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.signals import user_login_failed
from django.core.cache import caches
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.cache import add_never_cache_headers
from django_ratelimit.core import get_usage

from virgo import metrics
from virgo.checks import SHARED_CACHES
from virgo.clients import client_address
from virgo.outages import REDIS_ERRORS, SHARED_CACHE, logged_by_outage

logger = logging.getLogger(__name__)

USERNAME = "username"
ADDRESS = "address"
_GROUP = "virgo.signin-failures."
_GENERATION = "virgo.signin-generation:"
# Under VIRGO_HOME: the generations, where the counts are not in a cache every process shares.
GENERATION_DIRECTORY = "signin-generations"
LOCKED_OUT = (
    "Too many failed sign-ins for this username or from this address. "
    "Sign-in is paused for them; try again later."
)
UNAVAILABLE = (
    "Sign-in is unavailable for a moment: failed sign-ins cannot be counted right now. "
    "Try again shortly."
)


class CountLost(Exception):
    """The cache answered, but without the count: as unusable as a cache that cannot be reached."""


# What a cache that cannot keep the counts raises: Redis's errors, the operating system's (a
# client that reports a refused connection as it is), and a count the cache did not give.
CACHE_ERRORS: tuple[type[Exception], ...] = (*REDIS_ERRORS, OSError, CountLost)


class GenerationUnreadable(Exception):
    """A budget's generation file under VIRGO_HOME cannot be read: this machine's disk, not the
    cache, so no password is checked but the cache is not taken for down."""


class Unavailable(Exception):
    """The shared cache holding the sign-in counts cannot be reached: no password is checked."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(UNAVAILABLE)
        self.retry_after = retry_after


@dataclass(frozen=True)
class Budget:
    """One of the two counts a sign-in attempt is held to."""

    kind: str  # USERNAME or ADDRESS
    value: str  # the normalised username or address

    @property
    def limit(self) -> int:
        if self.kind == USERNAME:
            return settings.VIRGO_SIGNIN_FAILURES_PER_USERNAME
        return settings.VIRGO_SIGNIN_FAILURES_PER_ADDRESS

    @property
    def digest(self) -> str:
        # Usernames are arbitrary text; cache keys (memcached's) and file names must not be.
        return hashlib.sha256(self.value.encode()).hexdigest()

    @property
    def generation_key(self) -> str:
        return _GENERATION + self.kind + ":" + self.digest

    @property
    def generation_file(self) -> Path:
        return Path(settings.VIRGO_HOME) / GENERATION_DIRECTORY / f"{self.kind}-{self.digest}"


@dataclass(frozen=True)
class Usage:
    budget: Budget
    failures: int
    seconds_left: int

    @property
    def spent(self) -> bool:
        return self.failures >= self.budget.limit


def normal_username(username: Any) -> str:
    """The username as counted: Django's own normalisation, then case-folded, so that `Ada`
    and `ada` share one budget whatever the database's collation does with them."""
    return unicodedata.normalize("NFKC", str(username or "")).strip().casefold()


def normal_address(address: str) -> str:
    """The address as counted: an IPv6 client by its /64 (one host usually holds a whole one),
    as django-ratelimit counts the other per-address limits; an IPv4 client by its address,
    also when it is shown IPv4-mapped (::ffff:a.b.c.d). Raises ValueError."""
    parsed = ipaddress.ip_address(address.strip())
    if parsed.version == 6 and parsed.ipv4_mapped is not None:
        # An IPv4 client seen through a dual-stack socket: its own budget, not the one of the
        # /64 (::) every such client would otherwise share.
        return str(parsed.ipv4_mapped)
    if parsed.version == 6:
        return str(ipaddress.ip_network(f"{parsed}/64", strict=False).network_address)
    return str(parsed)


def budgets(request: HttpRequest | None, username: Any) -> list[Budget]:
    found = [Budget(USERNAME, normal_username(username))]
    # Without a peer address (a Unix socket, a call with no request) the username still counts.
    if request is not None:
        with contextlib.suppress(ValueError):
            found.append(Budget(ADDRESS, normal_address(client_address(request.META))))
    return found


def usage(budgets_: list[Budget], *, request: HttpRequest | None, count: bool) -> list[Usage]:
    """Each budget's failures in its current window; `count` adds this attempt as one more.

    Raises Unavailable while the shared cache cannot be reached.
    """
    if not SHARED_CACHE.should_try("signin"):
        raise Unavailable(SHARED_CACHE.retry_after())
    try:
        found = _usage(budgets_, request=request, count=count)
    except GenerationUnreadable as error:
        logger.error("Password sign-in is refused: %s", error)
        raise Unavailable(settings.VIRGO_DEGRADED_RETRY_SECONDS) from error
    except CACHE_ERRORS as error:
        SHARED_CACHE.failed("signin", error)
        raise Unavailable(SHARED_CACHE.retry_after()) from error
    SHARED_CACHE.succeeded()
    return found


def counts_shared() -> bool:
    """Whether every process counts into one cache (Redis), so any of them reads the counts."""
    return settings.CACHES[settings.RATELIMIT_USE_CACHE]["BACKEND"] in SHARED_CACHES


def _generations(budgets_: list[Budget]) -> dict[str, str]:
    """Each budget's current generation, by its key; a budget never lifted has none."""
    if counts_shared():
        cache = caches[settings.RATELIMIT_USE_CACHE]
        return cache.get_many([budget.generation_key for budget in budgets_])
    found = {}
    for budget in budgets_:
        try:
            found[budget.generation_key] = budget.generation_file.read_text(encoding="ascii")
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError) as error:
            reason = getattr(error, "strerror", None) or str(error)
            raise GenerationUnreadable(
                f"the lockout generation {budget.generation_file} cannot be read ({reason}); "
                "sign-in for that username or address is refused until it is removed or repaired"
            ) from error
    return found


def _new_generation(budget: Budget) -> None:
    generation = secrets.token_hex(8)
    if counts_shared():
        caches[settings.RATELIMIT_USE_CACHE].set(budget.generation_key, generation, timeout=None)
        return
    path = budget.generation_file
    # Owner-private like everything under VIRGO_HOME; replaced whole, so a reader sees the old
    # generation or the new one, never a part.
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{generation}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "w", encoding="ascii") as handle:
        handle.write(generation)
    os.replace(temporary, path)


def _usage(budgets_: list[Budget], *, request: HttpRequest | None, count: bool) -> list[Usage]:
    generations = _generations(budgets_)
    seconds = settings.VIRGO_SIGNIN_LOCKOUT_SECONDS
    found = []
    for budget in budgets_:
        value = generations.get(budget.generation_key, "") + ":" + budget.value
        counted = get_usage(
            request,
            group=_GROUP + budget.kind,
            key=lambda group, request, value=value: value,
            rate=f"{budget.limit}/{seconds}s",
            increment=count,
        )
        if counted is None:
            if not settings.RATELIMIT_ENABLE:  # the limits are switched off, this one too
                continue
            # RATELIMIT_FAIL_OPEN's answer for a count the cache did not give.
            raise CountLost(f"no sign-in count for the {budget.kind} from the cache")
        if not counted["limit"] and counted["time_left"] < 0:
            # django-ratelimit's own answer for a count the cache did not give.
            raise CountLost(f"no sign-in count for the {budget.kind} from the cache")
        found.append(Usage(budget, counted["count"], max(counted["time_left"], 1)))
    return found


def retry_after(request: HttpRequest | None, username: Any) -> int | None:
    """Seconds until a sign-in as `username` from this request's address may be tried; None
    while it may be tried now."""
    spent = [
        used.seconds_left
        for used in usage(budgets(request, username), request=request, count=False)
        if used.spent
    ]
    return max(spent) if spent else None


def refused(request: HttpRequest, username: Any) -> int | None:
    """For the doors that answer a lockout themselves: the seconds to wait while a sign-in as
    `username` from here may not be tried (the refused attempt counts as one more failure, so
    one username tried on and on from one address locks the address too); None when it may."""
    seconds = retry_after(request, username)
    if seconds is not None:
        metrics.RATE_LIMIT_REFUSALS.labels("virgo.signin").inc()
        usage(budgets(request, username), request=request, count=True)
    return seconds


def count_failure(
    sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **kwargs: Any
) -> None:
    """`user_login_failed`: one more failure for the username and for the address."""
    usage(budgets(request, credentials.get("username")), request=request, count=True)


def lift(budget: Budget) -> int:
    """Lift a lockout (or a count short of one): the failures it had in its window, as this
    process counts them (where the counts are not shared, only the server's own are real)."""
    (before,) = usage([budget], request=None, count=False) or [Usage(budget, 0, 0)]
    _new_generation(budget)
    return before.failures


def connect() -> None:
    user_login_failed.connect(count_failure, dispatch_uid="virgo.signin.count_failure")


class LockoutBackend:
    """First in AUTHENTICATION_BACKENDS: while a budget is spent, `authenticate()` stops here
    (PermissionDenied ends the search) and no backend checks the password. It signs no one in
    itself; a session it is named in (the test client's force_login names the first backend)
    is loaded as ModelBackend loads it."""

    def authenticate(
        self, request: HttpRequest | None, username: Any = None, **credentials: Any
    ) -> None:
        if retry_after(request, username) is not None:
            raise PermissionDenied(LOCKED_OUT)

    def get_user(self, user_id: Any) -> Any:
        return ModelBackend().get_user(user_id)


def locked_out_page(request: HttpRequest, seconds: int) -> HttpResponse:
    minutes = -(-seconds // 60)
    response = TemplateResponse(
        request,
        "admin/virgo/signin_locked.html",
        {
            **admin.site.each_context(request),
            "title": "Sign-in paused",
            "minutes": minutes,
        },
        status=429,
    )
    response["Retry-After"] = str(seconds)
    add_never_cache_headers(response)
    return response


def unavailable_page(request: HttpRequest, seconds: int) -> HttpResponse:
    metrics.UNAVAILABLE_RESPONSES.labels(reason="signin").inc()
    response = TemplateResponse(
        request,
        "admin/virgo/signin_unavailable.html",
        {**admin.site.each_context(request), "title": "Sign-in unavailable", "seconds": seconds},
        status=503,
    )
    response["Retry-After"] = str(seconds)
    add_never_cache_headers(response)
    return logged_by_outage(response)


def admin_login(request: HttpRequest) -> HttpResponse:
    """The admin's login page, answered with the lockout page while a budget is spent, and with
    503 while the counts cannot be reached (the login form's authenticate() counts too)."""
    try:
        if request.method == "POST":
            seconds = refused(request, request.POST.get("username"))
            if seconds is not None:
                return locked_out_page(request, seconds)
        return admin.site.login(request)
    except Unavailable as unavailable:
        return unavailable_page(request, unavailable.retry_after)
