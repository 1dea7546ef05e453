"""The public card's hot path: one cache round trip per request, card bytes kept per process.

Every request for `/a/<uuid>/.well-known/agent-card.json` makes exactly one call to the shared
cache (Redis in production): a small Lua script that counts the request against its source
address (the SPEC-0009 per-IP limit) and, in the same round trip, reads the persona's card
token. Without Redis (the embedded default) the count is the one server process's, and the
token is a small file under VIRGO_HOME that every process on the machine shares. The token is
a random value written whenever anything the public card depends on changes (a new generation,
a published card, discoverability, standing, deletion), both inside the changing transaction
and again right after it commits.

Each web process keeps the public cards it has served, with the token it read before loading
them. A request whose token still matches is answered from memory, with bytes and headers
computed once, by a thin WSGI layer in front of Django (virgo.wsgi): no database, no Django
request, no middleware run; the security headers it sends were computed by those very
middleware layers. Anything else (a token that moved, an unknown or hidden persona, the
owner's preview, another method, a body, If-Match, If-Modified-Since alone, a Host Django
refuses, a redirect to HTTPS) goes on to Django and the card view, which reuses the count. The
test client, and any server that calls Django without this layer, reach the view directly: the
same answers, without the memory.

Why no stale card is served once a change has committed: a process keeps a card only under a
token read before its database read, and the token is replaced after the commit, so the next
request sees a new token and reloads. Should that write be lost (the cache unreachable just
then), an entry still expires after VIRGO_CARD_PROCESS_CACHE_SECONDS; the token keys outlive
that age, so an expired key cannot bring back a token an entry was stored under.

While Redis cannot be reached (VX-REL-1; virgo.outages) the count is kept in this process alone
(virgo.limits) and the token is unread: a card this process holds is served until its entry
expires, any other comes from the database and is kept under a token no real one equals, so it
is reloaded once Redis answers again. A change made meanwhile drops this process's own entry at
once; other processes serve what they hold for at most VIRGO_CARD_PROCESS_CACHE_SECONDS.
"""

import io
import logging
import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.core.exceptions import DisallowedHost
from django.core.handlers.wsgi import WSGIRequest
from django.core.signals import setting_changed
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseBase, HttpResponseNotModified
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.security import SecurityMiddleware
from django.utils.http import http_date
from redis.exceptions import NoScriptError

from virgo import metrics, persona_tokens
from virgo.clients import client_address
from virgo.limits import IN_PROCESS, client_key, parse_rate
from virgo.outages import REDIS_ERRORS, SHARED_CACHE
from virgo.persona_tokens import Token

# The UUID converter's own pattern, so the fast path claims exactly the URLs the view serves.
CARD_ROUTE = "a/<uuid:persona_id>/.well-known/agent-card.json"
CARD_PATH = re.compile(
    r"/a/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
    r"/\.well-known/agent-card\.json"
)
READ_METHODS = ("GET", "HEAD")
# Where the fast path leaves its count for the view (a WSGI environ key, so request.META).
USAGE_KEY = "virgo.card_usage"
# The card's limit as the metrics name it (virgo.metrics).
LIMIT_NAME = "virgo.agent-card"
# How many cards one process keeps. A card is ~2 KB; only advertised cards are kept.
MAX_ENTRIES = 4096
_KEY_COUNT = "virgo:card-rl:"
logger = logging.getLogger(__name__)

# KEYS[1] the address's counter, KEYS[2] the persona's card token; ARGV[1] the window.
# The window starts at an address's first request: INCR, and EXPIRE only when no TTL is set,
# in one atomic step, so concurrent workers never lose a count or leave a counter immortal.
_COUNT_AND_TOKEN = """
local count = redis.call('INCR', KEYS[1])
local ttl = redis.call('TTL', KEYS[1])
if ttl < 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {count, ttl, redis.call('GET', KEYS[2])}
"""


@dataclass(frozen=True, slots=True)
class Usage:
    """One counted card request: over the limit or not, and the card token read with it."""

    limited: bool
    retry_after: int
    token: str | Token | None


@dataclass(frozen=True, slots=True)
class _Entry:
    token: str | Token | None
    expires: float
    body: bytes
    etag: str
    # Complete header lists, security headers included, keyed by (secure, not_modified).
    headers: dict[tuple[bool, bool], list[tuple[str, str]]]


# The shared cache -------------------------------------------------------------------------------


class _Store:
    """The rate-limit counter and the card tokens on the configured cache, one call each way.

    Without Redis (the embedded default), the counter stays in the one server process's memory,
    but the tokens are files under VIRGO_HOME: every process on the machine (the server, the
    CLI, an eager task) writes and reads the same ones, so a change made by any of them is seen
    on the server's next request (VX-TRUST-6). A token file is only ever replaced, never
    removed, so no token read after a change can equal one read before it.
    """

    def __init__(self) -> None:
        self.cache = caches[settings.RATELIMIT_USE_CACHE]
        self.redis = persona_tokens.redis_client(self.cache)
        self.script = self.redis.register_script(_COUNT_AND_TOKEN) if self.redis else None
        self.token_files = persona_tokens.token_directory()
        # Tokens outlive every entry stored under them (see the module docstring).
        self.token_ttl = 3 * card_cache_seconds() + 60
        # Each server thread keeps one connection of its own for the script: redis-py's pool,
        # retry and deprecation wrappers cost a third of a card request's Python time.
        self._local = threading.local()

    def count_and_token(
        self, address: str, persona: str, window: int
    ) -> tuple[int, int, str | Token | None]:
        count_key = self.cache.make_key(_KEY_COUNT + address)
        token_key = self.cache.make_key(persona_tokens.KEY_PREFIX + persona)
        if self.script is None:
            count, ttl = self._count_in_process(count_key, window)
            return count, ttl, self._read_token_file(persona)
        if SHARED_CACHE.should_try("card"):
            try:
                count, ttl, token = self._run_script(count_key, token_key, window)
            except REDIS_ERRORS as error:
                SHARED_CACHE.failed("card", error)
            else:
                SHARED_CACHE.succeeded()
                return int(count), int(ttl), token.decode() if token is not None else None
        metrics.RATE_LIMIT_FALLBACKS.labels(LIMIT_NAME).inc()
        count, ttl = IN_PROCESS.hit(count_key, window)
        return count, ttl, Token.UNREAD

    def _run_script(self, *arguments: object) -> list[Any]:
        """EVALSHA on this thread's connection; the script is loaded once if Redis lacks it.

        A connection found stale (Redis restarted since its last use) is replaced and the call
        made once more, by the retry policy the cache's connections carry (settings).
        """
        assert self.script is not None
        connection = getattr(self._local, "connection", None)
        if connection is None or self._local.pid != os.getpid():
            # A forked child never shares its parent's socket.
            connection = self._local.connection = self.redis.connection_pool.make_connection()
            self._local.pid = os.getpid()

        def run() -> list[Any]:
            try:
                connection.send_command("EVALSHA", self.script.sha, 2, *arguments)
                return connection.read_response()
            except NoScriptError:
                connection.send_command("SCRIPT", "LOAD", _COUNT_AND_TOKEN)
                connection.read_response()
                connection.send_command("EVALSHA", self.script.sha, 2, *arguments)
                return connection.read_response()

        try:
            return connection.retry.call_with_retry(run, lambda error: connection.disconnect())
        except REDIS_ERRORS:
            # The next call connects afresh.
            connection.disconnect()
            self._local.connection = None
            raise

    def _count_in_process(self, count_key: str, window: int) -> tuple[int, int]:
        """Any other cache backend (the embedded local-memory one): add and incr."""
        cache = self.cache
        now = time.time()
        if cache.add(count_key + ":ends", now + window, window):
            cache.set(count_key, 0, window)
        ends = cache.get(count_key + ":ends") or now + window
        try:
            count = cache.incr(count_key)
        except ValueError:
            cache.set(count_key, 1, window)
            count = 1
        return count, max(int(ends - now + 0.999), 0)

    def _read_token_file(self, persona: str) -> str | Token | None:
        return persona_tokens.read_file(self.token_files, persona)

    def _write_token_files(self, personas: Iterable[str]) -> None:
        """A new token for each persona, each file replaced whole (readers see old or new)."""
        self.token_files.mkdir(mode=0o700, parents=True, exist_ok=True)
        for persona in personas:
            token = secrets.token_hex(8)
            temporary = self.token_files / f".{persona}.{token}"
            # Owner-private like everything under VIRGO_HOME.
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(token.encode())
            os.replace(temporary, self.token_files / persona)

    def replace_tokens(self, personas: list[str]) -> None:
        if not personas:
            return
        if self.redis is None:
            try:
                self._write_token_files(personas)
            except OSError as error:
                # The change itself stands; other processes serve what they hold until it
                # expires (VIRGO_CARD_PROCESS_CACHE_SECONDS), as while Redis is unreachable.
                logger.warning("card tokens under %s not written: %s", self.token_files, error)
            return
        # Lost while Redis is unreachable: entries that other processes hold expire instead.
        if not SHARED_CACHE.should_try("card_token"):
            return
        pipeline = self.redis.pipeline(transaction=False)
        for persona in personas:
            key = self.cache.make_key(persona_tokens.KEY_PREFIX + persona)
            pipeline.set(key, secrets.token_hex(8), ex=self.token_ttl)
        try:
            pipeline.execute()
        except REDIS_ERRORS as error:
            SHARED_CACHE.failed("card_token", error)
        else:
            SHARED_CACHE.succeeded()


_store: _Store | None = None


def _shared() -> _Store:
    global _store
    if _store is None:
        _store = _Store()
    return _store


def card_cache_seconds() -> int:
    return persona_tokens.kept_seconds()


# Counting -----------------------------------------------------------------------------------------


def count_card_request(request: HttpRequest, persona: str) -> Usage:
    """Count this request against its source address, once, and read the persona's card token.

    The fast path counts before anything else; the card view, reached by a request the fast path
    handed on, finds the usage recorded on the request and does not count again.
    """
    recorded: Usage | None = request.META.get(USAGE_KEY)
    if recorded is None:
        recorded = request.META[USAGE_KEY] = count(request.META, persona)
    return recorded


def count(environ: dict[str, Any], persona: str) -> Usage:
    limit, window = parse_rate(settings.VIRGO_CARD_RATE_LIMIT)
    address = client_key(client_address(environ))
    requests, ttl, token = _shared().count_and_token(address, persona, window)
    if requests > limit:
        metrics.RATE_LIMIT_REFUSALS.labels("card").inc()
    return Usage(limited=requests > limit, retry_after=max(ttl, 1), token=token)


# Invalidation -------------------------------------------------------------------------------------


def card_changed(persona_uuids: Iterable[object], *, after_commit: bool = False) -> None:
    """Something a public card depends on changed for these personas: replace their tokens.

    Replaced at once, so nothing served before the change is served again. A process that
    reads the database between this and the commit still sees the old rows, and could keep
    them under the new token; so every change is followed by one more replacement once it has
    committed. For new generations and stamp outcomes that is publish_card's, which runs after
    them in the same task; other changes ask for it here with `after_commit`.
    """
    personas = [str(persona) for persona in persona_uuids]
    if not personas:
        return
    for persona in personas:
        # This process needs no token to know: it reloads at once, whatever Redis does.
        _entries.pop(persona, None)
    _shared().replace_tokens(personas)
    if after_commit:
        transaction.on_commit(lambda: _shared().replace_tokens(personas))


# Columns whose change alone leaves the public card as it was.
_CARD_NEUTRAL = frozenset({"skill_map_revision", "updated_at"})


def persona_saved(sender: type, instance: Any, update_fields: Any = None, **kwargs: Any) -> None:
    """Every save of a persona row, whoever makes it (services, admin).

    A new generation is followed by its task, whose publish_card replaces the token again after
    the commit; a discoverability switch has no task, so it asks for that replacement itself.
    """
    if update_fields is not None and set(update_fields) <= _CARD_NEUTRAL:
        return
    after_commit = update_fields is not None and "discoverable" in update_fields
    card_changed([instance.uuid], after_commit=after_commit)


def persona_deleted(sender: type, instance: Any, **kwargs: Any) -> None:
    """Deletes, cascades included: the card must go once the delete has committed."""
    card_changed([instance.uuid], after_commit=True)


def personas_written(
    sender: type, uuids: Iterable[object], after_commit: bool = False, **kwargs: Any
) -> None:
    """Persona rows written in bulk or by a queryset update (personas.signals): a recompute's
    new generations, a stamp's outcome, a quarantine or its end."""
    card_changed(uuids, after_commit=after_commit)


# The per-process card cache ----------------------------------------------------------------------

_entries: dict[str, _Entry] = {}
_security_headers: dict[tuple[bool, bool], dict[str, str]] = {}
_origins: dict[tuple[object, ...], bool | None] = {}


def remember(
    persona: str, *, usage: Usage, body: bytes, etag: str, last_modified: int, cache_control: str
) -> None:
    """Keep a public card this process has just served from the database, under its token."""
    if len(_entries) >= MAX_ENTRIES:
        _entries.pop(next(iter(_entries)))
    validators = {
        "ETag": etag,
        "Last-Modified": http_date(last_modified),
        "Cache-Control": cache_control,
    }
    full = {"Content-Type": "application/json", "Content-Length": str(len(body)), **validators}
    _entries[persona] = _Entry(
        token=usage.token,
        expires=time.monotonic() + card_cache_seconds(),
        body=body,
        etag=etag,
        headers={
            (secure, not_modified): list(
                {
                    **(validators if not_modified else full),
                    **_header_layers(secure=secure, not_modified=not_modified),
                }.items()
            )
            for secure in (False, True)
            for not_modified in (False, True)
        },
    )


def _header_layers(*, secure: bool, not_modified: bool) -> dict[str, str]:
    """What the outer header middleware adds to a card response, computed by running it once.

    XFrameOptions, the JSON-aware CSP and SecurityMiddleware are asked for their headers on a
    template response, so the fast path can never drift from what the full stack sends.
    """
    key = (secure, not_modified)
    if key not in _security_headers:
        from virgo.middleware import ContentTypeCSPMiddleware

        request = HttpRequest()
        request.META = {"wsgi.url_scheme": "https" if secure else "http", "SERVER_NAME": "template"}
        if secure:
            request.is_secure = lambda: True  # type: ignore[method-assign]
        response: HttpResponseBase
        if not_modified:
            response = HttpResponseNotModified()
            response._csp_config = settings.VIRGO_JSON_CSP  # type: ignore[attr-defined]
        else:
            response = HttpResponse(b"", content_type="application/json")
        before = set(response.headers)

        def passthrough(request: HttpRequest) -> HttpResponseBase:
            return response

        for layer in (SecurityMiddleware, ContentTypeCSPMiddleware, XFrameOptionsMiddleware):
            response = layer(passthrough).process_response(request, response)
        _security_headers[key] = {
            name: value for name, value in response.items() if name not in before
        }
    return _security_headers[key]


def _forget_everything(**kwargs: Any) -> None:
    global _store
    _entries.clear()
    _security_headers.clear()
    _origins.clear()
    _store = None


setting_changed.connect(_forget_everything)


# The WSGI layer ----------------------------------------------------------------------------------


class PublicCardFastPath:
    """In front of Django: count every card request, answer current public cards from memory."""

    def __init__(self, application: Callable[..., Any]) -> None:
        self.application = application

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        match = CARD_PATH.fullmatch(environ.get("PATH_INFO", ""))
        if match is None:
            return self.application(environ, start_response)
        persona = match[1]
        usage = environ[USAGE_KEY] = count(environ, persona)
        if not usage.limited:
            served = _from_memory(environ, persona, usage, start_response)
            if served is not None:
                return served
        return self.application(environ, _counted(_without_304_length(start_response)))


def _from_memory(
    environ: dict[str, Any], persona: str, usage: Usage, start_response: Callable[..., Any]
) -> list[bytes] | None:
    entry = _entries.get(persona)
    if entry is None or entry.expires < time.monotonic():
        return None
    if usage.token is not Token.UNREAD and entry.token != usage.token:
        return None
    method = environ.get("REQUEST_METHOD")
    if method not in READ_METHODS or not _plain(environ):
        return None
    secure = _trusted_origin(environ)
    if secure is None or (settings.SECURE_SSL_REDIRECT and not secure):
        return None
    if_none_match = environ.get("HTTP_IF_NONE_MATCH")
    if if_none_match is not None:
        if _etag_listed(if_none_match, entry.etag):
            _count_from_memory("304", method)
            start_response("304 Not Modified", entry.headers[(secure, True)])
            return []
    elif "HTTP_IF_MODIFIED_SINCE" in environ:
        return None
    _count_from_memory("200", method)
    start_response("200 OK", entry.headers[(secure, False)])
    return [b"" if method == "HEAD" else entry.body]


def _count_from_memory(status: str, method: str) -> None:
    metrics.CARD_RESPONSES.labels(status, "memory").inc()
    metrics.HTTP_RESPONSES.labels(CARD_ROUTE, method, status).inc()


def _counted(start_response: Callable[..., Any]) -> Callable[..., Any]:
    """Count the card answer Django gives (its middleware counts the response by route)."""

    def count(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        metrics.CARD_RESPONSES.labels(status[:3], "django").inc()
        if exc_info is None:
            return start_response(status, headers)
        return start_response(status, headers, exc_info)

    return count


def _plain(environ: dict[str, Any]) -> bool:
    """No body, and no precondition that only the view evaluates."""
    return (
        environ.get("CONTENT_LENGTH") in (None, "", "0")
        and "HTTP_TRANSFER_ENCODING" not in environ
        and "HTTP_IF_MATCH" not in environ
        and "HTTP_IF_UNMODIFIED_SINCE" not in environ
    )


def _trusted_origin(environ: dict[str, Any]) -> bool | None:
    """Whether the request is secure, or None when Django would refuse its Host.

    Decided by Django itself (ALLOWED_HOSTS, X-Forwarded-Host, the proxy's HTTPS header) once
    per distinct set of the inputs, and remembered (bounded).
    """
    proxy = settings.SECURE_PROXY_SSL_HEADER
    key = (
        environ.get("HTTP_HOST"),
        environ.get("SERVER_NAME"),
        environ.get("SERVER_PORT"),
        environ.get("HTTP_X_FORWARDED_HOST") if settings.USE_X_FORWARDED_HOST else None,
        environ.get("HTTP_X_FORWARDED_PORT") if settings.USE_X_FORWARDED_PORT else None,
        environ.get("wsgi.url_scheme"),
        environ.get(proxy[0]) if proxy else None,
    )
    if key not in _origins:
        request = WSGIRequest({**environ, "wsgi.input": io.BytesIO()})
        try:
            request.get_host()
            verdict: bool | None = request.is_secure()
        except DisallowedHost:
            verdict = None
        if len(_origins) >= 64:
            _origins.clear()
        _origins[key] = verdict
    return _origins[key]


def _without_304_length(start_response: Callable[..., Any]) -> Callable[..., Any]:
    """RFC 9110 lets a 304 repeat only the 200's length, and clients that read it as a body
    length hang; the 304s the view answers go without, as the fast path's and nginx's do."""

    def replace(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        if status.startswith("304"):
            headers = [(n, v) for n, v in headers if n.lower() != "content-length"]
        if exc_info is None:
            return start_response(status, headers)
        return start_response(status, headers, exc_info)

    return replace


def _etag_listed(header: str, etag: str) -> bool:
    """If-None-Match's weak comparison against our strong ETag (RFC 9110 13.1.2)."""
    if header.strip() == "*":
        return True
    return any(candidate.strip().removeprefix("W/") == etag for candidate in header.split(","))
