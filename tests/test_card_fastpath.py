"""The card's WSGI fast path (cards.fastpath): same answers as the full stack, never stale.

Requests go through `PublicCardFastPath` in front of Django's own WSGI handler, as virgo-web
calls virgo.wsgi.application: the first request for a card reaches the view, later ones are
answered from the process's memory while the card's token holds.
"""

import io
import json
import os
import re
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import redis
from django.core.cache import cache
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import override_settings
from django.utils import timezone
from django.utils.http import http_date
from prometheus_client import REGISTRY

from cards import fastpath
from cards.models import PublishedCard
from personas.models import Persona, PersonaClass
from personas.services import persona_delete, persona_set_discoverable
from tests.card_support import call
from tests.factories import (
    REVIEWER_VERBS,
    make_agent,
    make_owner,
    make_persona,
    standing_verbs,
    update_persona,
)
from tests.failing_caches import went_without
from tests.live import RedisServer, free_port
from tests.stored_stamps import record_not_standing
from virgo.outages import SHARED_CACHE
from virgo.settings import redis_cache

pytestmark = pytest.mark.django_db

LEAD = PersonaClass.PROJECT_LEAD
SECURITY_HEADERS = (
    "Content-Security-Policy",
    "X-Frame-Options",
    "X-Content-Type-Options",
    "Referrer-Policy",
)


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def django_app() -> Iterator[WSGIHandler]:
    """Django's WSGI handler, inside the test's transaction (as the test client runs it)."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield WSGIHandler()
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def app(django_app: WSGIHandler) -> fastpath.PublicCardFastPath:
    return fastpath.PublicCardFastPath(django_app)


@pytest.fixture
def owner() -> Any:
    return make_owner()


@pytest.fixture
def persona(owner: Any) -> Persona:
    return make_persona(
        make_agent(owner),
        persona_class=LEAD,
        verb_subset=standing_verbs(LEAD, *REVIEWER_VERBS),
        discoverable=True,
    )


def card_path(persona: Persona) -> str:
    return persona.card_path


def test_the_second_request_is_answered_from_memory_exactly_as_the_first(
    app: Any, persona: Persona, django_assert_num_queries: Any
) -> None:
    """S9-WK-1, S9-HDR-1, S9-HDR-2, S9-HDR-3, S9-HDR-4, S9-HDR-5: the answer from memory has the
    very status, body and headers the full stack gave, and costs no query."""
    first = call(app, card_path(persona))
    with django_assert_num_queries(0):
        second = call(app, card_path(persona))
    assert first[0] == second[0] == 200
    assert first == second
    assert second[1]["Content-Type"] == "application/json"
    assert "default-src 'none'" in second[1]["Content-Security-Policy"].split("; ")
    for name in SECURITY_HEADERS:
        assert name in second[1]
    assert second[2] == bytes(PublishedCard.objects.get(persona=persona).body)


def test_a_304_from_memory_matches_the_views_and_has_no_content_length(
    app: Any, django_app: Any, persona: Persona, django_assert_num_queries: Any
) -> None:
    """S9-HDR-1: the 304 keeps the JSON policy and every security header; neither the view's
    304 nor the memory's announces a length, so no client waits for a body."""
    etag = PublishedCard.objects.get(persona=persona).etag
    from_view = call(app, card_path(persona), headers={"If-None-Match": etag})
    with django_assert_num_queries(0):
        from_memory = call(app, card_path(persona), headers={"If-None-Match": f'"x", W/{etag}'})
    assert from_view == from_memory
    status, headers, body = from_memory
    assert (status, body) == (304, b"")
    assert "Content-Length" not in headers
    assert "Content-Type" not in headers
    assert headers["ETag"] == etag
    assert "default-src 'none'" in headers["Content-Security-Policy"].split("; ")
    assert call(app, card_path(persona), headers={"If-None-Match": '"other"'})[0] == 200


def test_head_from_memory_has_the_headers_of_get_and_no_body(app: Any, persona: Persona) -> None:
    get = call(app, card_path(persona))
    head = call(app, card_path(persona), method="HEAD")
    assert head[0] == 200
    assert head[2] == b""
    assert head[1] == get[1]


def test_a_new_generation_shows_on_the_very_next_request(app: Any, persona: Persona) -> None:
    """S9-WK-2, S9-SCN-4: a card in memory is never served past the change that replaced it."""
    assert call(app, card_path(persona))[0] == 200
    update_persona(persona, verb_subset=standing_verbs(LEAD, *REVIEWER_VERBS, "create_for"))
    card = json.loads(call(app, card_path(persona))[2])
    assert card["version"] == "2"
    assert "delegate-work" in [skill["id"] for skill in card["skills"]]


def test_delisting_takes_the_card_off_at_once(app: Any, persona: Persona, owner: Any) -> None:
    """S9-AUTH-1, S9-DISC-1: delisted, the persona answers the same 404 as a missing id."""
    assert call(app, card_path(persona))[0] == 200
    persona_set_discoverable(persona=persona, actor=owner, discoverable=False, via="test")
    hidden = call(app, card_path(persona))
    missing = call(app, f"/a/{uuid.uuid4()}/.well-known/agent-card.json")
    assert hidden[0] == 404
    assert (hidden[0], hidden[2]) == (missing[0], missing[2])


def test_a_generation_that_stops_standing_takes_the_card_off(app: Any, persona: Persona) -> None:
    """S9-AUTH-1, V1-INV-2: recorded as not standing, the card leaves the public path."""
    assert call(app, card_path(persona))[0] == 200
    generation = persona.generations.get(number=persona.generation)
    # Its stored stamp stays its stamp: the hashes are frozen once set (VX-SEC-8).
    record_not_standing(generation, "not standing: missing tool list_tasks")
    assert call(app, card_path(persona))[0] == 404


def test_a_deleted_persona_is_gone_at_once(app: Any, persona: Persona, owner: Any) -> None:
    assert call(app, card_path(persona))[0] == 200
    persona_delete(persona=persona, actor=owner)
    # Revoked on the way out (VX-TRUST-9): its tombstone, at once.
    assert call(app, card_path(persona))[0] == 410


class Clock:
    """fastpath's `time` module, with a monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    @staticmethod
    def time() -> float:
        return time.time()


@pytest.mark.parametrize(
    ("lifetime", "redis"),
    [(60, "reachable"), (5, "reachable"), (60, "unreachable")],
)
def test_an_entry_past_its_lifetime_is_not_served(
    app: Any,
    persona: Persona,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
    lifetime: int,
    redis: str,
) -> None:
    """S9-WK-2, VX-TRUST-6, VX-REL-1: a card this process holds is served no longer than
    VIRGO_CARD_PROCESS_CACHE_SECONDS after it was loaded, whether its token stays as it was (a
    replacement lost) or cannot be read at all (Redis unreachable, so any entry is served):
    the stored card changes behind the token, memory answers the old bytes until the lifetime
    ends and the database the new ones after it, which are then kept for a lifetime again."""
    settings.VIRGO_CARD_PROCESS_CACHE_SECONDS = lifetime
    caches = settings.CACHES
    if redis == "unreachable":
        caches = {"default": redis_cache(f"redis://127.0.0.1:{free_port()}/0")}
    clock = Clock()
    monkeypatch.setattr(fastpath, "time", clock)
    path = card_path(persona)
    # Undone before the autouse fixture clears the cache.
    with override_settings(CACHES=caches):
        old = call(app, path)[2]
        assert call(app, path)[2] == old
        changed = b'{"changed":"without a new token"}'
        PublishedCard.objects.filter(persona=persona).update(body=changed, etag='"changed"')
        clock.now += lifetime - 0.5
        assert call(app, path)[2] == old
        clock.now += 1
        status, headers, body = call(app, path)
        assert (status, body, headers["ETag"]) == (200, changed, '"changed"')
        PublishedCard.objects.filter(persona=persona).update(body=old, etag='"old"')
        clock.now += lifetime - 0.5
        assert call(app, path)[2] == changed
        clock.now += 1
        assert call(app, path)[2] == old


def test_every_request_counts_once_whichever_path_answers_it(
    app: Any, persona: Persona, settings: Any
) -> None:
    """S9-RL-1: memory answers, view answers, 404s and 405s all spend the same budget, once
    each; the 429 comes from the view with Retry-After and every security header."""
    settings.VIRGO_CARD_RATE_LIMIT = "4/m"
    path = card_path(persona)
    assert call(app, path)[0] == 200  # the view
    assert call(app, path)[0] == 200  # memory
    assert call(app, f"/a/{uuid.uuid4()}/.well-known/agent-card.json")[0] == 404
    assert call(app, path, method="POST")[0] == 405
    status, headers, body = call(app, path)
    assert status == 429
    assert 1 <= int(headers["Retry-After"]) <= 60
    assert json.loads(body)["code"] == "rate_limited"
    for name in SECURITY_HEADERS:
        assert name in headers
    assert call(app, path, address="192.0.2.9")[0] == 200


def test_behind_a_trusted_proxy_each_client_has_its_own_budget(
    app: Any, persona: Persona, settings: Any
) -> None:
    """S9-RL-1: the per-IP limit counts the client the trusted proxy forwarded for, on the
    memory path as on the view's; the proxy's own address is no shared budget."""
    settings.VIRGO_CARD_RATE_LIMIT = "2/m"
    settings.VIRGO_TRUSTED_PROXIES = ["10.0.0.0/8"]
    path = card_path(persona)

    def via_proxy(client: str) -> int:
        return call(app, path, address="10.0.0.5", headers={"X-Forwarded-For": client})[0]

    assert [via_proxy("203.0.113.1") for _ in range(3)] == [200, 200, 429]
    assert via_proxy("203.0.113.2") == 200
    assert via_proxy("192.0.2.1, 203.0.113.1") == 429


def test_a_host_django_refuses_is_refused_from_memory_too(app: Any, persona: Persona) -> None:
    """ALLOWED_HOSTS holds on the fast path: the full stack answers 400."""
    assert call(app, card_path(persona))[0] == 200
    status, headers, _ = call(app, card_path(persona), headers={"Host": "evil.example"})
    assert status == 400
    assert headers["X-Frame-Options"] == "DENY"


@pytest.mark.parametrize(
    ("setting", "allowed", "refused"),
    [
        ({}, {"Host": "testserver"}, {"Host": "evil.example"}),
        (
            {"USE_X_FORWARDED_HOST": True},
            {"X-Forwarded-Host": "testserver"},
            {"X-Forwarded-Host": "evil.example"},
        ),
        ({}, {"Host": None}, {"Host": None, "server_name": "evil.example"}),
    ],
)
def test_a_host_served_from_memory_never_vouches_for_another(
    app: Any, persona: Persona, settings: Any, setting: dict[str, Any], allowed: dict, refused: dict
) -> None:
    """S9-HDR-2: the fast path remembers Django's verdict on each origin it sees; once a card
    was answered from memory for an allowed host (by Host, by X-Forwarded-Host where trusted,
    or by the server's name when no Host is sent), a request for a host Django refuses is still
    refused (400), never answered from the remembered verdict."""
    for name, value in setting.items():
        setattr(settings, name, value)

    def asked(given: dict[str, Any]) -> int:
        given = dict(given)
        server_name = given.pop("server_name", "testserver")
        return call(app, card_path(persona), headers=given, server_name=server_name)[0]

    assert [asked(allowed), asked(allowed)] == [200, 200]  # the second from memory
    assert asked(refused) == 400


def test_a_proxy_saying_https_is_heard_after_plain_http_was_answered_from_memory(
    app: Any, persona: Persona, settings: Any
) -> None:
    """S9-HDR-2: behind a proxy that says HTTPS in a header, a card answered from memory over
    plain HTTP does not make the next request through HTTPS plain too: it carries HSTS."""
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    settings.SECURE_HSTS_SECONDS = 3600
    plain = [call(app, card_path(persona))[1] for _ in range(2)]
    assert all("Strict-Transport-Security" not in headers for headers in plain)
    secure = call(app, card_path(persona), headers={"X-Forwarded-Proto": "https"})[1]
    assert secure["Strict-Transport-Security"] == "max-age=3600"


def test_https_redirect_and_hsts_as_the_full_stack_has_them(
    persona: Persona, settings: Any, django_app: Any
) -> None:
    """S9-HDR-2: with HTTPS required, plain HTTP is redirected by the full stack even when the
    card is in memory, and the HTTPS answer from memory carries HSTS like the view's."""
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 3600
    app = fastpath.PublicCardFastPath(WSGIHandler())
    first = call(app, card_path(persona), scheme="https")
    second = call(app, card_path(persona), scheme="https")
    assert first == second
    assert second[1]["Strict-Transport-Security"] == "max-age=3600"
    status, headers, _ = call(app, card_path(persona))
    assert status == 301
    assert headers["Location"].startswith("https://")


def test_preconditions_the_view_evaluates_fall_through(app: Any, persona: Persona) -> None:
    """If-Match and If-Unmodified-Since are the view's to answer (412), and If-Modified-Since
    (304 for a time after the card's), from memory or not."""
    path = card_path(persona)
    assert [call(app, path)[0], call(app, path)[0]] == [200, 200]  # the second from memory
    assert call(app, path, headers={"If-Match": '"nope"'})[0] == 412
    long_ago, to_come = "Mon, 01 Jan 2001 00:00:00 GMT", "Fri, 01 Jan 2100 00:00:00 GMT"
    assert call(app, path, headers={"If-Unmodified-Since": long_ago})[0] == 412
    assert call(app, path, headers={"If-Modified-Since": to_come})[0] == 304


def fallback_count() -> float:
    return (
        REGISTRY.get_sample_value(
            "virgo_rate_limit_fallbacks_total", {"limit": fastpath.LIMIT_NAME}
        )
        or 0.0
    )


def answered_from_memory() -> float:
    return (
        REGISTRY.get_sample_value(
            "virgo_card_responses_total", {"status": "200", "served_by": "memory"}
        )
        or 0.0
    )


@pytest.mark.parametrize(
    "body_headers", [{"Content-Length": "5"}, {"Transfer-Encoding": "chunked"}]
)
def test_a_request_with_a_body_is_the_views_to_answer(
    app: Any, persona: Persona, body_headers: dict[str, str]
) -> None:
    """A card request that says it carries a body (a length, or chunks) goes to Django, which
    reads (and limits) bodies; only a plain GET or HEAD, or one whose length is empty or 0, is
    answered from memory."""
    path = card_path(persona)
    call(app, path)
    before = answered_from_memory()
    for plain in ({"Content-Length": ""}, {"Content-Length": "0"}, {}):
        assert call(app, path, headers=plain)[0] == 200
    assert answered_from_memory() == before + 3
    call(app, path, headers=body_headers)
    assert answered_from_memory() == before + 3


def test_rates_read_as_django_ratelimit_writes_them() -> None:
    assert fastpath.parse_rate("60/m") == (60, 60)
    assert fastpath.parse_rate("100/5m") == (100, 300)
    assert fastpath.parse_rate("1000/h") == (1000, 3600)
    with pytest.raises(ValueError):
        fastpath.parse_rate("sixty a minute")


def test_ipv6_sources_count_per_64() -> None:
    """S9-RL-1: one IPv6 host cannot dodge its limit by cycling addresses inside its /64."""
    assert fastpath.client_key("2001:db8::1") == fastpath.client_key("2001:db8::ffff:1")
    assert fastpath.client_key("2001:db8::1") != fastpath.client_key("2001:db8:0:1::1")
    assert fastpath.client_key("192.0.2.1") == "192.0.2.1"


@pytest.fixture(params=["tcp", "unix-socket"])
def redis_location(request: pytest.FixtureRequest) -> str:
    """The test Redis over TCP (REDIS_URL) and over its Unix socket (REDIS_CACHE_URL)."""
    name = "test_redis_url" if request.param == "tcp" else "test_redis_cache_url"
    return str(request.getfixturevalue(name))


@pytest.mark.live
@pytest.mark.mutation
def test_one_redis_call_counts_and_reads_the_token(
    app: Any, persona: Persona, settings: Any, redis_location: str
) -> None:
    """S9-RL-1: on Redis (django-redis, as with REDIS_URL or REDIS_CACHE_URL) the count and the
    card token are one script call: the limit holds per address, and a change replaces the
    token."""
    settings.CACHES = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": redis_location,
            "KEY_PREFIX": f"fastpath-{uuid.uuid4().hex}",
        }
    }
    settings.VIRGO_CARD_RATE_LIMIT = "3/m"
    store = fastpath._Store()
    assert store.script is not None
    address = f"203.0.113.{uuid.uuid4().int % 250 + 1}"
    path = card_path(persona)
    assert [call(app, path, address=address)[0] for _ in range(4)] == [200, 200, 200, 429]
    # Redis restarted without the script: it is loaded again, and the count goes on.
    store.redis.script_flush()
    assert call(app, path, address=address)[0] == 429
    token_key = store.cache.make_key("virgo:card-token:" + str(persona.uuid))
    before = store.redis.get(token_key)
    fastpath.card_changed([persona.uuid])
    after = store.redis.get(token_key)
    assert after not in (None, before)
    assert store.redis.ttl(token_key) > fastpath.card_cache_seconds()
    # The count and the token read in that one call: the address's count, the persona's token.
    counted, left, token = store.count_and_token(address, str(persona.uuid), 60)
    assert (counted, token) == (6, after.decode())
    assert 0 < left <= 60
    assert store.count_and_token(address, str(uuid.uuid4()), 60)[2] is None


@pytest.mark.live
@pytest.mark.mutation
def test_a_redis_restart_costs_no_request_and_no_count(
    app: Any, persona: Persona, private_redis: RedisServer
) -> None:
    """S9-RL-1, VX-REL-1: each server thread keeps one connection for the count. After Redis
    restarts it is found stale, replaced, and the call made again: the next request is counted in
    Redis as before, nothing falls back to the process's own count, nothing is taken for down.
    While Redis is stopped a request is counted in the process; once it is back, in Redis again."""
    path = card_path(persona)
    store = fastpath._shared

    def redis_counts() -> list[int]:
        return [int(store().redis.get(key)) for key in store().redis.keys("*card-rl*")]

    # Inside the test: the cache fixture's clean-up must not meet this Redis stopped.
    with override_settings(
        CACHES={"default": redis_cache(private_redis.url)},
        VIRGO_CARD_RATE_LIMIT="3/m",
        VIRGO_DEGRADED_RETRY_SECONDS=0,
    ):
        assert call(app, path)[0] == 200
        kept = store()._local.connection
        assert call(app, path)[0] == 200
        assert store()._local.connection is kept
        private_redis.stop()
        private_redis.start()
        fallbacks = fallback_count()
        assert [call(app, path)[0] for _ in range(4)] == [200, 200, 200, 429]
        assert fallback_count() == fallbacks
        assert SHARED_CACHE.should_try("card")
        assert redis_counts() == [4]

        private_redis.stop()
        assert call(app, path, address="192.0.2.77")[0] == 200
        assert fallback_count() == fallbacks + 1
        private_redis.start()
        assert call(app, path, address="192.0.2.77")[0] == 200
        assert fallback_count() == fallbacks + 1
        assert redis_counts() == [1]


@pytest.mark.live
@pytest.mark.mutation
def test_a_redis_outage_is_logged_and_counted_by_what_went_without_it(
    app: Any, persona: Persona, private_redis: RedisServer, caplog: Any
) -> None:
    """VX-REL-1, VX-REL-3: with Redis down, the operator's WARNING names the card's count and,
    apart, a card token's replacement, each with the error; every call that went without Redis
    is counted under its own use (virgo_unavailable_total), a skipped call as a failed one."""
    path = card_path(persona)
    with override_settings(
        CACHES={"default": redis_cache(private_redis.url)}, VIRGO_DEGRADED_RETRY_SECONDS=300
    ):
        assert call(app, path)[0] == 200
        private_redis.stop()
        counted = went_without("card")
        with caplog.at_level("WARNING", logger="virgo.outages"):
            assert call(app, path, address="192.0.2.80")[0] == 200
        [line] = [r.getMessage() for r in caplog.records if r.name == "virgo.outages"]
        assert re.match(r"Redis \(the cache\) is unreachable \(card, \w*Error: \S", line), line
        assert call(app, path, address="192.0.2.81")[0] == 200
        assert went_without("card") == counted + 2

        tokens = went_without("card_token")
        fastpath.card_changed([persona.uuid])
        assert went_without("card_token") == tokens + 1
        SHARED_CACHE.forget()
        caplog.clear()
        with caplog.at_level("WARNING", logger="virgo.outages"):
            fastpath.card_changed([persona.uuid])
        [line] = [r.getMessage() for r in caplog.records if r.name == "virgo.outages"]
        assert re.match(r"Redis \(the cache\) is unreachable \(card_token, \w*Error: \S", line)
        assert went_without("card_token") == tokens + 2
        private_redis.start()


# The embedded default's shared card tokens -----------------------------------------------------


def test_a_change_another_process_makes_is_seen_through_the_token_files(
    app: Any, persona: Persona, django_assert_num_queries: Any
) -> None:
    """VX-TRUST-6: without Redis, a card token is a file under VIRGO_HOME that every process
    reads: a change written by another process's store (the CLI's) moves the token this process
    reads next, so the card held in memory is not served again; before any change there is no
    file and no token."""
    other_process = fastpath._Store()
    uuid_text = str(persona.uuid)
    assert other_process._read_token_file(str(uuid.uuid4())) is None
    call(app, card_path(persona))
    with django_assert_num_queries(0):
        call(app, card_path(persona))
    before = fastpath._shared()._read_token_file(uuid_text)
    other_process.replace_tokens([uuid_text])
    after = fastpath._shared()._read_token_file(uuid_text)
    assert after is not None and after != before and len(after) == 16
    assert (other_process.token_files / uuid_text).read_text() == after
    served = call(app, card_path(persona))
    assert served[0] == 200
    assert fastpath._entries[uuid_text].token == after


def test_an_unreadable_token_file_sends_every_request_to_the_database(
    app: Any, persona: Persona, django_assert_max_num_queries: Any
) -> None:
    """VX-TRUST-6: a token that cannot be read (here a directory in the file's place) is never
    one a card was kept under, so nothing is answered from memory; the card is still served."""
    store = fastpath._shared()
    token_file = store.token_files / str(persona.uuid)
    token_file.unlink()
    token_file.mkdir()
    first = store._read_token_file(str(persona.uuid))
    assert first is not None and first != store._read_token_file(str(persona.uuid))
    call(app, card_path(persona))
    second = call(app, card_path(persona))
    assert second[0] == 200
    assert fastpath._entries[str(persona.uuid)].token != store._read_token_file(str(persona.uuid))


def test_a_token_that_cannot_be_written_leaves_the_change_standing(
    persona: Persona, settings: Any, tmp_path: Any, caplog: Any
) -> None:
    """VX-TRUST-6: with VIRGO_HOME unwritable (a file where the token directory should be),
    the change commits and the failure is logged, naming where."""
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    settings.VIRGO_HOME = blocked
    with caplog.at_level("WARNING", logger="cards.fastpath"):
        persona_set_discoverable(
            persona=persona, actor=persona.agent.owner, discoverable=False, via="test"
        )
    assert Persona.objects.get(pk=persona.pk).discoverable is False
    [line] = [r.getMessage() for r in caplog.records if r.name == "cards.fastpath"]
    assert re.fullmatch(
        rf"card tokens under {re.escape(str(blocked / 'card-tokens'))} not written: "
        r"\[Errno \d+\] .+",
        line,
    ), line


def test_the_token_files_are_the_owners_alone(
    persona: Persona, settings: Any, tmp_path: Any
) -> None:
    """VX-TRUST-6, VX-SEC-6: the token directory is made with its missing parents, 0700, and each
    token file 0600, whatever the umask would give, like everything under VIRGO_HOME."""
    settings.VIRGO_HOME = tmp_path / "not" / "yet" / "made"
    store = fastpath._Store()
    umask = os.umask(0o022)
    try:
        store.replace_tokens([str(persona.uuid)])
    finally:
        os.umask(umask)
    assert store.token_files.stat().st_mode & 0o777 == 0o700
    assert (store.token_files / str(persona.uuid)).stat().st_mode & 0o777 == 0o600


# The count without Redis ------------------------------------------------------------------------


def test_without_redis_each_address_counts_in_a_window_from_its_first_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """S9-RL-1: in the embedded default the count is the process's: an address's window opens at
    its first request and the time left is its remainder in whole seconds rounded up (0 only
    with under a millisecond left); another address has its own window; a window that ended
    starts again at 1; a count the cache evicted while its window stands starts again at 1 in
    that window and goes on from there."""
    clock = [1000.0]
    # The local-memory cache expires by the same clock.
    monkeypatch.setattr(fastpath.time, "time", lambda: clock[0])
    store = fastpath._Store()

    def counts(*steps: tuple[float, str]) -> list[tuple[int, int]]:
        answers = []
        for at, address in steps:
            clock[0] = at
            answers.append(store._count_in_process(address, 60))
        return answers

    assert counts((1000.0, "a"), (1010.5, "a"), (1030.0, "b"), (1040.0, "b")) == [
        (1, 60),
        (2, 50),
        (1, 60),
        (2, 50),
    ]
    assert counts((1059.9995, "a"), (1060.5, "a")) == [(3, 0), (1, 60)]
    store.cache.delete("a")
    assert counts((1070.5, "a"), (1070.5, "a")) == [(1, 50), (2, 50)]
    # The evicted count came back with a lifetime of its own, past its window's end: the next
    # window still starts from nothing.
    assert counts((1121.0, "a")) == [(1, 60)]


# The WSGI wrappers and the memory's edges -------------------------------------------------------


def test_from_memory_the_status_lines_and_the_cards_own_date_are_the_views(
    app: Any, persona: Persona
) -> None:
    """S9-HDR-1: a card published an hour ago says so from memory as from the view (its own
    Last-Modified, not the time it was served), under the standard status lines."""
    hour_ago = timezone.now() - timedelta(hours=1)
    PublishedCard.objects.filter(persona=persona).update(last_modified=hour_ago)
    lines: list[str] = []

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        lines.append(status)

    def answer(**headers: str) -> dict[str, str]:
        return call(app, card_path(persona), headers=dict(headers))[1]

    from_view, from_memory = answer(), answer()
    assert (
        from_view["Last-Modified"]
        == from_memory["Last-Modified"]
        == http_date(int(hour_ago.timestamp()))
    )
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": card_path(persona),
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "HTTP_HOST": "testserver",
        "REMOTE_ADDR": "198.51.100.7",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(b""),
    }
    app(environ, start_response)
    app({**environ, "HTTP_IF_NONE_MATCH": from_memory["ETag"]}, start_response)
    assert lines == ["200 OK", "304 Not Modified"]


def test_if_none_match_star_or_a_list_without_spaces_is_answered_304_from_memory(
    app: Any, persona: Persona
) -> None:
    """S9-HDR-1: `*` matches any current card; a list's members may be written without spaces
    (RFC 9110's #list), the card's ETag among them."""
    etag = call(app, card_path(persona))[1]["ETag"]
    served = answered_from_memory()
    assert call(app, card_path(persona), headers={"If-None-Match": " * "})[0] == 304
    assert call(app, card_path(persona), headers={"If-None-Match": f'"x",{etag}'})[0] == 304
    assert answered_from_memory() == served
    assert (
        REGISTRY.get_sample_value(
            "virgo_card_responses_total", {"status": "304", "served_by": "memory"}
        )
        >= 2
    )


def test_the_memory_keeps_at_most_its_bound_dropping_the_oldest(
    app: Any, persona: Persona, owner: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """S9-WK-1: a process keeps at most MAX_ENTRIES cards; one more drops the oldest."""
    monkeypatch.setattr(fastpath, "MAX_ENTRIES", 2)
    agent = make_agent(owner)
    others = [
        make_persona(
            agent,
            name=f"Other {n}",
            persona_class=LEAD,
            verb_subset=standing_verbs(LEAD, *REVIEWER_VERBS),
            discoverable=True,
        )
        for n in range(2)
    ]
    for each in (persona, *others):
        assert call(app, card_path(each))[0] == 200
    assert list(fastpath._entries) == [str(others[0].uuid), str(others[1].uuid)]


def test_the_wrappers_pass_an_error_on_to_the_server() -> None:
    """PEP 3333: a start_response called with exc_info (an application reporting an error after
    its headers) reaches the server with it, through both of the fast path's wrappers."""
    seen: list[tuple[Any, ...]] = []

    def start_response(*arguments: Any) -> str:
        seen.append(arguments)
        return "write"

    wrapped = fastpath._counted(fastpath._without_304_length(start_response))
    error = (ValueError, ValueError("late"), None)
    assert wrapped("500 Internal Server Error", [("X", "1")], error) == "write"
    assert wrapped("304 Not Modified", [("Content-Length", "9"), ("ETag", '"e"')]) == "write"
    assert seen == [
        ("500 Internal Server Error", [("X", "1")], error),
        ("304 Not Modified", [("ETag", '"e"')]),
    ]


def test_a_limited_request_in_its_windows_last_second_waits_one_second(
    persona: Persona, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """S9-RL-1: Retry-After is never 0 nor more than what is left: 1 with under a second left."""
    settings.VIRGO_CARD_RATE_LIMIT = "1/m"
    clock = [2000.0]
    monkeypatch.setattr(fastpath.time, "time", lambda: clock[0])
    environ = {"REMOTE_ADDR": "192.0.2.61"}
    assert not fastpath.count(environ, str(persona.uuid)).limited
    clock[0] = 2059.5
    usage = fastpath.count(environ, str(persona.uuid))
    assert (usage.limited, usage.retry_after) == (True, 1)


def card_token(persona: Persona) -> Any:
    return fastpath._shared().count_and_token("192.0.2.1", str(persona.uuid), 60)[2]


def test_a_persona_deleted_moves_its_card_token_again_once_committed(
    persona: Persona, owner: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """S9-WK-1: the delete replaces the card's token at once and once more after its commit, so
    a process that read the rows in between reloads (and finds no card)."""
    before = card_token(persona)
    with django_capture_on_commit_callbacks(execute=True):
        persona_delete(persona=persona, actor=owner)
        inside = card_token(persona)
    assert before != inside != card_token(persona)


def test_a_token_file_that_is_not_ascii_is_read_as_a_token_no_entry_was_kept_under(
    app: Any, persona: Persona
) -> None:
    """VX-TRUST-6: a token file spoiled on disk never breaks the card: it reads as some other
    token, so the card comes from the database."""
    assert call(app, card_path(persona))[0] == 200
    token_file = fastpath._shared().token_files / str(persona.uuid)
    token_file.write_bytes(b"\xff" * 16)
    served = answered_from_memory()
    assert call(app, card_path(persona))[0] == 200
    assert answered_from_memory() == served


@pytest.mark.live
@pytest.mark.mutation
def test_a_token_key_outlives_every_entry_kept_under_it(
    persona: Persona, settings: Any, test_redis_url: str
) -> None:
    """VX-TRUST-6: a card token in Redis lives three entry lifetimes and a minute, so no entry a
    process still holds can outlive the token it was stored under and meet it again."""
    settings.CACHES = {"default": redis_cache(test_redis_url)}
    settings.VIRGO_CARD_PROCESS_CACHE_SECONDS = 10
    fastpath.card_changed([persona.uuid])
    store = fastpath._shared()
    ttl = store.redis.ttl(store.cache.make_key("virgo:card-token:" + str(persona.uuid)))
    assert 3 * 10 + 60 - 5 <= ttl <= 3 * 10 + 60


@pytest.mark.live
@pytest.mark.mutation
def test_the_count_and_the_token_are_written_on_the_primary_never_a_replica(
    app: Any, persona: Persona, settings: Any, test_redis_url: str
) -> None:
    """S9-RL-1: with a read replica configured beside the primary (django-redis reads from the
    replicas), the script that counts a request and reads the token still runs on the primary:
    the count is what every process shares."""
    replica_url = re.sub(r"/0$", "/1", test_redis_url)
    assert replica_url != test_redis_url
    prefix = f"primary-{uuid.uuid4().hex}"
    settings.CACHES = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": [test_redis_url, replica_url],
            "KEY_PREFIX": prefix,
        }
    }
    assert call(app, card_path(persona), address="203.0.113.40")[0] == 200
    primary, replica = (redis.Redis.from_url(url) for url in (test_redis_url, replica_url))
    assert primary.keys(f"{prefix}:*card-rl*")
    assert not replica.keys(f"{prefix}:*")


def test_a_change_drops_this_processs_own_entry_whatever_the_token_does(
    app: Any, persona: Persona
) -> None:
    """VX-REL-1: a change drops the card this process holds at once, without waiting on the
    token, so a process whose token write is lost (Redis away) does not serve the old card."""
    assert call(app, card_path(persona))[0] == 200
    assert str(persona.uuid) in fastpath._entries
    fastpath.card_changed([persona.uuid])
    assert str(persona.uuid) not in fastpath._entries


def test_a_save_of_the_columns_no_card_shows_leaves_the_token(persona: Persona) -> None:
    """VX-TRUST-6: a save naming only columns the public card does not show (the skill-map
    revision and the update time, as a recompute that changes nothing writes) keeps the token,
    and with it every process's card in memory."""
    before = card_token(persona)
    persona.save(update_fields=["skill_map_revision", "updated_at"])
    assert card_token(persona) == before
    persona.save(update_fields=["skill_map_revision", "updated_at", "description"])
    assert card_token(persona) != before


def test_a_discoverability_save_moves_the_token_again_once_committed(
    persona: Persona, django_capture_on_commit_callbacks: Any
) -> None:
    """S9-DIR-2, VX-TRUST-6: a discoverability switch has no task to publish after it, so its
    save replaces the token at once and once more after the commit (a process that read the row
    in between reloads); a save of other columns leaves that second replacement to its task."""
    for fields, again_after_commit in (["discoverable"], True), (["description"], False):
        with django_capture_on_commit_callbacks(execute=True):
            persona.save(update_fields=fields)
            inside = card_token(persona)
        assert (card_token(persona) != inside) is again_after_commit, fields


@pytest.mark.live
@pytest.mark.mutation
def test_once_the_script_is_loaded_each_request_is_one_evalsha(
    app: Any, persona: Persona, private_redis: RedisServer
) -> None:
    """S9-RL-1: the script is loaded once; after that every card request costs Redis one EVALSHA
    by the script's digest, never another SCRIPT LOAD."""
    with override_settings(CACHES={"default": redis_cache(private_redis.url)}):
        assert call(app, card_path(persona))[0] == 200
        server = redis.Redis.from_url(private_redis.url)
        server.config_resetstat()
        assert [call(app, card_path(persona))[0] for _ in range(3)] == [200, 200, 200]
        commands = server.info("commandstats")
    assert commands["cmdstat_evalsha"]["calls"] == 3
    assert not [name for name in commands if name.startswith("cmdstat_script")]
