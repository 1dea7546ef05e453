"""What the runtime needs from its transport (virgo-channel), declared here, provided there.

The runtime reaches the hub only through this interface. The app that carries its messages
registers its provider when Django starts (channel.apps.ChannelConfig.ready), so no runtime module
imports that app and the app builds on the runtime instead. With none registered the runtime
still starts to say so: `runtime.E001` at every start, and `NoTransport` from the first call that
needs one, never a confirmation that silently reaches nobody.
"""

from typing import Protocol

from django.core.exceptions import ImproperlyConfigured

from runtime.models import DecisionRecord


class Transport(Protocol):
    def confirmation_requested(self, record: DecisionRecord) -> None:
        """A pending confirmation request was written: bring it to its routed authority once
        the transaction that wrote it commits (never before: nothing may see it uncommitted)."""


class NoTransport(ImproperlyConfigured):
    """No app registered the runtime's transport: a confirmation could reach nobody."""

    def __init__(self) -> None:
        super().__init__(
            "no transport is registered for the runtime: install the app that provides one "
            "(virgo-channel, `channel` in INSTALLED_APPS), which registers it when Django starts"
        )


_registered: Transport | None = None


def register(provider: Transport | None) -> Transport | None:
    """Make `provider` the runtime's transport, one per process; returns the one it replaces.

    None leaves the runtime with no transport (a test puts the previous one back this way too).
    """
    global _registered
    previous, _registered = _registered, provider
    return previous


def registered() -> Transport | None:
    """The registered transport, or None: for the start-up check, which must not raise."""
    return _registered


def transport() -> Transport:
    """The registered transport. Raises NoTransport when no app registered one."""
    if _registered is None:
        raise NoTransport
    return _registered
