"""Celery tasks: thin shells taking ids. Sending a request again is harmless (Idempotency-Key)."""

from datetime import timedelta

from celery import shared_task
from django.conf import settings

from channel import routing


@shared_task(acks_late=True)
def deliver_confirmation(record_id: int) -> str | None:
    delivery = routing.deliver_confirmation(record_id)
    return delivery.status if delivery is not None else None


@shared_task(acks_late=True)
def redeliver_confirmations() -> int:
    """The periodic pass: requests whose card did not surely reach the hub are sent again."""
    grace = timedelta(seconds=settings.VIRGO_RECONCILE_GRACE_SECONDS)
    return routing.redeliver_pending(older_than=grace)
