"""Deployment and start checks of card signing (VX-SCALE-2, VX-SCALE-4).

    virgo.E030  this process cannot sign cards (a key of the signing set it cannot open)

`check --deploy` (the release step, every machine's) fails when the keys that sign every card
cannot be opened with this process's key-encryption keys: a KEK missing or wrong on this
machine, or a key still only in a file another machine has. /readyz asks the same question
(settings.VIRGO_SIGNING_READINESS). A database that cannot be read is not this check's to say.

virgo-web before it binds and a Celery worker before it takes a task ask it too, and do not
start when the answer is no (one line, the fix, status 2): a web process would answer every card
it must publish with 503, and a worker would take publication tasks it cannot finish, while the
machines that can sign are the ones that should.
"""

from typing import Any

from django.core.checks import CheckMessage, Error, register
from django.db import DatabaseError

from cards import keys
from virgo.startup import exit_misconfigured


@register("virgo", deploy=True)
def check_signing(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    if app_configs is not None and not any(config.name == "cards" for config in app_configs):
        return []
    try:
        keys.check_can_sign()
    except DatabaseError:
        # Not migrated yet, or unreachable: the database's own checks and /readyz say so.
        return []
    except keys.CannotSign as refused:
        return [
            Error(
                f"this process cannot sign cards: {refused}",
                hint="Give every machine the same VIRGO_KEY_ENCRYPTION_KEY (all the keys the "
                "signing keys are sealed under); `virgo keys rewrap` seals them under the first.",
                id="virgo.E030",
            )
        ]
    return []


def _refuse_to_start_without_signing(program: str) -> None:
    try:
        keys.check_can_sign()
    except DatabaseError:
        return
    except keys.CannotSign as refused:
        exit_misconfigured(
            program,
            f"this process cannot sign cards: {refused}; give it the installation's "
            "VIRGO_KEY_ENCRYPTION_KEY (every key the signing keys are sealed under)",
        )


def check_web_start(**kwargs: Any) -> None:
    """virgo.startup.web_starting: no web process that cannot sign the cards it serves."""
    _refuse_to_start_without_signing("virgo-web")


def check_worker_start(**kwargs: Any) -> None:
    """Celery `worker_init`: no worker that would take publication work it cannot finish."""
    _refuse_to_start_without_signing("virgo worker")
