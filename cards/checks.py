"""Deployment check of card signing (VX-SCALE-2).

    virgo.E030  this process cannot sign cards (a key of the signing set it cannot open)

`check --deploy` (the release step, every machine's) fails when the keys that sign every card
cannot be opened with this process's key-encryption keys: a KEK missing or wrong on this
machine, or a key still only in a file another machine has. /readyz asks the same question
(settings.VIRGO_SIGNING_READINESS). A database that cannot be read is not this check's to say.
"""

from typing import Any

from django.core.checks import CheckMessage, Error, register
from django.db import DatabaseError

from cards import keys


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
