"""Celery tasks of the stamps app: thin shells over stamps.quarantine."""

from celery import shared_task

from stamps.quarantine import sweep


@shared_task(acks_late=True)
def verify_stamp_files() -> int:
    """Celery beat's verification sweep (VX-OPS-4): every standing stamp file checked against
    its stored stamp; a lost one rewritten, a broken one quarantined. Returns how many
    personas it quarantined."""
    return len(sweep().quarantined)
