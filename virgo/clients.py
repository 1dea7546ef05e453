"""Who is asking: the client's address, seen through the proxies this deployment trusts.

Every per-address limit (cards, tokens, hub callbacks: virgo.limits) counts by this address.
Behind a reverse proxy REMOTE_ADDR is the proxy, so every client would share one budget;
VIRGO_TRUSTED_PROXIES names the proxies (addresses or networks) whose X-Forwarded-For is
believed. The header is read from the right: each hop a trusted proxy appended is skipped, and
the first address no trusted proxy vouches for is the client. Anything to its left was written
by the client and is never believed; an entry that is not an address stops the walk at the
last trusted hop.
"""

import functools
import ipaddress
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.http import HttpRequest

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def client_address(meta: Mapping[str, Any]) -> str:
    """The client's address from a WSGI environ or request.META."""
    remote = str(meta.get("REMOTE_ADDR", ""))
    trusted = trusted_proxies()
    if not trusted or not _within(remote, trusted):
        return remote
    address = remote
    for hop in reversed(str(meta.get("HTTP_X_FORWARDED_FOR", "")).split(",")):
        hop = hop.strip()
        if not _is_address(hop):
            return address
        address = hop
        if not _within(hop, trusted):
            return hop
    return address


def client_ip(request: HttpRequest) -> str:
    """django-ratelimit's `ip` key (RATELIMIT_IP_META_KEY): the same address as client_address."""
    return client_address(request.META)


@functools.cache
def trusted_proxies() -> tuple[Network, ...]:
    return tuple(
        ipaddress.ip_network(entry, strict=False) for entry in settings.VIRGO_TRUSTED_PROXIES
    )


def _is_address(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _within(address: str, networks: tuple[Network, ...]) -> bool:
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(parsed in network for network in networks)


def _forget(setting: str, **kwargs: Any) -> None:
    if setting == "VIRGO_TRUSTED_PROXIES":
        trusted_proxies.cache_clear()


setting_changed.connect(_forget)
