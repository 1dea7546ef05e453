"""Production settings without a shared cache for the rate limits are refused (VX-SEC-12)."""

from typing import Any

import pytest

from virgo.checks import check_rate_limit_cache

LOCAL_MEMORY = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
REDIS = {"default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": "redis://x:1/0"}}


@pytest.fixture
def production(settings: Any) -> Any:
    settings.DEBUG = False
    settings.EMBEDDED = False
    settings.LOCAL = False
    settings.VIRGO_RATE_LIMITS_PER_PROCESS = False
    return settings


def test_a_per_process_cache_outside_local_mode_is_an_error(production: Any) -> None:
    """VX-SEC-12: every limit would count in each web process: refused, naming the fix."""
    production.CACHES = LOCAL_MEMORY
    (error,) = check_rate_limit_cache()
    assert error.id == "virgo.E020"
    assert error.is_serious()
    assert "rate limits would count in each process" in error.msg
    assert "LocMemCache" in error.msg
    assert "REDIS_URL" in error.hint and "VIRGO_RATE_LIMITS_PER_PROCESS=1" in error.hint


@pytest.mark.parametrize(
    "backend",
    ["django.core.cache.backends.dummy.DummyCache", "django.core.cache.backends.db.DatabaseCache"],
)
def test_caches_that_cannot_count_for_every_process_are_errors(
    production: Any, backend: str
) -> None:
    """VX-SEC-12: a cache that keeps nothing, or increments without atomicity, is no better."""
    production.CACHES = {"default": {"BACKEND": backend, "LOCATION": "x"}}
    assert [m.id for m in check_rate_limit_cache()] == ["virgo.E020"]


def test_the_cache_the_limits_use_is_the_one_checked(production: Any) -> None:
    """VX-SEC-12: RATELIMIT_USE_CACHE names the cache; a shared default does not hide it."""
    production.CACHES = {**REDIS, "limits": LOCAL_MEMORY["default"]}
    production.RATELIMIT_USE_CACHE = "limits"
    assert [m.id for m in check_rate_limit_cache()] == ["virgo.E020"]


def test_a_shared_cache_a_stated_single_process_and_local_mode_pass(production: Any) -> None:
    """VX-SEC-12: Redis passes; so does VIRGO_RATE_LIMITS_PER_PROCESS, and local mode."""
    production.CACHES = REDIS
    assert check_rate_limit_cache() == []
    production.CACHES = LOCAL_MEMORY
    production.VIRGO_RATE_LIMITS_PER_PROCESS = True
    assert check_rate_limit_cache() == []
    production.VIRGO_RATE_LIMITS_PER_PROCESS = False
    production.LOCAL = True
    assert check_rate_limit_cache() == []
