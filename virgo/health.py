"""Health endpoints for load balancers and orchestrators. Plain views: no session, no login.

/healthz says the process is alive and answering; it touches nothing else, so a slow database
never gets a healthy web process restarted. /readyz says whether this process can do its work
now: the database, the cache (where rate limits are counted) and the Celery broker all answer;
it also reports the owed-work backlog (stamps, cards, recomputes owed), which never fails it.
A 503 names the failing checks; details of the failure go to the log, never to the response.
"""

import logging
import secrets
from collections.abc import Callable

from django.core.cache import cache
from django.db import connections
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt

from virgo import metrics
from virgo.celery import app as celery_app
from virgo.errors import allow_methods

logger = logging.getLogger(__name__)

BROKER_TIMEOUT_SECONDS = 3


def check_database() -> None:
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


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
            max_retries=1, interval_start=0, interval_step=0, timeout=BROKER_TIMEOUT_SECONDS
        )


CHECKS: dict[str, Callable[[], None]] = {
    "database": check_database,
    "cache": check_cache,
    "broker": check_broker,
}


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
    checks: dict[str, str] = {}
    for name, check in CHECKS.items():
        try:
            check()
        except Exception as exc:
            logger.warning("readiness check %s failed: %r", name, exc)
            checks[name] = "failed: " + type(exc).__name__
        else:
            checks[name] = "ok"
    failed = [name for name, outcome in checks.items() if outcome != "ok"]
    body = {
        "status": "unavailable" if failed else "ready",
        "checks": checks,
        "failed": failed,
        "backlog": owed_work() if "database" not in failed else None,
    }
    return JsonResponse(body, status=503 if failed else 200)


def owed_work() -> dict[str, int] | None:
    """The owed-work backlog, by kind; it informs, it never makes a process unready."""
    try:
        return metrics.backlog()
    except Exception as exc:
        logger.warning("counting the owed work failed: %r", exc)
        return None
