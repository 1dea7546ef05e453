"""What operators can see inside: Prometheus metrics, served at /metrics (docs/decisions.md).

Two kinds, kept apart because they add up differently:

- Events are counted where they happen, as plain module-level prometheus-client counters: a
  response, a card answer, a limiter refusal, a Celery task's outcome. A new one is one line
  here (`NAME = Counter("virgo_...", "what it counts", ["label"])`) and one `.labels(...).inc()`
  where the event happens.
- State is read when the scrape asks, from the database: the owed-work backlog (stamps, cards,
  recomputes; the fan-out's remaining work), quarantined personas. A web process never holds a
  gauge that another process changed behind it. A reader is a function yielding metric
  families, registered with `@scraped` by the app that owns the state, in its ready().

Several processes count: virgo-web's granian workers and the Celery worker's pool children.
Each group (`virgo-web`, one Celery worker) counts into a private directory of its own under
VIRGO_METRICS_DIR in prometheus-client's multiprocess mode (virgo.home.count_metrics_in, called
by the group's first process before anything is counted), and a scrape adds up every file of
every group there. A group's directory is emptied when the group starts, never while another
group runs. A process started without such a directory (`make run`, the CLI, tests) counts in
memory, and /metrics shows that process.
"""

import functools
import glob
import hmac
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.module_loading import import_string
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from prometheus_client import REGISTRY, CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.multiprocess import MultiProcessCollector

from virgo.methods import allow_methods

logger = logging.getLogger(__name__)

# Set by virgo.home.count_metrics_in for a group's processes; read by prometheus-client when it
# is first imported.
MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"

# Events -------------------------------------------------------------------------------------------

HTTP_RESPONSES = Counter(
    "virgo_http_responses",
    "Responses by route (the URL pattern, `unmatched` for none), method and status.",
    ["route", "method", "status"],
)
CARD_RESPONSES = Counter(
    "virgo_card_responses",
    "Agent card answers by status, and whether the fast path answered from memory or Django did.",
    ["status", "served_by"],
)
RATE_LIMIT_REFUSALS = Counter(
    "virgo_rate_limit_refusals",
    "Requests refused because a budget was spent (429), by limit.",
    ["limit"],
)
RATE_LIMIT_FALLBACKS = Counter(
    "virgo_rate_limit_fallbacks",
    "Limit checks counted in the process alone because the shared cache did not answer.",
    ["limit"],
)
CELERY_TASKS = Counter(
    "virgo_celery_tasks",
    "Celery task runs by task and outcome (success, failure, retry).",
    ["task", "outcome"],
)
UNAVAILABLE = Counter(
    "virgo_unavailable",
    "Calls that went without a service (cache, broker, database) because it was unreachable, "
    "by service and what the call was for (virgo.outages).",
    ["service", "use"],
)
UNAVAILABLE_RESPONSES = Counter(
    "virgo_unavailable_responses",
    "Requests answered 503 because a service they need was unreachable, by reason (signin, "
    "database).",
    ["reason"],
)
FANOUT_PERSONAS_SETTLED = Counter(
    "virgo_fanout_personas_settled",
    "Personas the recompute fan-out's batches brought up to date.",
)

_GROUP = re.compile(r"\(\?P<(\w+)>[^)]*\)")
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


@functools.lru_cache(maxsize=512)
def route_label(route: str) -> str:
    """A URL pattern as people write it: DRF's routers give regular expressions
    (`api/personas/(?P<uuid>[^/.]+)/$`), shown as `api/personas/<uuid>/`."""
    return _GROUP.sub(r"<\1>", route).removeprefix("^").removesuffix("$")


def method_label(method: str | None) -> str:
    """A request's method, or `other`: a client must not mint label values."""
    return method if method in METHODS else "other"


# State --------------------------------------------------------------------------------------------

Reader = Callable[[], Iterable[Metric]]
_readers: list[Reader] = []


def scraped(reader: Reader) -> Reader:
    """Register a reader of state, called at every scrape; a reader that fails is left out."""
    _readers.append(reader)
    return reader


def backlog() -> dict[str, int]:
    """The owed work, by kind (settings.VIRGO_BACKLOG names the app's function that counts it).

    Named by a setting, so that this ground layer never imports the records it counts.
    """
    count: Callable[[], dict[str, int]] = import_string(settings.VIRGO_BACKLOG)
    return count()


@scraped
def _owed_work() -> Iterator[Metric]:
    family = GaugeMetricFamily(
        "virgo_owed_personas",
        "Personas whose current generation is owed work, by kind: stamp, card, recompute (the "
        "skill-map fan-out's remaining work).",
        labels=["work"],
    )
    for work, count in backlog().items():
        family.add_metric([work], count)
    yield family


class _State:
    def collect(self) -> Iterator[Metric]:
        for reader in _readers:
            try:
                yield from reader()
            except Exception as exc:
                # The database down: the counters are still worth a scrape.
                logger.warning("metrics: reading %s failed: %r", reader.__name__, exc)


class _EveryGroup:
    """Every file of every process group under VIRGO_METRICS_DIR, added up."""

    def collect(self) -> Iterable[Metric]:
        files = glob.glob(os.path.join(glob.escape(str(settings.VIRGO_METRICS_DIR)), "*", "*.db"))
        return MultiProcessCollector.merge(files, accumulate=True)


class _InProcess:
    def collect(self) -> Iterable[Metric]:
        return REGISTRY.collect()


def exposition(accept: str | None) -> tuple[bytes, str]:
    """The scrape's body and content type, in the format the scraper accepts (text 0.0.4 by
    default, OpenMetrics when asked)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_EveryGroup() if os.environ.get(MULTIPROCESS_ENV) else _InProcess())
    registry.register(_State())
    encoder, content_type = choose_encoder(accept)
    return encoder(registry), content_type


# The endpoint -------------------------------------------------------------------------------------


def _bearer_matches(request: HttpRequest) -> bool:
    expected = settings.VIRGO_METRICS_TOKEN
    scheme, _, presented = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    return (
        bool(expected)
        and scheme.lower() == "bearer"
        and hmac.compare_digest(presented.strip().encode(), expected.encode())
    )


@csrf_exempt  # read-only; other methods get the JSON 405
@never_cache
@allow_methods("GET", "HEAD")
def metrics_view(request: HttpRequest) -> HttpResponse:
    """GET /metrics: for the scraper's bearer token (VIRGO_METRICS_TOKEN) or a superuser.

    Not for staff: every owner is staff here, and the counts are the whole installation's.
    """
    if not _bearer_matches(request):
        user = request.user
        if not user.is_authenticated:
            response = HttpResponse("Authentication required.\n", status=401)
            response["WWW-Authenticate"] = 'Bearer realm="virgo-metrics"'
            response["Content-Type"] = "text/plain; charset=utf-8"
            return response
        if not user.is_superuser:
            return HttpResponse(
                "Only superusers may read the metrics.\n",
                status=403,
                content_type="text/plain; charset=utf-8",
            )
    body, content_type = exposition(request.META.get("HTTP_ACCEPT"))
    return HttpResponse(body, content_type=content_type)
