"""Queueing a Celery task once the change that owes it commits, without ever failing the change.

The queue is only the fast path: what the task would do is recorded as owed in the committed
rows themselves, and the reconciler pays it. So a broker that is down when the change commits
costs a warning and a delay, never the change, and never a 500; and while this process has just
found it down (virgo.outages) the task is not even tried, so a frozen broker holds no request up
for its timeout.

A task is named by the name it is registered under (the broker's contract), or given itself:
the records queue work by name, so they never import the app that does it.
"""

import logging
from typing import Any

from celery import Task
from django.db import transaction
from kombu.exceptions import OperationalError as BrokerUnavailable

from virgo.celery import app
from virgo.outages import BROKER

logger = logging.getLogger(__name__)


def queue_after_commit(task: Task | str, *args: Any) -> None:
    """Queue `task` (a task, or the name it is registered under) once the transaction commits."""

    def send() -> None:
        if not BROKER.should_try("task"):
            return
        queued = app.tasks[task] if isinstance(task, str) else task
        try:
            queued.delay(*args)
        except BrokerUnavailable as exc:
            BROKER.failed("task", exc)
            logger.warning(
                "could not queue %s%r (%s); the reconciler will do it", queued.name, args, exc
            )
        else:
            BROKER.succeeded()

    transaction.on_commit(send)
