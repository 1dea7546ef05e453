"""gunicorn settings for the web processes: `gunicorn -c virgo/gunicorn.conf.py`.

Each web process is independent: sessions live in the database and rate-limit counters in Redis,
so adding workers, or machines running this same command, needs no other change.
"""

import multiprocessing
import os

wsgi_app = "virgo.wsgi:application"
bind = [os.environ.get("VIRGO_BIND", "127.0.0.1:8000")]

# Sync workers: a card is a small pre-rendered body, and the work per request is CPU-bound.
worker_class = "sync"
workers = int(os.environ.get("WEB_CONCURRENCY", min(2 * multiprocessing.cpu_count() + 1, 8)))
timeout = int(os.environ.get("GUNICORN_TIMEOUT", "30"))
graceful_timeout = 20
# Recycle workers now and then so that a slow leak never becomes an outage.
max_requests = 2000
max_requests_jitter = 200
# The heartbeat file lives in memory, so a busy or slow disk never gets a worker killed.
worker_tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None

# Trust X-Forwarded-* only from the proxies named here (loopback by default).
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1,::1")

accesslog = "-"
errorlog = "-"
loglevel = os.environ.get("LOG_LEVEL", "info").lower()
proc_name = "virgo-web"
