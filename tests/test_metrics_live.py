"""Counts add up across processes: virgo-web's granian workers, and a Celery worker's.

Each process group counts into a directory of its own under VIRGO_METRICS_DIR
(prometheus-client's multiprocess mode); a scrape, whichever worker answers it, adds up every
file of every group.
"""

import secrets
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from personas import services
from tests.deploy_support import production_env
from tests.factories import make_agent, make_owner, make_persona
from tests.live import CeleryProcesses, WebServer, celery_publishing_to, wait_until

SCRAPER = "scraper-" + secrets.token_hex(8)


def healthz_count(metrics: str) -> float:
    for family in text_string_to_metric_families(metrics):
        for sample in family.samples:
            labels = sample.labels
            if sample.name == "virgo_http_responses_total" and labels == {
                "route": "healthz",
                "method": "GET",
                "status": "200",
            }:
                return sample.value
    return 0.0


@pytest.mark.live
def test_the_counts_of_two_web_processes_add_up(tmp_path: Path) -> None:
    """virgo-web with two workers: both answer /healthz, and one scrape, answered by either,
    counts every answer of both."""
    env = production_env(
        VIRGO_HOME=str(tmp_path),
        ALLOWED_HOSTS="127.0.0.1",
        SECURE_PROXY_SSL_HEADER="1",
        VIRGO_METRICS_TOKEN=SCRAPER,
        WEB_CONCURRENCY="2",
        VIRGO_RATE_LIMITS_PER_PROCESS="1",
    )
    del env["REDIS_URL"]
    # Left by an earlier run of the same group: emptied when virgo-web starts.
    stale = tmp_path / "metrics" / "web"
    stale.mkdir(parents=True)
    (stale / "counter_1.db").write_bytes(b"not a metrics file")
    server = WebServer(tmp_path, env)
    server.start()
    try:
        sent = 1  # the readiness poll's
        while len(server.workers_that_served("/healthz")) < 2 and sent < 400:
            # A new connection each: the kernel spreads them over the workers.
            with httpx.Client() as client:
                assert client.get(server.base_url + "/healthz").status_code == 200
            sent += 1
        wait_until(
            lambda: sum(1 for _ in _access_lines(server.log, "/healthz")) == sent,
            what="the access log to show every /healthz request",
        )
        assert len(server.workers_that_served("/healthz")) == 2
        scraped = httpx.get(
            server.base_url + "/metrics",
            headers={"Authorization": f"Bearer {SCRAPER}", "X-Forwarded-Proto": "https"},
        )
        assert scraped.status_code == 200, scraped.text
        assert healthz_count(scraped.text) == sent
        assert (tmp_path / "metrics").stat().st_mode & 0o777 == 0o700
        assert not (stale / "counter_1.db").exists()
    finally:
        server.stop()


def _access_lines(log: Path, path: str) -> list[str]:
    return [
        line
        for line in log.read_text().splitlines()
        if (match := WebServer.ACCESS_LINE.match(line)) and match.group(3) == path
    ]


@pytest.mark.live
@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("live_postgres")
def test_a_celery_workers_task_outcomes_reach_the_scrape(
    celery_processes: CeleryProcesses, tmp_path: Path, settings: Any
) -> None:
    """The worker's pool counts each task's outcome into the worker's own directory, which the
    web processes' scrape adds up with theirs."""
    metrics_dir = tmp_path / "metrics"
    persona = make_persona(make_agent(make_owner()))
    celery_processes.worker(VIRGO_METRICS_DIR=str(metrics_dir))
    with celery_publishing_to(celery_processes.broker.url):
        services.persona_update(
            persona=persona, actor=persona.agent.owner, description="Counted by the worker."
        )

    def settled() -> float:
        files = [str(path) for path in metrics_dir.glob("*/*.db")]
        for family in MultiProcessCollector.merge(files, accumulate=True):
            for sample in family.samples:
                if sample.name == "virgo_celery_tasks_total" and sample.labels == {
                    "task": "personas.tasks.settle_persona",
                    "outcome": "success",
                }:
                    return sample.value
        return 0.0

    wait_until(lambda: settled() == 1, what="the worker to count its settle_persona run")
    (worker_dir,) = metrics_dir.iterdir()
    assert worker_dir.name.startswith("worker-")
    assert worker_dir.stat().st_mode & 0o777 == 0o700
