"""Deployment and start checks of card signing (VX-SCALE-2, VX-SCALE-4).

    virgo.E030  this process cannot sign cards (a key of the signing set it cannot open)
    virgo.E031  this process's public base URL is not the installation's (cards.base_url)

`check --deploy` (the release step, every machine's) fails when the keys that sign every card
cannot be opened with this process's key-encryption keys: a KEK missing or wrong on this
machine, or a key still only in a file another machine has. /readyz asks the same question
(settings.VIRGO_SIGNING_READINESS). A database that cannot be read is not this check's to say.

virgo-web before it binds and a Celery worker before it takes a task ask it too, and do not
start when the answer is no (one line, the fix, status 2): a web process would answer every card
it must publish with 503, and a worker would take publication tasks it cannot finish, while the
machines that can sign are the ones that should.

A process configured with another public base URL than the installation's fails `check
--deploy` (E031) and /readyz (settings.VIRGO_BASE_URL_READINESS) too, and a worker does not
start: it would take publication tasks only to decline them. virgo-web does start, says so in
its log, and answers /readyz 503, so a load balancer keeps it out; it still serves each card as
the installation published it, and signs nothing.
"""

import logging
from typing import Any

from django.core.checks import CheckMessage, Error, register
from django.db import DatabaseError

from cards import base_url, keys
from virgo.startup import exit_misconfigured

logger = logging.getLogger(__name__)


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


@register("virgo", deploy=True)
def check_base_url(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    if app_configs is not None and not any(config.name == "cards" for config in app_configs):
        return []
    refused = _base_url_refusal()
    return [] if refused is None else [Error(str(refused), hint=refused.fix, id="virgo.E031")]


def _base_url_refusal() -> base_url.BaseUrlMismatch | None:
    """Why this process's public base URL is not the installation's; None when it is, or when
    the database cannot say (its own checks and /readyz report that)."""
    try:
        base_url.check_base_url()
    except DatabaseError:
        return None
    except base_url.BaseUrlMismatch as refused:
        return refused
    return None


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
    """virgo.startup.web_starting: no web process that cannot sign the cards it serves; one
    configured with another public base URL starts unready, and says why."""
    _refuse_to_start_without_signing("virgo-web")
    refused = _base_url_refusal()
    if refused is not None:
        logger.error(
            "virgo.E031: %s: /readyz answers 503 and nothing is signed here. %s",
            refused,
            refused.fix,
        )


def check_worker_start(**kwargs: Any) -> None:
    """Celery `worker_init`: no worker that would take publication work it cannot finish, or
    must decline."""
    _refuse_to_start_without_signing("virgo worker")
    refused = _base_url_refusal()
    if refused is not None:
        exit_misconfigured("virgo worker", f"{refused}; {refused.fix}")
