"""Health endpoints for load balancers and orchestrators. Plain views: no session, no login.

/healthz says the process is alive and answering; it touches nothing else, so a slow database
never gets a healthy web process restarted. /readyz says whether this process can do its work
now: the database, the cache (where rate limits are counted) and the Celery broker all answer,
it can open the keys that sign cards (`signing`) and its static files are collected (`static`,
both VX-SCALE-2), and it is configured with the installation's public base URL (`base_url`,
VX-SCALE-4: a process on another signs nothing), and its workspace directory is the one the
installation's machines share (`workspaces`, decision 275);
it also reports the owed-work backlog (stamps, cards, recomputes owed), which never fails it.
A 503 names the failing checks; details of the failure go to the log, never to the response.

/readyz answers within VIRGO_READYZ_TIMEOUT_SECONDS whatever hangs (VX-REL-3): the checks run
at once on a small pool of threads of their own, and one that has not answered by then is
reported as `failed: timeout` while it goes on in the background. Probes of a frozen service
therefore never hold the server's request threads, and the checks a hung one holds up (at most
the pool's size) are reported as timeouts too. Each check opens and closes its own database
connection, so a connection a database restart left stale is never what answers.

The backlog is a count over every persona, seconds long with 100k of them, so a probe does not
wait on it (VX-OPS-5: time to ready does not grow with the personas): one count runs at a time
per process, on the same pool; a probe waits for it VIRGO_READYZ_BACKLOG_WAIT_SECONDS (none by
default) and otherwise reports the last finished count (null before the first, so a process's
first probe starts the count and the next shows it), and a count younger than
VIRGO_READYZ_BACKLOG_FRESH_SECONDS is reused, so probes never add up to a scan each.
"""

import logging
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for

from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, connections
from django.http import HttpRequest, JsonResponse
from django.utils.module_loading import import_string
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt

from virgo import metrics
from virgo.celery import app as celery_app
from virgo.methods import allow_methods
from virgo.outages import logged_by_outage
from virgo.staticcheck import check_static_files

logger = logging.getLogger(__name__)

# Threads the checks run on, per process: enough for a few probes at once while one service
# hangs, few enough that a flood of probes cannot pile threads up.
CHECK_THREADS = 6


def check_database() -> None:
    connection = connections["default"]
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    finally:
        connection.close()


def check_cache() -> None:
    key = "virgo:readyz:" + secrets.token_hex(8)
    token = secrets.token_hex(8)
    cache.set(key, token, timeout=10)
    try:
        if cache.get(key) != token:
            raise RuntimeError("the cache did not return what was just stored in it")
    finally:
        cache.delete(key)


def check_broker() -> None:
    if celery_app.conf.task_always_eager:
        # The embedded default has no broker: tasks run in the web process itself.
        return
    with celery_app.connection_for_write() as conn:
        conn.ensure_connection(
            max_retries=1,
            interval_start=0,
            interval_step=0,
            timeout=settings.VIRGO_READYZ_TIMEOUT_SECONDS,
        )


def _ask_the_app(function: str) -> None:
    """Call the app's readiness function named `function`; a database it cannot read is the
    database check's to report."""
    try:
        import_string(function)()
    except DatabaseError:
        return
    finally:
        connections["default"].close()


def check_signing() -> None:
    """This process can open the keys that sign cards (settings.VIRGO_SIGNING_READINESS)."""
    _ask_the_app(settings.VIRGO_SIGNING_READINESS)


def check_base_url() -> None:
    """This process's public base URL is the installation's (settings.VIRGO_BASE_URL_READINESS)."""
    _ask_the_app(settings.VIRGO_BASE_URL_READINESS)


def check_workspaces() -> None:
    """This machine's workspace directory is the installation's shared one
    (settings.VIRGO_WORKSPACES_READINESS)."""
    _ask_the_app(settings.VIRGO_WORKSPACES_READINESS)


CHECKS: dict[str, Callable[[], None]] = {
    "database": check_database,
    "cache": check_cache,
    "broker": check_broker,
    "signing": check_signing,
    "base_url": check_base_url,
    "workspaces": check_workspaces,
    # VX-SCALE-2: without its collected static files every admin page would be a 500.
    "static": check_static_files,
}

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _checks_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(CHECK_THREADS, thread_name_prefix="readyz")
        return _pool


def run_checks(timeout: float) -> dict[str, str]:
    """Every check at once; each one's outcome, `failed: timeout` for those still running."""
    futures: dict[str, Future[None]] = {
        name: _checks_pool().submit(check) for name, check in CHECKS.items()
    }
    wait_for(futures.values(), timeout=timeout)
    outcomes: dict[str, str] = {}
    for name, future in futures.items():
        if not future.done():
            future.cancel()
            logger.warning("readiness check %s gave no answer within %ss", name, timeout)
            outcomes[name] = "failed: timeout"
        elif (error := future.exception()) is not None:
            logger.warning("readiness check %s failed: %r", name, error)
            outcomes[name] = "failed: " + type(error).__name__
        else:
            outcomes[name] = "ok"
    return outcomes


# Exempt from CSRF, which would answer an unknown method (QUERY) with its 403 page: nothing here
# changes state, and every other method gets a JSON 405.
@csrf_exempt
@never_cache
@allow_methods("GET", "HEAD")
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@csrf_exempt
@never_cache
@allow_methods("GET", "HEAD")
def readyz(request: HttpRequest) -> JsonResponse:
    checks = run_checks(settings.VIRGO_READYZ_TIMEOUT_SECONDS)
    failed = [name for name, outcome in checks.items() if outcome != "ok"]
    body = {
        "status": "unavailable" if failed else "ready",
        "checks": checks,
        "failed": failed,
        "backlog": BACKLOG.read() if "database" not in failed else None,
    }
    if not failed:
        return JsonResponse(body)
    response = JsonResponse(body, status=503)
    response["Retry-After"] = str(settings.VIRGO_DEGRADED_RETRY_SECONDS)
    # Each failed check was logged by run_checks.
    return logged_by_outage(response)


def owed_work() -> dict[str, int] | None:
    """The owed-work backlog, by kind; it informs, it never makes a process unready."""
    try:
        return metrics.backlog()
    except Exception as exc:
        logger.warning("counting the owed work failed: %r", exc)
        return None


class BacklogCount:
    """The owed-work backlog as /readyz reads it: counted off the request, one count at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: Future[None] | None = None
        self._counted: tuple[float, dict[str, int] | None] | None = None

    def read(self) -> dict[str, int] | None:
        with self._lock:
            if self._counted is not None and (
                time.monotonic() - self._counted[0] < settings.VIRGO_READYZ_BACKLOG_FRESH_SECONDS
            ):
                return self._counted[1]
            if self._running is None:
                self._running = _checks_pool().submit(self._count)
            running = self._running
        wait_for([running], timeout=settings.VIRGO_READYZ_BACKLOG_WAIT_SECONDS)
        with self._lock:
            return None if self._counted is None else self._counted[1]

    def forget(self) -> None:
        """Drop the last count (tests; a process that must not report an old one)."""
        with self._lock:
            self._counted = None

    def settle(self, timeout: float) -> None:
        """Wait up to `timeout` for a count in progress to finish and close its connection
        (tests, before they empty the database the count is reading)."""
        with self._lock:
            running = self._running
        if running is not None:
            wait_for([running], timeout=timeout)

    def _count(self) -> None:
        counted = None
        try:
            counted = owed_work()
        finally:
            connections["default"].close()
            with self._lock:
                self._counted = (time.monotonic(), counted)
                self._running = None


BACKLOG = BacklogCount()
