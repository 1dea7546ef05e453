import os
import shutil
import sys
from pathlib import Path
from typing import Any

from celery import Celery, signals

from virgo.startup import load_settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "virgo.settings")


def count_metrics_per_worker(argv: list[str]) -> None:
    """A worker and its pool's processes count their metrics into a directory of their own.

    Here, on import: the Celery worker sets Django up (which imports prometheus-client) before
    any of its signals could do it. A worker's directory is named after its main process;
    those of workers no longer running go when the next one starts.
    """
    program = Path(argv[0]) if argv else Path()
    if "celery" not in (program.name, program.parent.name) or "worker" not in argv[1:]:
        return
    from django.conf import settings

    from virgo.home import count_metrics_in

    try:
        root = Path(settings.VIRGO_METRICS_DIR)
    except Exception:
        # A setting that is missing or wrong: the worker reports it itself, as it starts.
        return
    for directory in root.glob("worker-*"):
        if not _running(directory.name.removeprefix("worker-")):
            shutil.rmtree(directory, ignore_errors=True)
    count_metrics_in(root / f"worker-{os.getpid()}")


def _running(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


count_metrics_per_worker(sys.argv)

app = Celery("virgo")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@signals.task_postrun.connect
def count_task_outcome(sender: Any, state: str | None = None, **kwargs: Any) -> None:
    # Imported here: prometheus-client must not be imported before the worker's directory is set.
    from virgo import metrics

    metrics.CELERY_TASKS.labels(sender.name, (state or "unknown").lower()).inc()


@app.on_configure.connect(weak=False)
def _settings_first(sender: Celery, **kwargs: object) -> None:
    """A worker or beat reads Django's settings when its command line is parsed: a setting they
    refuse ends it there in one line, status 2, not in the traceback of an option (VX-OPS-2).
    In a process that has its settings already (web, tests) this does nothing."""
    load_settings("celery")


# Each task runs as `task` under its own id in the audit trail (VX-AUDIT-1); the context it
# interrupted (a request running it eagerly) is back when it ends.
_audit_contexts: dict[str, Any] = {}


@signals.task_prerun.connect
def _enter_audit_context(task_id: str | None = None, **kwargs: Any) -> None:
    from virgo import auditing

    if task_id is None:
        return
    context = auditing.entered(auditing.TASK, task_id)
    context.__enter__()
    _audit_contexts[task_id] = context


@signals.task_postrun.connect
def _leave_audit_context(task_id: str | None = None, **kwargs: Any) -> None:
    context = _audit_contexts.pop(task_id or "", None)
    if context is not None:
        context.__exit__(None, None, None)
