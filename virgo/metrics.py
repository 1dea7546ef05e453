"""Virgo's Prometheus metrics (prometheus-client). Counters only: each process counts its own.

What a fault costs while Virgo goes on serving (VX-REL-1, VX-REL-3):

- `virgo_unavailable_total{service, use}`: calls that went without a service, because it failed
  them or because this process had just found it down (virgo.outages). `service` is `cache`
  (Redis as the cache), `broker` (Redis as Celery's broker) or `database`; `use` says what for
  (`limit`, `card`, `card_token`, `signin`, `task`, `request`).
- `virgo_rate_limit_per_process_total{limit}`: requests a limit counted in this process alone
  while the shared cache was unreachable (virgo.limits).
- `virgo_unavailable_responses_total{reason}`: 503s answered instead of the work: `signin` (a
  password endpoint with no shared count to hold it to) and `database` (PostgreSQL unreachable).
"""

from prometheus_client import Counter

UNAVAILABLE = Counter(
    "virgo_unavailable_total",
    "Calls that went without a service (cache, broker, database) because it was unreachable",
    ["service", "use"],
)
RATE_LIMIT_PER_PROCESS = Counter(
    "virgo_rate_limit_per_process_total",
    "Requests counted by this process alone while the shared cache was unreachable",
    ["limit"],
)
UNAVAILABLE_RESPONSES = Counter(
    "virgo_unavailable_responses_total",
    "Requests answered 503 because a service they need was unreachable",
    ["reason"],
)
