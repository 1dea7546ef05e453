"""Deployment checks of Virgo's own settings (VX-SEC-12).

    virgo.E020  rate limits would count per process (no shared cache outside local mode)
    virgo.E021  static files not collected (`check --deploy`: no manifest in STATIC_ROOT)

Every limit (cards, directory, owner writes, tokens, sign-in failures, hub callbacks) counts in
the cache named by RATELIMIT_USE_CACHE. The local-memory cache of the embedded default is exact
in one process, but each web process of a deployment would keep a count of its own: with four
workers a limit of 10 lets 40 through, silently. Production settings without a shared cache are
therefore refused, unless VIRGO_RATE_LIMITS_PER_PROCESS says one process is meant.
"""

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, register

from virgo.staticcheck import static_files_problem

# Caches whose counts every process shares, with an atomic increment.
SHARED_CACHES = frozenset(
    {
        "django_redis.cache.RedisCache",
        "django.core.cache.backends.redis.RedisCache",
        "django.core.cache.backends.memcached.PyMemcacheCache",
        "django.core.cache.backends.memcached.PyLibMCCache",
    }
)


@register("virgo", Tags.caches)
def check_rate_limit_cache(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    if settings.LOCAL or settings.VIRGO_RATE_LIMITS_PER_PROCESS:
        return []
    backend = settings.CACHES.get(settings.RATELIMIT_USE_CACHE, {}).get("BACKEND", "")
    if backend in SHARED_CACHES:
        return []
    return [
        Error(
            f"rate limits would count in each process: the cache {settings.RATELIMIT_USE_CACHE!r} "
            f"({backend or 'not configured'}) is not shared between processes",
            hint="Set REDIS_URL (or REDIS_CACHE_URL) to the deployment's Redis, or set "
            "VIRGO_RATE_LIMITS_PER_PROCESS=1 if exactly one process serves this deployment.",
            id="virgo.E020",
        )
    ]


@register("virgo", Tags.staticfiles, deploy=True)
def check_static_files_collected(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """VX-SCALE-2: a production process without its collected static files would answer every
    admin page with a 500; the release step must collect them first."""
    problem = static_files_problem()
    if problem is None:
        return []
    return [
        Error(
            problem,
            hint="Collect them into the release before starting it: `make static` (or "
            "`manage.py collectstatic --noinput` with this process's settings); STATIC_ROOT "
            "follows VIRGO_STATIC_ROOT.",
            id="virgo.E021",
        )
    ]
