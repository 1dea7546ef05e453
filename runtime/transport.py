"""What the runtime needs from its transport (virgo-channel), declared here, provided there.

The runtime reaches the hub only through this interface: settings name the class that provides
it (VIRGO_RUNTIME_TRANSPORT, as Django's EMAIL_BACKEND names a mail backend), so no runtime
module imports the app that carries its messages, and that app builds on the runtime instead.
"""

import functools
from typing import Any, Protocol

from django.conf import settings
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

from runtime.models import DecisionRecord


class Transport(Protocol):
    def confirmation_requested(self, record: DecisionRecord) -> None:
        """A pending confirmation request was written: bring it to its routed authority once
        the transaction that wrote it commits (never before: nothing may see it uncommitted)."""


@functools.cache
def transport() -> Transport:
    """The configured transport, made once per process."""
    provider: type[Transport] = import_string(settings.VIRGO_RUNTIME_TRANSPORT)
    return provider()


def _setting_changed(setting: str, **kwargs: Any) -> None:
    if setting == "VIRGO_RUNTIME_TRANSPORT":
        transport.cache_clear()


setting_changed.connect(_setting_changed)
