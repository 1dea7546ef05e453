"""`make bench`: measure Virgo's hot paths beside the a2a-sdk card route and nginx (issue 7).

Starts everything it needs in a private temporary directory (PostgreSQL, Redis, virgo-web,
uvicorn, nginx, Celery workers), loads only 127.0.0.1, stops every process it started (also on
Ctrl-C or an error), prints a table, writes docs/benchmarks.md and ends with one `name=value`
line per figure.

    .venv/bin/python -m bench.run [--rounds 3] [--seconds 10] [--only card,data,ard,...]
"""

import argparse
import datetime
import json
import os
import platform
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any

from bench import cli_start, nginx, report, secret_scan, wrk
from bench.ard import ArdBench
from bench.procs import Processes, fetch, free_port, rss_kib, wait_http
from virgo import kek

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
DOC = ROOT / "docs" / "benchmarks.md"
WORKERS = 2
# High enough never to trigger under a 10 s wrk run from one address, yet counted in Redis.
NEVER_LIMITING_RATE = "1000000000/m"
SECTIONS = ("card", "signing", "memory", "data", "fanout", "ard", "secrets", "remote", "cli")
# Cards re-signed by the rotation fan-out in the signing section.
RESIGN_CARDS = 5000
# Stamps per batch write, as the fan-out's default VIRGO_RECOMPUTE_BATCH_SIZE.
STAMP_BATCH = 500
# Rounds of the stamp factory figures, each under a second: their median is the figure.
STAMP_ROUNDS = 3
# Fan-out rounds of each worker count: even, so that each count runs first as often as second.
FANOUT_ROUNDS = 4
# Personas the directory search finds, at 1k as at 100k: more than a page of them.
SEARCH_MATCHES = 60

TARGETS = {
    "card_get_vs_a2a_sdk": ">= 1.5",
    "card_304_vs_a2a_sdk": ">= 3",
    "card_get_vs_nginx": "(ceiling)",
    "card_signed_get_vs_a2a_sdk": ">= 3",
    "cards_signed_per_s": ">= 2000",
    "directory_100k_vs_1k": "<= 1.3",
    "directory_queries_per_page": "<= 4",
    "directory_search_100k_vs_1k": "<= 1.3",
    "directory_search_queries_per_page": "<= 4",
    "ard_search_100k_vs_1k": "<= 1.3",
    "ard_search_queries_per_page": "<= 4",
    "status_list_100k_bytes": "",
    "status_list_get_100k_ms": "",
    "fanout_personas_per_s_1w": ">= 500",
    "fanout_scaling_2w_vs_1w": ">= 1.8",
    "stamps_per_s": ">= 2000",
    "virgo_check_per_s": ">= 5000",
    "admin_queries_per_page": "same at 100 and 10k",
    "admin_queries_per_page_100": "= the 10k figure",
    "admin_queries_per_page_10k": "= the 100 figure",
    "worker_rss_growth": "<= 1.1",
    "web_ready_100k_vs_1k": "<= 1.2",
    "worker_ready_100k_vs_1k": "<= 1.2",
    "secret_rules_prefilter_speedup_ordinary": "",
    "secret_rules_prefilter_speedup_100kb": "",
    "remote_read_calls_per_s": ">= 1000",
    "remote_read_p99_ms": "",
    "remote_read_vs_card_get": "",
    "decide_warm_us": "<= 100",
    "cli_start_virgo_ms": "",
    "cli_start_stock_django_ms": "",
    "cli_start_vs_stock_django": "<= 1.5",
}
# Start-up timings per fleet size: the median of this many starts.
READY_ROUNDS = 3


def progress(message: str) -> None:
    print(f"[{datetime.datetime.now():%H:%M:%S}] {message}", flush=True)


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.work = Path(tempfile.mkdtemp(prefix="virgo-bench-"))
        # PostgreSQL runs as its own user when we are root: it must reach its directory.
        self.work.chmod(0o711)
        (self.work / "logs").mkdir()
        self.procs = Processes(self.work / "logs")
        self.figures: dict[str, float | int] = {}
        self.sections: list[tuple[str, str]] = []
        self.notes: list[str] = []
        self.setup: list[str] = []
        self.env: dict[str, str] = {}
        self.ard = ArdBench()

    # Services -------------------------------------------------------------------------------

    def start_services(self) -> None:
        postgres, redis = self.work / "postgres", self.work / "redis"
        lib = ROOT / "scripts" / "lib.sh"
        shell_env = {**os.environ, "VIRGO_PYTHON": sys.executable}
        self.procs.on_stop(
            lambda: subprocess.run(
                [
                    "bash",
                    "-c",
                    f'. "{lib}"; redis_stop "$1"; postgres_stop "$2"',
                    "bench",
                    str(redis),
                    str(postgres),
                ],
                env=shell_env,
                check=False,
            )
        )
        subprocess.run(
            [
                "bash",
                "-c",
                f'. "{lib}"; postgres_start "$1" fast && redis_start "$2" fast',
                "bench",
                str(postgres),
                str(redis),
            ],
            env=shell_env,
            check=True,
        )
        database_url = (postgres / "env").read_text().strip().removeprefix("DATABASE_URL=")
        redis_env = dict(
            line.split("=", 1) for line in (redis / "env").read_text().splitlines() if "=" in line
        )
        self.web_port = free_port()
        home = self.work / "home"
        home.mkdir()
        base = {k: v for k, v in os.environ.items() if not k.startswith(("VIRGO_", "DJANGO_"))}
        for name in (
            "DEBUG",
            "CELERY_TASK_ALWAYS_EAGER",
            "SECRET_KEY",
            "DATABASE_URL",
            "REDIS_URL",
            "REDIS_CACHE_URL",
        ):
            base.pop(name, None)
        self.env = {
            **base,
            "DJANGO_SETTINGS_MODULE": "virgo.settings",
            "DATABASE_URL": database_url,
            # As `make serve` runs them: the cache over Redis's Unix socket, when it has one.
            "REDIS_URL": redis_env["REDIS_URL"],
            "REDIS_CACHE_URL": redis_env.get("REDIS_CACHE_URL", redis_env["REDIS_URL"]),
            "SECRET_KEY": secrets.token_urlsafe(50),
            # Production settings refuse to start without one, as a deployment must have it.
            "VIRGO_KEY_ENCRYPTION_KEY": kek.generate(),
            "VIRGO_HOME": str(home),
            "ALLOWED_HOSTS": "127.0.0.1,localhost,testserver",
            "VIRGO_PUBLIC_BASE_URL": f"http://127.0.0.1:{self.web_port}",
            # Plain HTTP on loopback, as `make serve` runs: the HTTPS-only settings are off.
            "SECURE_SSL_REDIRECT": "0",
            "SESSION_COOKIE_SECURE": "0",
            "CSRF_COOKIE_SECURE": "0",
            "SECURE_HSTS_SECONDS": "0",
            "VIRGO_CARD_RATE_LIMIT": NEVER_LIMITING_RATE,
            "VIRGO_DIRECTORY_RATE_LIMIT": NEVER_LIMITING_RATE,
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": str(ROOT),
        }
        python = sys.executable
        for command in (
            ["migrate", "--noinput", "-v", "0"],
            ["collectstatic", "--noinput", "-v", "0"],
        ):
            subprocess.run([python, "manage.py", *command], cwd=ROOT, env=self.env, check=True)
        os.environ.update(self.env)
        # The driver's own writes run their follow-up tasks in-process, until the fan-out
        # hands them to real Celery workers.
        os.environ["CELERY_TASK_ALWAYS_EAGER"] = "1"
        import django

        django.setup()

    # Card GET and 304 --------------------------------------------------------------------------

    def start_virgo(
        self,
        *,
        workers: int = WORKERS,
        port: int | None = None,
        extra: dict[str, str] | None = None,
    ) -> Any:
        port = port or self.web_port
        env = {
            **self.env,
            "WEB_CONCURRENCY": str(workers),
            "VIRGO_BIND": f"127.0.0.1:{port}",
            # No access log on any of the three servers: it would measure log formatting. No
            # worker recycling either (uvicorn's default): the memory figure is one worker's.
            "WEB_ACCESS_LOG": "0",
            "WEB_WORKER_MAX_RSS": "0",
            **(extra or {}),
        }
        process = self.procs.start("virgo-web", [str(BIN / "virgo-web")], env=env, cwd=ROOT)
        wait_http(f"http://127.0.0.1:{port}/healthz", process=process)
        return process

    def card_section(self) -> None:
        from bench.data import make_fleet
        from cards.models import PublishedCard

        progress("card: starting Virgo, the a2a-sdk route and nginx")
        self.fleet = make_fleet()
        persona = self.fleet.template
        card = PublishedCard.objects.get(persona=persona)
        body = bytes(card.body)
        path = persona.card_path
        card_file = self.work / "card.json"
        card_file.write_bytes(body)

        servers: dict[str, tuple[str, Any]] = {}
        servers["virgo"] = (f"http://127.0.0.1:{self.web_port}{path}", self.start_virgo())

        a2a_port = free_port()
        a2a = self.procs.start(
            "uvicorn",
            [
                str(BIN / "uvicorn"),
                "bench.a2a_app:app",
                "--host=127.0.0.1",
                f"--port={a2a_port}",
                f"--workers={WORKERS}",
                "--loop=uvloop",
                "--http=httptools",
                "--no-access-log",
                "--log-level=warning",
            ],
            env={**self.env, "BENCH_CARD_FILE": str(card_file), "BENCH_CARD_PATH": path},
            cwd=ROOT,
        )
        servers["a2a-sdk"] = (f"http://127.0.0.1:{a2a_port}{path}", a2a)

        nginx_port = free_port()
        run_dir = self.work / "nginx"
        run_dir.mkdir()
        nginx.write_site(root=run_dir / "www", card_path=path, body=body)
        conf = run_dir / "nginx.conf"
        conf.write_text(
            nginx.config(root=run_dir / "www", port=nginx_port, workers=WORKERS, run_dir=run_dir)
        )
        ngx = self.procs.start(
            "nginx",
            ["nginx", "-e", str(run_dir / "nginx-error.log"), "-c", str(conf), "-p", str(run_dir)],
            env=self.env,
        )
        servers["nginx"] = (f"http://127.0.0.1:{nginx_port}{path}", ngx)

        etags: dict[str, str] = {}
        sizes: dict[str, int] = {}
        for name, (url, process) in servers.items():
            wait_http(url, process=process)
            status, headers, content = fetch(url)
            if status != 200:
                raise RuntimeError(f"{name} answered {status} for the card")
            etags[name] = headers["etag"]
            sizes[name] = len(content)
            status, _, _ = fetch(url, {"If-None-Match": etags[name]})
            if status != 304:
                raise RuntimeError(f"{name} answered {status} to If-None-Match")
        self._check_virgo_headers(servers["virgo"][0], etags["virgo"])

        series = {
            (name, kind): report.LoadSeries(name, kind)
            for kind in ("200", "304")
            for name in servers
        }
        for url, _ in servers.values():
            wrk.run(url, seconds=2)  # warm-up, not counted
        for _ in range(self.args.rounds):
            for kind in ("200", "304"):
                for name, (url, _) in servers.items():
                    headers = {"If-None-Match": etags[name]} if kind == "304" else None
                    series[(name, kind)].rounds.append(
                        wrk.run(url, seconds=self.args.seconds, headers=headers)
                    )
        for _, process in servers.values():
            self.procs.stop(process)

        ordered = [series[(n, k)] for k in ("200", "304") for n in servers]
        rate = {key: s.requests_per_s for key, s in series.items()}
        self.figures["card_get_vs_a2a_sdk"] = report.ratio(
            rate[("virgo", "200")], rate[("a2a-sdk", "200")]
        )
        self.figures["card_304_vs_a2a_sdk"] = report.ratio(
            rate[("virgo", "304")], rate[("a2a-sdk", "304")]
        )
        self.figures["card_get_vs_nginx"] = report.ratio(
            rate[("virgo", "200")], rate[("nginx", "200")]
        )
        self.card_table = report.load_table(ordered)
        print(self.card_table, flush=True)
        self.sections.append(
            (
                "Card GET and conditional GET",
                f"`wrk -t2 -c{64} -d{self.args.seconds}s --latency` on 127.0.0.1, "
                f"{self.args.rounds} interleaved rounds; req/s is the median of the rounds "
                "(each round's own figure follows). Card body: "
                + ", ".join(f"{name} {size} bytes" for name, size in sizes.items())
                + ".\n\n"
                + self.card_table,
            )
        )
        self.card_two_machines(path, body)

    def card_two_machines(self, path: str, body: bytes) -> None:
        """The card served by two "machines" (issue 27): virgo-web processes with their own
        VIRGO_HOME on the one PostgreSQL and Redis, one worker each, loaded at once, beside one
        machine with both workers; interleaved rounds, as many workers in all either way."""
        machines = {"one machine": self.start_virgo()}
        ports = {"one machine": self.web_port}
        for name in ("machine A", "machine B"):
            home = self.work / f"home-{name[-1].lower()}"
            home.mkdir()
            ports[name] = free_port()
            machines[name] = self.start_virgo(
                workers=1, port=ports[name], extra={"VIRGO_HOME": str(home)}
            )
        urls = {name: f"http://127.0.0.1:{port}{path}" for name, port in ports.items()}
        for name, url in urls.items():
            wait_http(url, process=machines[name])
            status, _, content = fetch(url)
            if status != 200 or content != body:
                raise RuntimeError(f"{name} did not serve the card it was given ({status})")
        pair = [urls["machine A"], urls["machine B"]]

        def both(seconds: int) -> list[wrk.WrkResult]:
            with ThreadPoolExecutor(max_workers=2) as pool:
                runs = [
                    pool.submit(wrk.run, url, threads=1, connections=32, seconds=seconds)
                    for url in pair
                ]
                return [run.result() for run in runs]

        wrk.run(urls["one machine"], seconds=2)
        both(2)
        one: list[float] = []
        two: list[float] = []
        errors = 0
        for _ in range(self.args.rounds):
            single = wrk.run(urls["one machine"], seconds=self.args.seconds)
            split = both(self.args.seconds)
            one.append(single.requests_per_s)
            two.append(sum(result.requests_per_s for result in split))
            errors += single.errors + sum(result.errors for result in split)
        for process in machines.values():
            self.procs.stop(process)
        if errors:
            raise RuntimeError(f"{errors} card requests failed across one and two machines")
        self.figures["card_get_two_machines_per_s"] = round(statistics.median(two))
        self.figures["card_get_one_machine_per_s"] = round(statistics.median(one))
        self.figures["card_get_two_machines_vs_one"] = report.ratio(
            statistics.median(two), statistics.median(one)
        )
        self.sections.append(
            (
                "Card GET on two machines",
                "Two virgo-web processes of one worker each, with their own VIRGO_HOME (sharing "
                "no disk) on the one PostgreSQL and Redis, each loaded by `wrk -t1 -c32` at "
                "once, beside one virgo-web of two workers loaded by `wrk -t2 -c64`; "
                f"{self.args.rounds} interleaved rounds of {self.args.seconds} s, medians: "
                f"{statistics.median(two):,.0f} req/s on two machines, "
                f"{statistics.median(one):,.0f} on one, no request failed. On one host both "
                "share the same two cores: the figure shows that a machine that made no key "
                "and wrote no file serves every card as fast, not that two hosts double it.",
            )
        )

    def _check_virgo_headers(self, url: str, etag: str) -> None:
        for headers in (None, {"If-None-Match": etag}):
            _, served, _ = fetch(url, headers)
            for name in nginx.SECURITY_HEADERS:
                if name.lower() not in served:
                    raise RuntimeError(f"Virgo's card response lacks {name}: {served}")

    # Signed cards ---------------------------------------------------------------------------------

    def signing_section(self) -> None:
        if not hasattr(self, "fleet"):
            from bench.data import make_fleet

            self.fleet = make_fleet()
        self.card_signed_get_vs_a2a_sdk()
        self.cards_signed_per_s()

    def card_signed_get_vs_a2a_sdk(self) -> None:
        """A signed card GET through Virgo's fast path beside the a2a-sdk serving the same card
        signed by its own signer at start; both answers are checked to verify first."""
        from a2a.client.card_resolver import parse_agent_card
        from a2a.utils.signing import create_signature_verifier
        from jwt import PyJWK

        progress("signing: a signed card GET, Virgo and the a2a-sdk")
        path = self.fleet.template.card_path
        virgo = self.start_virgo()
        virgo_url = f"http://127.0.0.1:{self.web_port}{path}"
        wait_http(virgo_url, process=virgo)
        _, _, body = fetch(virgo_url)
        _, _, jwks = fetch(f"http://127.0.0.1:{self.web_port}/.well-known/jwks.json")
        known = {jwk["kid"]: PyJWK(jwk) for jwk in json.loads(jwks)["keys"]}
        verify = create_signature_verifier(lambda kid, jku: known[kid], ["ES256", "EdDSA"])
        verify(parse_agent_card(json.loads(body)))
        card_file = self.work / "signed-card.json"
        card_file.write_bytes(body)
        a2a_port = free_port()
        a2a = self.procs.start(
            "uvicorn-signed",
            [
                str(BIN / "uvicorn"),
                "bench.a2a_app:app",
                "--host=127.0.0.1",
                f"--port={a2a_port}",
                f"--workers={WORKERS}",
                "--loop=uvloop",
                "--http=httptools",
                "--no-access-log",
                "--log-level=warning",
            ],
            env={
                **self.env,
                "BENCH_CARD_FILE": str(card_file),
                "BENCH_CARD_PATH": path,
                "BENCH_SIGN": "1",
            },
            cwd=ROOT,
        )
        a2a_url = f"http://127.0.0.1:{a2a_port}{path}"
        wait_http(a2a_url, process=a2a)
        if not json.loads(fetch(a2a_url)[2]).get("signatures"):
            raise RuntimeError("the a2a-sdk reference serves no signature")
        series = {name: report.LoadSeries(name, "200 signed") for name in ("virgo", "a2a-sdk")}
        urls = {"virgo": virgo_url, "a2a-sdk": a2a_url}
        for url in urls.values():
            wrk.run(url, seconds=2)  # warm-up, not counted
        for _ in range(self.args.rounds):
            for name, url in urls.items():
                series[name].rounds.append(wrk.run(url, seconds=self.args.seconds))
        self.procs.stop(virgo)
        self.procs.stop(a2a)
        self.figures["card_signed_get_vs_a2a_sdk"] = report.ratio(
            series["virgo"].requests_per_s, series["a2a-sdk"].requests_per_s
        )
        table = report.load_table(list(series.values()))
        print(table, flush=True)
        self.sections.append(
            (
                "Signed card GET",
                "The card as Virgo serves it, signed once at publication (ES256), through the "
                "fast path; beside the a2a-sdk route serving the same card signed once at start "
                "by the SDK's create_agent_card_signer. Both verified by the SDK's verifier "
                f"first. wrk as above, {self.args.rounds} rounds.\n\n" + table,
            )
        )

    def cards_signed_per_s(self) -> None:
        """A key rotation re-signing RESIGN_CARDS cards through the Celery fan-out, one worker
        process: from the rotation's commit until no card is owed a signature."""
        from bench.data import add_personas
        from cards import keys
        from cards.publishing import cards_owed_signatures, publish_cards
        from personas.models import Persona
        from virgo.celery import app

        have = Persona.objects.filter(agent=self.fleet.agent).count()
        if have < RESIGN_CARDS:
            add_personas(self.fleet, RESIGN_CARDS - have, start=have)
        self._build_owed_stamps()
        progress(f"signing: publishing {RESIGN_CARDS} cards")
        fleet = Persona.objects.filter(agent=self.fleet.agent).order_by("pk")
        for first in range(0, RESIGN_CARDS, STAMP_BATCH):
            publish_cards(list(fleet[first : first + STAMP_BATCH]))
        count = fleet.filter(published_card__isnull=False).count()
        log = self.work / "logs" / "celery-resign.log"
        process = self.procs.start(
            "celery-resign",
            [str(BIN / "celery"), "-A", "virgo", "worker", "--concurrency=1", "--loglevel=INFO"],
            env=self.env,
            cwd=ROOT,
        )
        deadline = time.monotonic() + 300
        while "ready." not in log.read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Celery worker did not start; see {log}")
            time.sleep(0.2)
        progress(f"signing: rotating the key, {count} cards to re-sign, one worker")
        app.conf.task_always_eager = False
        try:
            started = time.monotonic()
            keys.rotate()
            deadline = time.monotonic() + 600
            while (left := cards_owed_signatures().count()) > 0:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"re-signing stalled with {left} cards left; see {log}")
                time.sleep(0.2)
            elapsed = time.monotonic() - started
        finally:
            app.conf.task_always_eager = True
            self.procs.stop(process)
        # The data section counts its personas from one: these would weigh on every figure
        # it names "1k" and "10k" (the check, the directory, the readiness probes).
        fleet.exclude(pk=self.fleet.template.pk).delete()
        self.figures["cards_signed_per_s"] = count / elapsed
        progress(f"signing: {count / elapsed:.0f} cards/s")
        self.sections.append(
            (
                "Key rotation",
                f"`virgo keys rotate` with {count:,} published cards: from the rotation's commit "
                "until every card carries the new and the old key's signatures (two ES256 "
                "signatures each), one Celery worker process, batches of "
                "VIRGO_RESIGN_BATCH_SIZE written in one statement: "
                f"{count / elapsed:,.0f} cards/s.",
            )
        )

    # Memory ------------------------------------------------------------------------------------

    def memory_section(self) -> None:
        from bench.procs import children

        if not hasattr(self, "fleet"):
            from bench.data import make_fleet

            self.fleet = make_fleet()
        progress("memory: 100k requests to one worker")
        persona = self.fleet.template
        # One worker serves everything, and is never recycled, so its growth is the figure.
        master = self.start_virgo(workers=1)
        [worker] = children(master.pid)
        etag = fetch(f"http://127.0.0.1:{self.web_port}{persona.card_path}")[1]["etag"]
        started = time.monotonic()
        self._hammer(persona.card_path, etag, 1000)
        after_1k = rss_kib(worker)
        self._hammer(persona.card_path, etag, 99_000)
        after_100k = rss_kib(worker)
        self.procs.stop(master)
        self.figures["worker_rss_growth"] = report.ratio(after_100k, after_1k)
        self.sections.append(
            (
                "Memory",
                "One virgo-web worker (recycling off) after 1k card requests and after 100k "
                "(of every 8: 4 answered 200, 3 answered 304, 1 a 404 for a random id; "
                f"{time.monotonic() - started:.0f} s): RSS {after_1k / 1024:.1f} MiB -> "
                f"{after_100k / 1024:.1f} MiB.",
            )
        )

    def secrets_section(self) -> None:
        progress("secrets: the rules with and without their keyword prefilter")
        figures, body = secret_scan.measure()
        self.figures.update(figures)
        self.sections.append(("Secrets scan", body))

    def cli_section(self) -> None:
        progress("cli: virgo agent list beside a stock Django project's set-up")
        figures, body = cli_start.measure()
        self.figures.update(figures)
        self.sections.append(("Command start-up", body))

    # Remote MCP (serving/) ------------------------------------------------------------------------

    def remote_section(self) -> None:
        """Allowed read calls to a persona's remote endpoint across the web workers, beside the
        card GET on the same server in the same rounds; and decide()'s warm time in-process."""
        from django.utils import timezone
        from oauth2_provider.models import AccessToken, Application, set_token_value

        from runtime.handler import decide

        if not hasattr(self, "fleet"):
            from bench.data import make_fleet

            self.fleet = make_fleet()
        persona = self.fleet.template
        raw = secrets.token_urlsafe(32)
        client = Application.objects.create(
            name="bench host",
            user=self.fleet.owner,
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris="http://127.0.0.1/callback",
        )
        token = AccessToken(
            user=self.fleet.owner,
            application=client,
            resource=[persona.mcp_url],
            scope="mcp",
            expires=timezone.now() + datetime.timedelta(hours=1),
        )
        set_token_value(token, raw)
        token.save()
        progress("remote: starting Virgo, checking one call")
        process = self.start_virgo(extra={"VIRGO_MCP_RATE_LIMIT": NEVER_LIMITING_RATE})
        call = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "workspace_list", "arguments": {"path": "."}},
            }
        )
        headers = {
            "Authorization": f"Bearer {raw}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
        }
        import httpx

        answered = httpx.post(persona.mcp_url, content=call, headers=headers, timeout=30)
        if answered.status_code != 200 or not answered.json()["result"]["structuredContent"]["ok"]:
            raise RuntimeError(f"remote call answered {answered.status_code}: {answered.text}")
        script = self.work / "remote-call.lua"
        script.write_text(wrk.post_script(call, headers))
        card = f"http://127.0.0.1:{self.web_port}{persona.card_path}"
        series = {
            "remote read call": report.LoadSeries("virgo", "remote read call"),
            "card GET": report.LoadSeries("virgo", "card GET"),
        }
        wrk.run(persona.mcp_url, seconds=2, script=script)  # warm-up, not counted
        for _ in range(self.args.rounds):
            series["remote read call"].rounds.append(
                wrk.run(persona.mcp_url, seconds=self.args.seconds, script=script)
            )
            series["card GET"].rounds.append(wrk.run(card, seconds=self.args.seconds))
        self.procs.stop(process)
        remote, card_get = series["remote read call"], series["card GET"]
        self.figures["remote_read_calls_per_s"] = round(remote.requests_per_s)
        self.figures["remote_read_p99_ms"] = round(
            statistics.median(r.p99_ms for r in remote.rounds), 1
        )
        self.figures["remote_read_vs_card_get"] = report.ratio(
            remote.requests_per_s, card_get.requests_per_s
        )

        progress("remote: decide() warm, in this process")
        arguments = {"path": "."}
        decide(persona, "workspace_list", arguments, "bench-warm")
        timings = []
        for n in range(5):
            started = time.perf_counter()
            for i in range(200):
                decide(persona, "workspace_list", arguments, f"bench-{n}-{i}")
            timings.append((time.perf_counter() - started) / 200)
        self.figures["decide_warm_us"] = round(statistics.median(timings) * 1e6)
        table = report.load_table([remote, card_get])
        print(table, flush=True)
        self.sections.append(
            (
                "Remote MCP calls",
                "An allowed read call (`tools/call workspace_list`) to a persona's endpoint with "
                f"a bearer token, `wrk -t2 -c64 -d{self.args.seconds}s` on {WORKERS} virgo-web "
                "workers, interleaved with the card GET on the same server; and decide()'s "
                "time per call in the driver's process (median of 5 x 200 calls, the stamp read "
                f"and checked each time): {self.figures['decide_warm_us']} us.\n\n" + table,
            )
        )

    def _hammer(self, card_path: str, etag: str, count: int) -> None:
        """`count` requests on four kept-alive connections, each answer read in full."""
        import http.client
        import uuid

        connections = [http.client.HTTPConnection("127.0.0.1", self.web_port) for _ in range(4)]
        try:
            for n in range(count):
                kind = n % 8
                headers = {"If-None-Match": etag} if 4 <= kind <= 6 else {}
                path = card_path
                if kind == 7:
                    path = f"/a/{uuid.uuid4()}/.well-known/agent-card.json"
                connection = connections[n % 4]
                connection.request("GET", path, headers=headers)
                response = connection.getresponse()
                response.read()
                if response.status not in (200, 304, 404):
                    raise RuntimeError(f"memory run: {path} answered {response.status}")
        finally:
            for connection in connections:
                connection.close()

    # Directory, stamps, boot check, admin --------------------------------------------------------

    def data_section(self) -> None:
        from bench.data import add_personas
        from personas.models import Persona

        if not hasattr(self, "fleet"):
            from bench.data import make_fleet

            self.fleet = make_fleet()
        lines: list[str] = []
        population = Persona.objects.count()
        if population != 1:
            raise RuntimeError(f"the data section starts from one persona; {population} are there")
        population += len(add_personas(self.fleet, 99, start=population))
        self._build_owed_stamps()
        admin_100 = self._admin_queries()
        self.figures["admin_queries_per_page_100"] = admin_100
        population += self._add_searchable()

        population += len(add_personas(self.fleet, 1000 - population, start=population))
        progress("data: 1k personas, the stamp factory one stamp at a time")
        rates = self._stamp_factory_rates()
        self._build_owed_stamps()
        self.figures["stamps_per_s"] = rates["batch"]
        self.figures["stamps_one_by_one_per_s"] = rates["single"]
        self.figures["stamps_cpu_per_s"] = rates["cpu"]
        self.figures["virgo_check_1k_s"] = self._virgo_check()
        directory = {"1k": self._directory()}
        search = {"1k": self._directory(self._search_query())}
        if "ard" in self.args.only:
            progress("data: ARD search at 1k personas")
            self._quiesce()
            self.ard.measure(self.fleet, self.searchable, "1k")
        ready = {"1k": self._ready_seconds("1k")}

        progress("data: 10k personas")
        population += len(add_personas(self.fleet, 10_000 - population, start=population))
        self._build_owed_stamps()
        self.figures["virgo_check_10k_s"] = self._virgo_check()
        directory["10k"] = self._directory()
        search["10k"] = self._directory(self._search_query())
        self.figures["admin_queries_per_page_10k"] = self._admin_queries()
        # The name for the figure: the count at 10k, to be read beside the one at 100.
        self.figures["admin_queries_per_page"] = self.figures["admin_queries_per_page_10k"]

        if "fanout" in self.args.only:
            self.fanout_section()

        progress("data: 100k personas")
        population += len(add_personas(self.fleet, 100_000 - population, start=population))
        directory["100k"] = self._directory()
        search["100k"] = self._directory(self._search_query())
        self.figures["directory_100k_vs_1k"] = report.ratio(
            directory["100k"][0], directory["1k"][0]
        )
        self.figures["directory_search_100k_vs_1k"] = report.ratio(
            search["100k"][0], search["1k"][0]
        )
        self.figures["directory_search_queries_per_page"] = max(q for _, q in search.values())
        progress("data: start-up with 100k personas")
        ready["100k"] = self._ready_seconds("100k")
        for process in ("web", "worker"):
            self.figures[f"{process}_ready_100k_vs_1k"] = report.ratio(
                ready["100k"][process], ready["1k"][process]
            )
        self.figures["directory_queries_per_page"] = max(q for _, q in directory.values())
        # Last, once every other 100k figure is taken: those measure 100k personas with 10k
        # stamps built, as before this figure, and building the other 90k changes what they read.
        progress("data: 100k personas, building their stamps for `virgo check`")
        self._build_owed_stamps()
        verified = self._active_stamps()
        check_100k_s = self._virgo_check()
        self.figures["virgo_check_per_s"] = verified / check_100k_s
        if "ard" in self.args.only:
            # Every persona stands now, so all 100k are listed.
            self._ard_at_100k(population)
        rows = [
            [size, f"{ms:.2f}", queries, f"{search[size][0]:.2f}", search[size][1]]
            for size, (ms, queries) in directory.items()
        ]
        lines.append(
            report.table(
                [
                    "discoverable personas",
                    "page ms (median)",
                    "queries/page",
                    "search page ms (median)",
                    "search queries/page",
                ],
                rows,
            )
        )
        self.sections.append(
            (
                "Directory",
                "GET /api/directory/ with a token, in-process on PostgreSQL: the median time of "
                "pages read by following `next` from the middle of the list. The search is "
                f"`{self._search_query()}`: {SEARCH_MATCHES} personas match it at every size, "
                "found through the indexes of migration personas 0007 (VX-DIR-1).\n\n"
                + "\n".join(lines),
            )
        )
        self.sections.append(
            (
                "Start-up",
                "From a process's start to its first 200 on `/readyz` (virgo-web, one worker) "
                "and to the first task it takes (a Celery worker), the median of "
                f"{READY_ROUNDS} starts, with 1k personas and with 100k (VX-OPS-5: start-up "
                "reads no stamp).\n\n"
                + report.table(
                    ["personas", "virgo-web to /readyz 200 (s)", "worker to its first task (s)"],
                    [
                        [size, f"{times['web']:.2f}", f"{times['worker']:.2f}"]
                        for size, times in ready.items()
                    ],
                ),
            )
        )
        self.sections.append(
            (
                "Stamps, boot check and admin",
                report.table(
                    ["figure", "value"],
                    [
                        [
                            "stamps per s, one core: build, validate, canonicalise, hash, "
                            "write the files in batches as the fan-out does",
                            f"{rates['batch']:,.0f}",
                        ],
                        [
                            "the same, each file written alone (as one change writes it)",
                            f"{rates['single']:,.0f}",
                        ],
                        ["the same without writing the file", f"{rates['cpu']:,.0f}"],
                        [
                            "`virgo check`, 1k personas (s)",
                            f"{self.figures['virgo_check_1k_s']:.2f}",
                        ],
                        [
                            "`virgo check`, 10k personas (s)",
                            f"{self.figures['virgo_check_10k_s']:.2f}",
                        ],
                        [
                            f"`virgo check`, 100k personas ({verified:,} stamps, s)",
                            f"{check_100k_s:.2f}",
                        ],
                        [
                            "`virgo check` stamps verified per s, 100k personas",
                            f"{self.figures['virgo_check_per_s']:,.0f}",
                        ],
                        ["admin persona changelist queries, 100 personas", admin_100],
                        [
                            "admin persona changelist queries, 10k personas",
                            self.figures["admin_queries_per_page_10k"],
                        ],
                    ],
                ),
            )
        )

    def _ready_seconds(self, population: str) -> dict[str, float]:
        """Median seconds from start to ready: virgo-web answering /readyz 200, and a Celery
        worker taking the first task waiting for it."""
        web = [self._web_ready() for _ in range(READY_ROUNDS)]
        worker = [self._worker_ready(f"{population}-{round_}") for round_ in range(READY_ROUNDS)]
        return {"web": statistics.median(web), "worker": statistics.median(worker)}

    def _web_ready(self) -> float:
        port = free_port()
        env = {**self.env, "WEB_CONCURRENCY": "1", "VIRGO_BIND": f"127.0.0.1:{port}"}
        started = time.monotonic()
        process = self.procs.start("virgo-web-ready", [str(BIN / "virgo-web")], env=env, cwd=ROOT)
        try:
            deadline = started + 120
            while True:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("virgo-web did not become ready; see its log")
                try:
                    if fetch(f"http://127.0.0.1:{port}/readyz")[0] == 200:
                        return time.monotonic() - started
                except OSError:
                    pass
                time.sleep(0.02)
        finally:
            self.procs.stop(process)

    def _worker_ready(self, name: str) -> float:
        from virgo.celery import app

        # A log of its own: the marker in an earlier start's log would end the wait at once.
        log = self.work / "logs" / f"celery-ready-{name}.log"
        # Waiting in the queue before the worker starts: the time to take it is the time to
        # being of use. backend_cleanup is Celery's own task and does nothing without a backend.
        app.conf.task_always_eager = False
        try:
            with app.connection_for_write() as connection:
                app.send_task("celery.backend_cleanup", connection=connection)
        finally:
            app.conf.task_always_eager = True
        started = time.monotonic()
        process = self.procs.start(
            f"celery-ready-{name}",
            [str(BIN / "celery"), "-A", "virgo", "worker", "--concurrency=1", "--loglevel=INFO"],
            env=self.env,
            cwd=ROOT,
        )
        try:
            deadline = started + 120
            while "celery.backend_cleanup" not in log.read_text(errors="replace"):
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the Celery worker took no task; see {log}")
                time.sleep(0.02)
            return time.monotonic() - started
        finally:
            self.procs.stop(process)

    def _stamp_factory_rates(self) -> dict[str, float]:
        """The factory on one core: build, validate, canonicalise, hash, and write the file.

        For every owed bench generation, in this one process: without the write ("cpu");
        writing each file alone as one change does ("single": write_stamp_file, a private
        temporary file, fsync, link, directory fsyncs); and writing them in batches as the
        fan-out and the reconciler do ("batch": write_stamp_files). Each write goes to a scratch
        home of its own, as the generations' first stamps would; "cpu" and "batch" are the
        medians of STAMP_ROUNDS interleaved rounds (a round is under a second: one flush of the
        filesystem caught behind another process's writes would be the figure).
        """
        from django.test import override_settings

        from bench.data import owed_generations
        from stamps.factory import build_stamp
        from stamps.services import stamp_inputs
        from stamps.storage import stamp_path, write_stamp_file, write_stamp_files
        from stamps.validation import Verdicts
        from virgo.canonical import sha256_hex, stamp_bytes

        generations = owed_generations(self.fleet.agent)
        inputs = [stamp_inputs(generation) for generation in generations]

        def build(first: int, last: int, *, batch: bool = True) -> list[tuple[Path, bytes]]:
            # A batch shares the semantic verdict of stamps alike, as build_current_stamps does;
            # a single change builds its one stamp alone.
            verdicts = Verdicts() if batch else None
            built = []
            for generation, kwargs in zip(generations[first:last], inputs[first:last], strict=True):
                data = stamp_bytes(build_stamp(**kwargs, verdicts=verdicts))
                sha256_hex(data)
                built.append(
                    (stamp_path(generation.composition["persona"], generation.number), data)
                )
            return built

        def timed(work: Callable[[], object]) -> float:
            started = time.perf_counter()
            work()
            return len(generations) / (time.perf_counter() - started)

        def one_by_one() -> None:
            for path, data in build(0, len(generations), batch=False):
                write_stamp_file(path, data)

        def in_batches() -> None:
            for first in range(0, len(generations), STAMP_BATCH):
                write_stamp_files(build(first, first + STAMP_BATCH))

        rounds: dict[str, list[float]] = {"cpu": [], "batch": []}
        for round_ in range(STAMP_ROUNDS):
            rounds["cpu"].append(timed(lambda: build(0, len(generations))))
            with override_settings(VIRGO_HOME=str(self.work / f"batch-write-home-{round_}")):
                rounds["batch"].append(timed(in_batches))
        rates = {name: statistics.median(figures) for name, figures in rounds.items()}
        with override_settings(VIRGO_HOME=str(self.work / "single-write-home")):
            rates["single"] = timed(one_by_one)
        return rates

    def _build_owed_stamps(self) -> None:
        """Build every owed stamp of the bench personas through the fan-out's batch path."""
        from bench.data import owed_generations
        from personas.models import Persona
        from stamps.services import build_current_stamps

        ids = [generation.persona_id for generation in owed_generations(self.fleet.agent)]
        for first in range(0, len(ids), STAMP_BATCH):
            personas = list(Persona.objects.filter(pk__in=ids[first : first + STAMP_BATCH]))
            if not all(o.standing for o in build_current_stamps(personas=personas)):
                raise RuntimeError("a bench persona does not stand")

    @staticmethod
    def _active_stamps() -> int:
        """The stamps `virgo check` verifies: every standing current generation's."""
        from django.db.models import F

        from personas.models import Generation

        return Generation.objects.filter(number=F("persona__generation"), standing=True).count()

    def _virgo_check(self) -> float:
        """Wall seconds of a whole `virgo check`, start-up included: what an operator waits for."""
        started = time.perf_counter()
        subprocess.run(
            [str(BIN / "virgo"), "check"],
            cwd=ROOT,
            env=self.env,
            check=True,
            capture_output=True,
        )
        return time.perf_counter() - started

    def _add_searchable(self) -> int:
        """The personas the directory search finds (bench.data.make_searchable, and copies)."""
        from bench.data import add_personas, make_searchable

        searchable = self.searchable = make_searchable(self.fleet)
        return 1 + len(add_personas(self.fleet, SEARCH_MATCHES - 1, start=1, template=searchable))

    # ARD registry and status list (bench/ard.py) -----------------------------------------------

    def ard_section(self) -> None:
        """On a fleet of its own when the data section does not run: 1k personas, then 100k,
        every stamp built (through the real path) so that each is listed."""
        from bench.data import add_personas
        from personas.models import Persona

        if not hasattr(self, "fleet"):
            from bench.data import make_fleet

            self.fleet = make_fleet()
        population = Persona.objects.count()
        population += self._add_searchable()
        population += len(add_personas(self.fleet, 1000 - population, start=population))
        self._build_owed_stamps()
        progress("ard: search at 1k personas")
        self._quiesce()
        self.ard.measure(self.fleet, self.searchable, "1k")
        progress("ard: 100k personas, building their stamps")
        population += len(add_personas(self.fleet, 100_000 - population, start=population))
        self._build_owed_stamps()
        self._ard_at_100k(population)

    def _ard_at_100k(self, population: int) -> None:
        progress("ard: search at 100k personas")
        self._quiesce()
        self.ard.measure(self.fleet, self.searchable, "100k")
        progress("ard: the status list at 100k personas")
        self.ard.measure_status_list(population)
        self.figures.update(self.ard.figures())
        self.sections.append(self.ard.section())
        (self.work / "ard-plans.txt").write_text(self.ard.plans())
        print(self.ard.section()[1], flush=True)
        print(self.ard.plans(), flush=True)

    @staticmethod
    def _search_query() -> str:
        from bench.data import SEARCH_SKILL, SEARCH_WORD

        return f"skill={SEARCH_SKILL}&q={SEARCH_WORD}"

    def _directory(self, query: str = "") -> tuple[float, int]:
        """Page time (ms, median) and most queries per page, from the middle of the results."""
        import base64
        from urllib.parse import urlencode

        from django.db import connection
        from django.http import QueryDict
        from django.test import Client
        from django.test.utils import CaptureQueriesContext
        from rest_framework.authtoken.models import Token

        from cards.filters import read_filters
        from personas.models import Persona
        from personas.search import search_filter

        token, _ = Token.objects.get_or_create(user=self.fleet.owner)
        client = Client(headers={"Authorization": f"Token {token.key}"})
        filters = read_filters(QueryDict(query))
        matching = Persona.objects.advertised().filter(
            search_filter(
                skills=filters.skills,
                tags=filters.tags,
                provider=filters.provider,
                words=filters.words,
            )
        )
        ids = list(matching.order_by("id").values_list("id", flat=True))
        middle = ids[len(ids) // 2]
        cursor = base64.b64encode(urlencode({"p": str(middle)}).encode()).decode()
        url = f"/api/directory/?cursor={cursor}" + (f"&{query}" if query else "")
        timings, queries = [], []
        for _ in range(40):
            with CaptureQueriesContext(connection) as captured:
                started = time.perf_counter()
                response = client.get(url)
                timings.append(time.perf_counter() - started)
            if response.status_code != 200:
                raise RuntimeError(f"directory answered {response.status_code}")
            queries.append(len(captured.captured_queries))
            url = json.loads(response.content)["next"] or url
        return statistics.median(timings[5:]) * 1000, max(queries)

    def _admin_queries(self) -> int:
        from django.db import connection
        from django.test import Client
        from django.test.utils import CaptureQueriesContext

        client = Client()
        client.force_login(self.fleet.owner)
        client.get("/admin/personas/persona/")
        with CaptureQueriesContext(connection) as captured:
            response = client.get("/admin/personas/persona/")
        if response.status_code != 200:
            raise RuntimeError(f"admin changelist answered {response.status_code}")
        return len(captured.captured_queries)

    # Fan-out -----------------------------------------------------------------------------------

    def fanout_section(self) -> None:
        from bench.data import fanout_personas

        count = fanout_personas(self.fleet).count()
        # Interleaved rounds, as the card figures: one run is ~10 s on shared cores, where the
        # ratio of two single runs swung by a tenth between runs of the same code. Each round
        # leaves a generation more per persona and every run is a little slower than the one
        # before it, so the order alternates (1 2, 2 1, ...) and neither count is always second.
        rounds: dict[int, list[float]] = {1: [], 2: []}
        for round_ in range(FANOUT_ROUNDS):
            for workers in (1, 2) if round_ % 2 == 0 else (2, 1):
                progress(f"fan-out: {count} personas, {workers} worker process(es)")
                rounds[workers].append(self._fanout(workers, count, f"{workers}w-{round_}"))
                progress(f"fan-out: {rounds[workers][-1]:.0f} personas/s")
        rates = {workers: statistics.median(figures) for workers, figures in rounds.items()}
        self.figures["fanout_personas_per_s_1w"] = rates[1]
        self.figures["fanout_scaling_2w_vs_1w"] = report.ratio(rates[2], rates[1])
        self.sections.append(
            (
                "Recompute fan-out",
                f"A verb->skill map change that affects {count:,} personas, from its commit until "
                "every one has its new skills and a standing stamp (card published), with one "
                "Celery worker process and with two, each the median of "
                f"{FANOUT_ROUNDS} rounds in alternating order (a new skill each): "
                f"{rates[1]:,.0f} and {rates[2]:,.0f} personas/s (rounds: "
                + ", ".join(f"{rate:,.0f}" for rate in rounds[1])
                + " and "
                + ", ".join(f"{rate:,.0f}" for rate in rounds[2])
                + ").",
            )
        )

    def _quiesce(self) -> None:
        """Start a measurement on a quiet host, as pgbench vacuums before each run: the bulk
        writes just before it (90k stamps, the fan-out round before) leave autovacuum work and
        dirty pages that would otherwise land in whichever measurement comes next."""
        from django.db import connection

        progress("vacuuming and syncing before the measurement")
        with connection.cursor() as cursor:
            cursor.execute("VACUUM (ANALYZE)")
        os.sync()

    def _fanout(self, workers: int, count: int, name: str) -> float:
        from django.db.models import F

        from bench.data import FANOUT_VERBS, fanout_personas
        from personas import services
        from personas.models import Generation
        from virgo.celery import app

        self._quiesce()
        log = self.work / "logs" / f"celery-{name}.log"
        process = self.procs.start(
            f"celery-{name}",
            [
                str(BIN / "celery"),
                "-A",
                "virgo",
                "worker",
                f"--concurrency={workers}",
                "--loglevel=INFO",
            ],
            env=self.env,
            cwd=ROOT,
        )
        deadline = time.monotonic() + 300
        while "ready." not in log.read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Celery worker did not start; see {log}")
            time.sleep(0.2)
        superuser = self._superuser()
        fleet = fanout_personas(self.fleet)
        target = fleet.values_list("generation", flat=True).first() + 1
        app.conf.task_always_eager = False
        try:
            started = time.time()
            services.skill_save(
                actor=superuser,
                slug=f"bench-fanout-{name}",
                name=f"Bench fan-out {name}",
                description="Added by the benchmark: bench personas but the searchable derive it.",
                required_verbs=FANOUT_VERBS,
                tags=["bench"],
            )
            deadline = time.monotonic() + 600
            done = 0
            while done < count:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"fan-out stalled at {done}/{count}; see {log}")
                # The worker's log says when every range it was given has succeeded; only then
                # is the database asked (a count over every bench persona, on the cores being
                # measured), and asked again should a range have been retried.
                time.sleep(0.1)
                queued = successes(log, "fan_out_skill_map")
                if not queued or len(successes(log, "settle_persona_range")) < int(
                    queued[-1].rsplit(": ", 1)[1]
                ):
                    continue
                done = Generation.objects.filter(
                    persona__in=fleet,
                    number=target,
                    number__gte=F("persona__generation"),
                    standing=True,
                    persona__published_card__generation=target,
                ).count()
            elapsed = last_task_end(log, "settle_persona_range") - started
        finally:
            app.conf.task_always_eager = True
            self.procs.stop(process)
        return count / elapsed

    def _superuser(self) -> Any:
        from django.contrib.auth import get_user_model

        user_model = get_user_model()
        user = user_model.objects.filter(username="bench-admin").first()
        return user or user_model.objects.create_superuser(
            "bench-admin", None, secrets.token_hex(16)
        )

    # The run -----------------------------------------------------------------------------------

    def serve(self) -> int:
        """Virgo as the card bench runs it, until interrupted: for profiling by hand."""
        self.start_services()
        from bench.data import make_fleet

        self.fleet = make_fleet()
        process = self.start_virgo(
            extra={"WEB_CONCURRENCY": os.environ.get("WEB_CONCURRENCY", str(WORKERS))}
        )
        url = f"http://127.0.0.1:{self.web_port}{self.fleet.template.card_path}"
        (self.work / "env.json").write_text(json.dumps(self.env))
        print(f"environment in {self.work / 'env.json'}")
        print(f"serving {url} (virgo-web pid {process.pid}); Ctrl-C stops", flush=True)
        process.wait()
        return 0

    def run(self) -> int:
        if self.args.serve:
            return self.serve()
        self.load_at_start = os.getloadavg()[0]
        self.start_services()
        started = time.monotonic()
        if "card" in self.args.only:
            self.card_section()
        if "signing" in self.args.only:
            self.signing_section()
        if "memory" in self.args.only:
            self.memory_section()
        if "data" in self.args.only:
            self.data_section()
        elif "ard" in self.args.only:
            self.ard_section()
        if "secrets" in self.args.only:
            self.secrets_section()
        if "cli" in self.args.only:
            self.cli_section()
        if "remote" in self.args.only:
            self.remote_section()
        self.finish(time.monotonic() - started)
        return 0

    def finish(self, elapsed: float) -> None:
        versions = {
            name: metadata.version(name)
            for name in (
                "Django",
                "granian",
                "redis",
                "hiredis",
                "psycopg",
                "celery",
                "a2a-sdk",
                "uvicorn",
                "uvloop",
                "httptools",
                "starlette",
            )
            if _installed(name)
        }
        versions["nginx"] = _command_version(["nginx", "-v"])
        versions["wrk"] = _command_version(["wrk", "-v"])
        versions["PostgreSQL"] = _command_version(["psql", "--version"])
        versions["Redis"] = _command_version(["redis-server", "--version"])
        versions["Python"] = platform.python_version()
        system = f"{platform.system()} {platform.release()}"
        machine = f"{os.cpu_count()} cores, {platform.machine()}, {system}"
        self.setup = [
            f"Virgo: `virgo-web` (granian, WSGI), {WORKERS} workers of 4 threads, PostgreSQL and "
            "Redis as `make serve` runs them (the cache over Redis's Unix socket); the "
            "Redis-backed card rate limit on (limit "
            f"{NEVER_LIMITING_RATE}, never reached); every security header on.",
            f"a2a-sdk: `create_agent_card_routes` in Starlette under uvicorn, {WORKERS} workers, "
            "uvloop + httptools, same card and path.",
            f"nginx: the same bytes as a static file, {WORKERS} workers, the same headers.",
            "Access logs off on all three, virgo-web's worker recycling off (as uvicorn's); wrk, "
            "the servers, PostgreSQL and Redis share the cores.",
            f"Total run time {elapsed / 60:.1f} min; load average {self.load_at_start:.1f} at the"
            f" start and {os.getloadavg()[0]:.1f} at the end (the cores are shared with whatever"
            " else runs: compare ratios, not absolute rates).",
        ]
        self.notes = [
            "Card: each request is one Redis call, a Lua script that counts it against its source "
            "address and reads the card's token; while the token holds, a web process answers "
            "200 and 304 from memory with the bytes and headers computed once "
            "(cards/fastpath.py). A 304 therefore costs what a 200 costs: the round trip.",
            "stamps_per_s: the factory on one core, writing the files in batches of "
            f"{STAMP_BATCH} as the fan-out does (every temporary file, one syncfs, every "
            "link: decision 201; a first generation's three directories made from the top), "
            f"each round into a fresh home, the median of {STAMP_ROUNDS} rounds interleaved with "
            "stamps_cpu_per_s's; stamps_one_by_one_per_s writes each file alone as a single "
            "change does (private temporary file, fsync, hard link, a fsync of each directory it "
            "creates: 3 to 5 fsyncs per stamp); stamps_cpu_per_s is the same without the write. "
            "The bench personas are made alike, so a batch asks the semantic rules once "
            "(stamps.validation.Verdicts) and the JSON Schema of every stamp; a stamp built "
            "alone (stamps_one_by_one_per_s) asks both.",
            "Fan-out: a Celery task per batch of VIRGO_RECOMPUTE_BATCH_SIZE personas settles "
            "them and builds their stamps and cards in bulk, writing each batch's stamp files "
            "with one filesystem flush; each card is checked against the SDK's AgentCard model "
            "compiled as a JSON Schema (cards/card_model.py), not by building SDK objects.",
            "virgo check starts Django and reads, hashes and validates every active stamp file, "
            "in as many worker processes as there are cores (VIRGO_CHECK_PROCESSES), then the "
            "channel's check reads every standing stamp once more (the bench sets no hub); "
            "virgo_check_per_s is the stamps verified at 100k personas over the whole "
            "command's wall time, start-up included.",
            "Directory pages are timed in-process (Django test client with a token), so they "
            "measure the view and its queries, not HTTP.",
        ]
        sections, figures, measured = self.sections, self.figures, []
        if self.args.only != set(SECTIONS) and DOC.exists():
            # A run over some sections keeps the others' from the last run, dated as theirs.
            carried = report.carried_over(DOC.read_text(), self.sections)
            sections, figures = carried.sections, {**carried.figures, **self.figures}
            measured = [name for name in SECTIONS if name in self.args.only]
        text = report.markdown(
            date=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            machine=machine,
            versions=versions,
            setup=self.setup,
            sections=sections,
            figures=figures,
            targets=TARGETS,
            notes=self.notes,
            measured=measured,
        )
        if self.args.write:
            DOC.write_text(text)
            print(f"\nwrote {DOC.relative_to(ROOT)}")
        print()
        print(
            report.table(
                ["figure", "value", "target"],
                [[n, report.format_value(v), TARGETS.get(n, "")] for n, v in self.figures.items()],
            )
        )
        print()
        print("\n".join(report.figure_lines(self.figures)), flush=True)

    def close(self) -> None:
        self.procs.stop_all()
        if not self.args.keep:
            shutil.rmtree(self.work, ignore_errors=True)


def successes(log: Path, task: str) -> list[str]:
    """The lines of a Celery worker's log that say a run of `task` succeeded, in order."""
    return [
        line
        for line in log.read_text(errors="replace").splitlines()
        if f".{task}[" in line and " succeeded in " in line
    ]


def last_task_end(log: Path, task: str) -> float:
    """When the last run of `task` a Celery worker logged ended (seconds since the epoch): its
    "succeeded" line's time, to the millisecond, where a poll would add up to its interval."""
    ends = successes(log, task)
    if not ends:
        raise RuntimeError(f"no {task} succeeded in {log}")
    # Celery's own format: "[2026-12-03 13:58:11,968: INFO/ForkPoolWorker-1] Task ..."
    stamp = ends[-1][1 : ends[-1].index(": ")]
    return datetime.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def _installed(name: str) -> bool:
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def _command_version(command: list[str]) -> str:
    try:
        finished = subprocess.run(command, capture_output=True, text=True, check=False)
    except OSError:
        return "missing"
    text = (finished.stdout + finished.stderr).strip().splitlines()
    return text[0] if text else "unknown"


def _raise_on_signal(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--only", default=",".join(SECTIONS), help=",".join(SECTIONS))
    parser.add_argument("--no-write", dest="write", action="store_false")
    parser.add_argument("--serve", action="store_true", help="only serve Virgo, for profiling")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)
    args.only = set(args.only.split(","))
    signal.signal(signal.SIGTERM, _raise_on_signal)
    bench = Bench(args)
    try:
        return bench.run()
    finally:
        bench.close()


if __name__ == "__main__":
    sys.exit(main())
