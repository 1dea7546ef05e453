"""The web processes: `virgo-web` (or `python -m virgo.web`) serves virgo.wsgi with granian.

granian's HTTP/1 core is native code, so a request costs Python only what Django (or the card
fast path) does; gunicorn parsed HTTP in Python, which was ~75% of a card request
(docs/benchmarks.md). Before it binds a socket, this command checks what every capability stamp
depends on (the schema, the handler registry) and refuses to serve when that is broken; it opens
no stamp file, so one persona's broken stamp quarantines that persona alone (stamps.checks).

Each web process is independent: sessions live in the database and rate-limit counters in Redis,
so adding workers, or machines running this same command, needs no other change. Everything is
read from the environment:

- VIRGO_BIND: `host:port` (`[::1]:8000` for IPv6), default 127.0.0.1:8000.
- WEB_CONCURRENCY: worker processes, default one per core.
- WEB_THREADS: threads per worker running Django, default 4: as many requests per worker run
  Python at once, while the native layer keeps every other connection open and waiting.
- WEB_WORKER_MAX_RSS: MiB of resident memory past which a worker is replaced, default 512 (so a
  slow leak never becomes an outage); 0 turns it off.
- WEB_ACCESS_LOG: 0 turns the access log off (the benchmark does, for every server).
- LOG_LEVEL: granian's log level, default info.
"""

import multiprocessing
import os
from collections.abc import Mapping
from dataclasses import dataclass

from granian import Granian
from granian.constants import HTTPModes, Interfaces
from granian.http import HTTP1Settings
from granian.log import LogLevels

from virgo.startup import exit_misconfigured, load_settings

WSGI_APP = "virgo.wsgi:application"
# A client that has not sent its headers within this many milliseconds is dropped: a trickle
# of header bytes must not hold a connection for long.
HEADER_READ_TIMEOUT_MS = 10_000
# How long a worker that was asked to stop may finish its requests before it is killed.
GRACEFUL_STOP_SECONDS = 20
# Access lines name the worker process that served the request; never the query string.
ACCESS_FORMAT = '%(addr)s "%(method)s %(path)s %(protocol)s" %(status)d %(dt_ms).1fms'
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "generic": {"format": "[%(asctime)s] [%(process)d] [%(levelname)s] %(message)s"},
        "access": {"format": "[%(asctime)s] %(process)d %(message)s"},
    },
    "handlers": {
        "console": {"formatter": "generic", "class": "logging.StreamHandler"},
        "access": {
            "formatter": "access",
            "class": "logging.StreamHandler",
            "stream": "ext://sys.stdout",
        },
    },
    "loggers": {
        "_granian": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "granian.access": {"handlers": ["access"], "level": "INFO", "propagate": False},
    },
}


class ConfigurationError(ValueError):
    """An environment variable of the web processes has a value they cannot use."""


@dataclass(frozen=True)
class WebOptions:
    host: str
    port: int
    workers: int
    threads: int
    max_rss_mib: int | None
    access_log: bool
    log_level: LogLevels


def options_from(environ: Mapping[str, str]) -> WebOptions:
    host, port = _bind(environ.get("VIRGO_BIND", "127.0.0.1:8000"))
    max_rss = _positive(environ, "WEB_WORKER_MAX_RSS", 512, allow_zero=True)
    level = environ.get("LOG_LEVEL", "info").lower()
    if level not in LogLevels.__members__:
        raise ConfigurationError(
            f"LOG_LEVEL: {level!r} is not one of {', '.join(LogLevels.__members__)}; set it to "
            "one of them, or unset it for info"
        )
    return WebOptions(
        host=host,
        port=port,
        workers=_positive(environ, "WEB_CONCURRENCY", multiprocessing.cpu_count()),
        threads=_positive(environ, "WEB_THREADS", 4),
        max_rss_mib=max_rss or None,
        access_log=environ.get("WEB_ACCESS_LOG", "1").strip().lower() not in ("", "0", "off"),
        log_level=LogLevels[level],
    )


def server_for(options: WebOptions) -> Granian:
    return Granian(
        WSGI_APP,
        address=options.host,
        port=options.port,
        interface=Interfaces.WSGI,
        http=HTTPModes.http1,
        websockets=False,
        workers=options.workers,
        blocking_threads=options.threads,
        http1_settings=HTTP1Settings(header_read_timeout=HEADER_READ_TIMEOUT_MS),
        respawn_failed_workers=True,
        workers_max_rss=options.max_rss_mib,
        workers_kill_timeout=GRACEFUL_STOP_SECONDS,
        log_level=options.log_level,
        log_dictconfig=LOGGING,
        log_access=options.access_log,
        log_access_format=ACCESS_FORMAT,
    )


def run_start_checks() -> None:
    """VX-OPS-5: the checks the apps connected to virgo.startup.web_starting (stamps.checks:
    start_checks), in time that does not grow with the personas.

    Their database connections are closed again, so no worker inherits a socket it would share
    with its siblings.
    """
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "virgo.settings")
    django.setup()
    from django.db import connections

    from virgo.startup import web_starting

    try:
        web_starting.send(sender=None)
    finally:
        connections.close_all()


def count_metrics_per_server() -> None:
    """This process and its workers count their metrics into one directory (virgo.metrics),
    emptied first; before Django is set up, which imports prometheus-client."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "virgo.settings")
    from django.conf import settings

    from virgo.home import count_metrics_in

    count_metrics_in(settings.VIRGO_METRICS_DIR / "web")


def main() -> None:
    try:
        options = options_from(os.environ)
    except ConfigurationError as error:
        exit_misconfigured("virgo-web", error)
    load_settings("virgo-web")
    count_metrics_per_server()
    run_start_checks()
    server_for(options).serve()


def _bind(value: str) -> tuple[str, int]:
    host, separator, port = value.strip().rpartition(":")
    if not separator or not port.isdigit() or not 0 < int(port) < 65536 or not host:
        raise ConfigurationError(
            f"VIRGO_BIND: {value!r} is not host:port; set it to e.g. 127.0.0.1:8000 ([::1]:8000 "
            "for IPv6), or unset it for 127.0.0.1:8000"
        )
    return host.removeprefix("[").removesuffix("]"), int(port)


def _positive(
    environ: Mapping[str, str], name: str, default: int, *, allow_zero: bool = False
) -> int:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or (int(raw) == 0 and not allow_zero):
        least = "0 or more" if allow_zero else "1 or more"
        raise ConfigurationError(
            f"{name}: {raw!r} is not a whole number of {least}; set it to one, or unset it for "
            f"the default ({default})"
        )
    return int(raw)


if __name__ == "__main__":
    main()
