"""Through what and under which correlation id the work of this moment is done (VX-AUDIT-1).

Every entry point says it once, here, and the audit trail (personas.audit.record) reads it, so
no service takes a `channel` argument it could be given wrong:

- a web request (AuditContextMiddleware): `admin` under the admin's URLs, `api` elsewhere; the
  request's id, taken from a well-formed `X-Request-ID` header (a proxy's) or made;
- a management command (`virgo <command>`, call_command): `cli`, one new id per command, and the
  operating-system account that ran it, the actor of what no Virgo user did (a key rotation);
- a Celery task (virgo.celery): `task`, the task's id;
- a tool call (runtime.handler): `runtime`, the call's correlation id; one that came to a
  persona's remote endpoint (serving/) also names its connection, the client whose token it held.

An inner entry point inside an outer one (a command calling another, a task run eagerly inside
a request) takes over until it ends, then the outer one is back.
"""

import getpass
import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponseBase

ADMIN = "admin"
API = "api"
CLI = "cli"
IMPORT = "import"
TASK = "task"
RUNTIME = "runtime"
# Nothing said otherwise: a shell, a migration, a test's direct call.
INTERNAL = "internal"

REQUEST_ID_HEADER = "X-Request-ID"
# Where virgo.urls mounts the admin (its sign-in and OpenID Connect pages included).
ADMIN_PREFIX = "/admin/"
_WELL_FORMED_ID = re.compile(r"^[A-Za-z0-9._:@/+=-]{1,200}$")


@dataclass(frozen=True, slots=True)
class AuditContext:
    channel: str
    correlation_id: str
    # Who acted when no Virgo account did: the OS account of a command, "" otherwise.
    operator: str = ""
    # The remote client whose token a tool call came with (serving/), "" for a local call.
    connection: str = ""


_current: ContextVar[AuditContext | None] = ContextVar("virgo_audit_context", default=None)


def current() -> AuditContext:
    return _current.get() or AuditContext(INTERNAL, "")


def new_id() -> str:
    return uuid.uuid4().hex


@contextmanager
def entered(channel: str, correlation_id: str, *, operator: str = "") -> Iterator[AuditContext]:
    context = AuditContext(channel, correlation_id[:200], operator)
    token = _current.set(context)
    try:
        yield context
    finally:
        _current.reset(token)


@contextmanager
def connection(label: str) -> Iterator[AuditContext]:
    """The same entry point, on behalf of a remote client: every event recorded in it names the
    connection (VX-REMOTE-2)."""
    token = _current.set(replace(current(), connection=label[:200]))
    try:
        yield _current.get()  # type: ignore[misc]
    finally:
        _current.reset(token)


@contextmanager
def channel(name: str) -> Iterator[AuditContext]:
    """The same correlation id, through another channel: an import inside a request or command."""
    outer = current()
    with entered(name, outer.correlation_id or new_id(), operator=outer.operator) as context:
        yield context


def _os_account() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def command_context(execute: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap BaseCommand.execute: a command runs as `cli` under an id of its own, unless it is
    called by another command (that one's id stays)."""

    @wraps(execute)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if current().channel == CLI:
            return execute(*args, **kwargs)
        with entered(CLI, new_id(), operator=_os_account()):
            return execute(*args, **kwargs)

    wrapper.__audit_context__ = True  # type: ignore[attr-defined]
    return wrapper


class AuditContextMiddleware:
    """Each request runs as `admin` or `api` under its id (the caller's `X-Request-ID` when it is
    well formed, else a new one). It is not echoed: a response from the card fast path, which
    never reaches Django, must stay byte-identical to the one Django gave."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        given = request.headers.get(REQUEST_ID_HEADER, "")
        request_id = given if _WELL_FORMED_ID.match(given) else new_id()
        name = ADMIN if request.path_info.startswith(ADMIN_PREFIX) else API
        with entered(name, request_id):
            request.correlation_id = request_id  # type: ignore[attr-defined]
            return self.get_response(request)
