import os

from celery import Celery

from virgo.startup import load_settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "virgo.settings")

app = Celery("virgo")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_configure.connect(weak=False)
def _settings_first(sender: Celery, **kwargs: object) -> None:
    """A worker or beat reads Django's settings when its command line is parsed: a setting they
    refuse ends it there in one line, status 2, not in the traceback of an option (VX-OPS-2).
    In a process that has its settings already (web, tests) this does nothing."""
    load_settings("celery")
