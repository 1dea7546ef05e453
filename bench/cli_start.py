"""How long a `virgo` command takes to start (issue 43, VX-OPS-10), for bench.run: `virgo agent
list` on an embedded installation beside a stock Django project with only the admin and DRF,
set up and asked one question of its database the same way (its users' count), side by side.
The stock project's settings are `startproject`'s (middleware, templates) with DRF added.

Both run as fresh processes on SQLite files of their own, migrated first and not timed; the
rounds alternate, so a busy moment of the machine slows both. The figure is the ratio of the
medians (goal <= 1.5).
"""

import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import report

ROUNDS = 7
ROOT = Path(__file__).resolve().parent.parent
VIRGO = Path(sys.executable).with_name("virgo")

STOCK_SETTINGS = """
SECRET_KEY = "bench-only"
DEBUG = False
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS = [
    "django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
    "django.contrib.sessions", "django.contrib.messages", "django.contrib.staticfiles",
    "rest_framework",
]
MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": [
        "django.template.context_processors.request",
        "django.contrib.auth.context_processors.auth",
        "django.contrib.messages.context_processors.messages",
    ]},
}]
STATIC_URL = "static/"
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": DATABASE}}
ROOT_URLCONF = "stock_settings"
urlpatterns = []
USE_TZ = True
"""
STOCK_QUESTION = (
    "import django; django.setup(); "
    "from django.contrib.auth.models import User; print(User.objects.count())"
)


def _seconds(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, check=True, capture_output=True, timeout=300)
    return time.perf_counter() - started


def measure() -> tuple[dict[str, float], str]:
    work = Path(tempfile.mkdtemp(prefix="virgo-bench-cli-"))
    base = {key: value for key, value in os.environ.items() if not key.startswith("VIRGO_")}
    base = {k: v for k, v in base.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    virgo_env = {
        **base,
        "VIRGO_EMBEDDED": "1",
        "VIRGO_HOME": str(work / "virgo-home"),
        "DATABASE_URL": f"sqlite:///{work / 'virgo.sqlite3'}",
        "SECRET_KEY": secrets.token_urlsafe(40),
        "LOG_LEVEL": "WARNING",
        "DJANGO_SETTINGS_MODULE": "virgo.settings",
    }
    stock = work / "stock"
    stock.mkdir()
    (stock / "stock_settings.py").write_text(
        f"DATABASE = {str(work / 'stock.sqlite3')!r}\n{STOCK_SETTINGS}"
    )
    stock_env = {**base, "DJANGO_SETTINGS_MODULE": "stock_settings", "PYTHONPATH": str(stock)}
    python = sys.executable
    subprocess.run(
        [python, str(ROOT / "manage.py"), "migrate", "--noinput", "-v", "0"],
        env=virgo_env, cwd=ROOT, check=True, timeout=600,
    )  # fmt: skip
    subprocess.run(
        [python, "-m", "django", "migrate", "--noinput", "-v", "0"],
        env=stock_env, cwd=stock, check=True, timeout=600,
    )  # fmt: skip
    virgo_runs, stock_runs = [], []
    for _ in range(ROUNDS):
        virgo_runs.append(_seconds([str(VIRGO), "agent", "list"], virgo_env, work))
        stock_runs.append(_seconds([python, "-c", STOCK_QUESTION], stock_env, stock))
    virgo_s, stock_s = statistics.median(virgo_runs), statistics.median(stock_runs)
    figures = {
        "cli_start_virgo_ms": round(virgo_s * 1000),
        "cli_start_stock_django_ms": round(stock_s * 1000),
        "cli_start_vs_stock_django": report.ratio(virgo_s, stock_s),
    }
    body = (
        f"`virgo agent list` (an embedded installation, SQLite) beside a stock Django project "
        f"with only the admin and DRF set up and counting its users, {ROUNDS} rounds "
        "alternating, fresh processes, medians:\n\n"
        + report.table(
            ["command", "median ms"],
            [
                ["virgo agent list", figures["cli_start_virgo_ms"]],
                ["stock Django (admin, DRF)", figures["cli_start_stock_django_ms"]],
                ["ratio", report.format_value(figures["cli_start_vs_stock_django"])],
            ],
        )
    )
    return figures, body
