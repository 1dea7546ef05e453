"""The deployed shape: production settings pass Django's deploy checks, and virgo-web (granian)
with WhiteNoise serves the app and its static files from several workers."""

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.deploy_support import (
    manage,
    production_env,
    static_root,  # noqa: F401 (a fixture)
)
from tests.live import WebServer


@pytest.mark.live
def test_production_settings_pass_the_deploy_checks_with_one_warning_silenced(
    tmp_path: Path,
    static_root: Path,  # noqa: F811 (the fixture)
) -> None:
    """VX-SCALE-2 too: without the release's collected static files `check --deploy` fails
    (virgo.E021, "static files not collected"); with them it passes, with nothing silenced but
    the toolkit's warning about http redirects (loopback only, decision 276)."""
    env = production_env(
        # A database it can reach (the one in VIRGO_HOME): `check` fails without one (VX-OPS-7).
        VIRGO_HOME=str(tmp_path),
        VIRGO_STATIC_ROOT=str(tmp_path / "never-collected"),
    )
    refused = manage("check", "--deploy", env=env)
    assert refused.returncode == 1
    assert "virgo.E021" in refused.stderr
    assert "static files not collected" in refused.stderr
    done = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        env={**env, "VIRGO_STATIC_ROOT": str(static_root)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # One warning is silenced, and it alone (decision 276): the toolkit's about allowing http
    # redirects at all, which agent hosts' loopback redirects need and serving.admin confines.
    assert "System check identified no issues (1 silenced)." in done.stdout


@pytest.mark.live
def test_production_settings_without_redis_are_refused_unless_one_process_is_meant(
    tmp_path: Path,
    static_root: Path,  # noqa: F811 (the fixture)
) -> None:
    """VX-SEC-12: without a shared cache every limit counts per web process; `check --deploy`
    (and so migrate and runserver) refuse that, until VIRGO_RATE_LIMITS_PER_PROCESS says so."""
    env = production_env(VIRGO_HOME=str(tmp_path), VIRGO_STATIC_ROOT=str(static_root))
    del env["REDIS_URL"]
    refused = manage("check", "--deploy", env=env)
    assert refused.returncode == 1
    assert "virgo.E020" in refused.stderr
    assert "rate limits would count in each process" in refused.stderr
    meant = manage("check", "--deploy", env={**env, "VIRGO_RATE_LIMITS_PER_PROCESS": "1"})
    assert meant.returncode == 0, meant.stdout + meant.stderr
    assert "virgo.E020" not in meant.stdout + meant.stderr


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """virgo-web with two workers on production settings, behind a (pretend) TLS proxy."""
    home = tmp_path_factory.mktemp("web")
    env = production_env(
        VIRGO_HOME=str(home),
        ALLOWED_HOSTS="127.0.0.1",
        SECURE_PROXY_SSL_HEADER="1",
        VIRGO_STATIC_ROOT=str(home / "static"),
    )
    env["WEB_CONCURRENCY"] = "2"
    # The embedded database (in VIRGO_HOME) is enough here: no page below reads it.
    del env["REDIS_URL"]
    collected = manage("collectstatic", "--noinput", "-v", "0", env=env)
    assert collected.returncode == 0, collected.stderr
    server = WebServer(home, env)
    server.start()
    yield server.base_url, home
    server.stop()
    assert server.log.read_text().count("Started worker-") == 2


@pytest.mark.live
def test_static_files_are_served_hashed_for_ever_with_the_security_headers(
    web: tuple[str, Path],
) -> None:
    base, home = web
    manifest = json.loads((home / "static" / "staticfiles.json").read_text())
    hashed = manifest["paths"]["admin/css/base.css"]
    assert hashed != "admin/css/base.css"
    response = httpx.get(f"{base}/static/{hashed}", headers={"X-Forwarded-Proto": "https"})
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/css")
    assert "immutable" in response.headers["Cache-Control"]
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["X-Frame-Options"] == "DENY"
    assert "Strict-Transport-Security" in response.headers


@pytest.mark.live
def test_plain_http_is_redirected_to_https_except_for_the_probes(
    web: tuple[str, Path],
) -> None:
    base, _ = web
    page = httpx.get(f"{base}/admin/login/")
    assert page.status_code == 301
    assert page.headers["Location"].startswith("https://127.0.0.1")
    probe = httpx.get(f"{base}/healthz")
    assert probe.status_code == 200
    assert probe.json() == {"status": "ok"}
