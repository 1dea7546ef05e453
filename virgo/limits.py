"""Rate limits that hold while the shared cache is down (VX-REL-1).

Every limit counts on the shared cache (django-ratelimit on Redis), so one budget holds across
every web process. When Redis cannot be reached, a request is neither refused nor let through
uncounted: it is counted in this process alone, with the same rate and window length, so each
process still holds the limit by itself (with N processes an address may get up to N times its
budget until Redis is back). virgo.outages says when to stop trying Redis for a while, logs it
and counts it; `virgo_rate_limit_per_process_total{limit}` counts every request counted here.

Password sign-in does not come here: a per-process count would multiply a guesser's budget by
the number of processes, so it refuses instead (virgo.signin).
"""

import functools
import ipaddress
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.http import HttpRequest
from django_ratelimit import ALL
from django_ratelimit.core import get_usage

from virgo import metrics
from virgo.clients import client_ip
from virgo.outages import REDIS_ERRORS, SHARED_CACHE

_RATE = re.compile(r"(\d+)/(\d*)([smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
Key = str | Callable[[str, HttpRequest], str]


@functools.lru_cache(maxsize=16)
def parse_rate(rate: str) -> tuple[int, int]:
    """django-ratelimit's notation, e.g. `60/m` or `100/5m`: (requests, window seconds)."""
    match = _RATE.fullmatch(rate.strip())
    if match is None:
        raise ValueError(f"not a rate: {rate!r} (expected e.g. 60/m)")
    count, multiplier, unit = match.groups()
    return int(count), int(multiplier or 1) * _UNIT_SECONDS[unit]


def client_key(address: str) -> str:
    """The source address, an IPv6 one reduced to its /64 as django-ratelimit does."""
    if ":" not in address:
        return address
    try:
        return str(ipaddress.ip_network(f"{address}/64", strict=False).network_address)
    except ValueError:
        return address


class ProcessCounts:
    """Fixed windows counted in this process alone, each starting at its key's first request.

    Bounded: past MAX_KEYS the key that has gone longest without a new window is forgotten.
    """

    MAX_KEYS = 65536

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._windows: dict[str, list[float]] = {}

    def hit(self, key: str, window: int, *, increment: bool = True) -> tuple[int, int]:
        """Count one request (or none) for `key`: (requests in its window, seconds left)."""
        now = time.monotonic()
        with self._lock:
            counted = self._windows.get(key)
            if counted is None or counted[0] <= now:
                self._windows.pop(key, None)
                if len(self._windows) >= self.MAX_KEYS:
                    self._windows.pop(next(iter(self._windows)))
                counted = self._windows[key] = [now + window, 0]
            if increment:
                counted[1] += 1
            return int(counted[1]), max(int(counted[0] - now + 0.999), 1)

    def clear(self) -> None:
        with self._lock:
            self._windows.clear()


IN_PROCESS = ProcessCounts()


def _forget(setting: str, **kwargs: Any) -> None:
    if setting == "CACHES":
        IN_PROCESS.clear()


setting_changed.connect(_forget)


def usage(
    request: HttpRequest,
    *,
    group: str,
    key: Key,
    rate: str,
    method: Any = ALL,
    increment: bool = True,
) -> dict[str, Any] | None:
    """django-ratelimit's get_usage on the shared cache, or in this process while it is down.

    The same answer either way: None when the limit does not apply (RATELIMIT_ENABLE off, a
    method it does not count), else `count`, `limit`, `should_limit` and `time_left`.
    """
    if SHARED_CACHE.should_try("limit"):
        try:
            counted = get_usage(
                request, group=group, key=key, rate=rate, method=method, increment=increment
            )
        except REDIS_ERRORS as error:
            SHARED_CACHE.failed("limit", error)
        else:
            SHARED_CACHE.succeeded()
            return counted
    if not settings.RATELIMIT_ENABLE or (method != ALL and request.method not in method):
        return None
    metrics.RATE_LIMIT_FALLBACKS.labels(group).inc()
    limit, window = parse_rate(rate)
    count, seconds_left = IN_PROCESS.hit(
        f"{group}\n{rate}\n{_key_value(request, group, key)}", window, increment=increment
    )
    return {
        "count": count,
        "limit": limit,
        "should_limit": count > limit,
        "time_left": seconds_left,
    }


def retry_after(
    request: HttpRequest, *, group: str, key: Key, rate: str, **options: Any
) -> int | None:
    """Count this request against its budget: the seconds to wait when it is spent (callers
    answer 429 with Retry-After), None while it is not."""
    counted = usage(request, group=group, key=key, rate=rate, **options)
    if counted is None or not counted["should_limit"]:
        return None
    metrics.RATE_LIMIT_REFUSALS.labels(group).inc()
    return max(counted["time_left"], 1)


def address_retry_after(request: HttpRequest, *, group: str, rate: str) -> int | None:
    """retry_after for a budget per client address (virgo.clients, behind the trusted proxies)."""
    return retry_after(request, group=group, key="ip", rate=rate)


def _key_value(request: HttpRequest, group: str, key: Key) -> str:
    """The keys Virgo's limits use, read as django-ratelimit reads them."""
    if callable(key):
        return key(group, request)
    if key == "ip":
        return client_key(client_ip(request))
    if key == "user":
        return str(request.user.pk)
    raise ValueError(f"a limit keyed by {key!r} has no per-process count")
