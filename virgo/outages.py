"""What one process knows about the shared services it could not reach (VX-REL-1, VX-REL-3).

Redis holds nothing a request cannot do without for a while: the limits can count in the
process (virgo.limits), a card can be served from what the process holds or from the database
(cards.fastpath), a task can be left to the reconciler (virgo.queueing). So a call to Redis that
fails, after its own timeout and its one retry on a fresh connection (settings), marks the
service down in this process; for VIRGO_DEGRADED_RETRY_SECONDS the process does not try it
again, so a frozen Redis costs one timeout per process and interval, not one per request. Then a
single caller tries it again while the others still go without it.

The database is not skipped that way (each request tries it, and answers 503 while it fails:
virgo.errors), but its outages are logged the same way. The operator sees one WARNING when a
process loses a service, another at most once a minute while it stays down (with how many
calls went without it), an INFO line when it is back, and the counter
`virgo_unavailable_total{service,use}` for every call that went without it.
"""

import logging
import threading
import time

import redis.exceptions
from django.conf import settings
from django.core.signals import setting_changed
from django.http import HttpResponseBase
from django_redis.exceptions import ConnectionInterrupted

from virgo import metrics

logger = logging.getLogger(__name__)

# What an unreachable, frozen or restarting Redis raises, through redis-py or django-redis
# (BusyLoadingError, "LOADING", is a ConnectionError: a restarted Redis reading its snapshot).
REDIS_ERRORS: tuple[type[Exception], ...] = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    ConnectionInterrupted,
)
# How often a service that stays down is logged again.
REPEAT_WARNING_SECONDS = 60.0


class Outage:
    """One shared service as this process sees it: reachable, or down since a failed call."""

    def __init__(self, service: str, title: str, consequence: str) -> None:
        self.service = service  # the metrics' label
        self.title = title
        self.consequence = consequence  # for the log; {retry}: VIRGO_DEGRADED_RETRY_SECONDS
        self._lock = threading.Lock()
        self._down_since: float | None = None
        self._retry_at = 0.0
        self._warned_at = 0.0
        self._skipped = 0

    @property
    def down(self) -> bool:
        return self._down_since is not None

    def retry_after(self) -> int:
        """Whole seconds until this process tries the service again (at least 1)."""
        return max(int(self._retry_at - time.monotonic() + 0.999), 1)

    def should_try(self, use: str) -> bool:
        """Whether to call the service now. While it is down: False, counted as a call that
        went without it, except for one caller per interval, who tries it again."""
        if self._down_since is None:
            return True  # the hot path (every card request) takes no lock
        with self._lock:
            if self._down_since is None:
                return True
            now = time.monotonic()
            if now >= self._retry_at:
                self._retry_at = now + settings.VIRGO_DEGRADED_RETRY_SECONDS
                return True
            self._skipped += 1
        metrics.UNAVAILABLE.labels(service=self.service, use=use).inc()
        return False

    def failed(self, use: str, error: BaseException) -> None:
        """A call to the service failed: mark it down, log (rarely), count the call."""
        metrics.UNAVAILABLE.labels(service=self.service, use=use).inc()
        with self._lock:
            now = time.monotonic()
            self._retry_at = now + settings.VIRGO_DEGRADED_RETRY_SECONDS
            first = self._down_since is None
            if first:
                self._down_since = now
            elif now - self._warned_at < REPEAT_WARNING_SECONDS:
                self._skipped += 1
                return
            self._warned_at = now
            skipped, self._skipped = self._skipped, 0
            down_for = now - self._down_since
        reason = f"{type(error).__name__}: {error}"
        if first:
            logger.warning(
                "%s is unreachable (%s, %s): %s",
                self.title,
                use,
                reason,
                self.consequence.format(retry=settings.VIRGO_DEGRADED_RETRY_SECONDS),
            )
        else:
            logger.warning(
                "%s is still unreachable after %.0fs (%s); %d calls went without it since the "
                "last warning",
                self.title,
                down_for,
                reason,
                skipped,
            )

    def forget(self) -> None:
        """Back to reachable, untried: the service this stood for was configured anew."""
        with self._lock:
            self._down_since = None
            self._retry_at = 0.0
            self._warned_at = 0.0
            self._skipped = 0

    def succeeded(self) -> None:
        if self._down_since is None:
            return
        with self._lock:
            if self._down_since is None:
                return
            down_for = time.monotonic() - self._down_since
            self._down_since = None
            self._skipped = 0
        logger.info("%s is reachable again after %.0fs", self.title, down_for)


SHARED_CACHE = Outage(
    "cache",
    "Redis (the cache)",
    "rate limits count in this process alone, password sign-in answers 503, public cards come "
    "from this process's memory or the database; Redis is tried again every {retry}s",
)
BROKER = Outage(
    "broker",
    "Redis (the Celery broker)",
    "tasks are left to the reconciler, which does their work from the database; the broker is "
    "tried again every {retry}s",
)
DATABASE = Outage(
    "database",
    "The database",
    "requests that need it answer 503 with Retry-After {retry}",
)


def logged_by_outage[ResponseT: HttpResponseBase](response: ResponseT) -> ResponseT:
    """A 503 of an outage this module logs (once, then once a minute): Django's request log would
    add an ERROR line for every single one."""
    response._has_been_logged = True  # type: ignore[attr-defined]  (django.utils.log)
    return response


def database_connected(sender: object, **kwargs: object) -> None:
    """`connection_created`: a new database connection is the database back, if it was down."""
    DATABASE.succeeded()


def _forget(setting: str, **kwargs: object) -> None:
    if setting == "CACHES":
        SHARED_CACHE.forget()
    elif setting == "DATABASES":
        DATABASE.forget()


setting_changed.connect(_forget)
