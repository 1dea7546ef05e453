"""The deployed shape on this machine: the environment of a deployment (production settings, every
secret set), manage.py run in it, and the release's static files collected once."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from tests.live import REPO
from virgo import kek


def production_env(**extra: str) -> dict[str, str]:
    """The environment of a deployment: no local-mode switches, every secret set."""
    local_switches = {"VIRGO_EMBEDDED", "DEBUG", "CELERY_TASK_ALWAYS_EAGER", "DATABASE_URL"}
    env = {key: value for key, value in os.environ.items() if key not in local_switches}
    env.update(
        DJANGO_SETTINGS_MODULE="virgo.settings",
        SECRET_KEY=secrets.token_urlsafe(50),
        VIRGO_KEY_ENCRYPTION_KEY=kek.generate(),
        ALLOWED_HOSTS="virgo.example.org",
        REDIS_URL="redis://127.0.0.1:6379/0",
    )
    env.update(extra)
    return env


def manage(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def static_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The release's static files, collected once as `make static` does (VIRGO_STATIC_ROOT)."""
    root = tmp_path_factory.mktemp("release") / "staticfiles"
    env = production_env(
        VIRGO_HOME=str(tmp_path_factory.mktemp("collecting")), VIRGO_STATIC_ROOT=str(root)
    )
    collected = manage("collectstatic", "--noinput", "-v", "0", env=env)
    assert collected.returncode == 0, collected.stderr
    assert (root / "staticfiles.json").is_file()
    return root
