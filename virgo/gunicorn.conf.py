"""gunicorn settings for the web processes: `gunicorn -c virgo/gunicorn.conf.py`.

Each web process is independent: sessions live in the database and rate-limit counters in Redis,
so adding workers, or machines running this same command, needs no other change.
"""

import multiprocessing
import os

wsgi_app = "virgo.wsgi:application"
bind = [os.environ.get("VIRGO_BIND", "127.0.0.1:8000")]

# Threaded workers that keep connections alive: a card answer costs far less than a new TCP
# connection, and sync workers close every one (docs/benchmarks.md: ~3x the card requests per
# second of sync workers on the same cores).
worker_class = os.environ.get("GUNICORN_WORKER_CLASS", "gthread")
threads = int(os.environ.get("GUNICORN_THREADS", "4"))
keepalive = int(os.environ.get("GUNICORN_KEEPALIVE", "5"))
workers = int(os.environ.get("WEB_CONCURRENCY", min(2 * multiprocessing.cpu_count() + 1, 8)))
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "30"))
graceful_timeout = 20
# Recycle workers now and then so that a slow leak never becomes an outage.
max_requests = int(os.environ.get("GUNICORN_MAX_REQUESTS", "100000"))
max_requests_jitter = max_requests // 10
# The heartbeat file lives in memory, so a busy or slow disk never gets a worker killed.
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None

# Trust X-Forwarded-* only from the proxies named here (loopback by default).
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1,::1")

# Empty GUNICORN_ACCESS_LOG turns the access log off (the benchmark does, for every server).
accesslog = os.environ.get("GUNICORN_ACCESS_LOG", "-") or None
errorlog = "-"
loglevel = os.environ.get("LOG_LEVEL", "info").lower()
proc_name = "virgo-web"


def on_starting(server: object) -> None:
    """Refuse to serve when an active stamp fails boot validation (V1-BOOT-1), naming it.

    Runs once in the master before any worker forks; its database connections are closed so no
    worker inherits a socket it shares with its siblings.
    """
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "virgo.settings")
    django.setup()
    from django.db import connections

    from stamps.checks import require_valid_stamps

    try:
        require_valid_stamps()
    finally:
        connections.close_all()
