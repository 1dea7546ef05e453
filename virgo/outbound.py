"""Outbound destinations: where Virgo may send a request a persona (or a card) chose.

A URL a persona gives (a webhook, a publication target, later an A2A card to fetch) must not
reach what only the server can reach: its own loopback, the private networks it sits in, the
cloud's metadata service. `destination(url, what=...)` resolves the URL's host, checks every
address it resolves to and returns the URL pinned to a checked address; `request(...)` sends
to exactly that address, keeping the Host header and the TLS server name of the URL, so a name
that resolves elsewhere a moment later (DNS rebinding) changes nothing.

Refused, always: unspecified, multicast and cloud metadata addresses and names. Refused unless
`VIRGO_OUTBOUND_ALLOWED_NETWORKS` lists a network holding the address (development, tests, an
operator's own CI host): loopback, private (RFC 1918, ULA), link-local, shared (CGNAT) and every
other address that is not globally reachable. An IPv4 address written in IPv6 form (mapped,
compatible, translated, 6to4, the well-known NAT64 prefix) is judged as the IPv4 address it
carries. Where the IPv4 address cannot be told for certain (the local-use NAT64 prefix, whose
layout only the local translator knows; a Teredo tunnel) the address is refused unless the
setting lists the IPv6 network itself, and a metadata address it may carry is refused always.

Names resolve through the servers `VIRGO_DNS_NAMESERVERS` names when it is set (virgo.resolvers),
through the system's resolver otherwise. A certificate is checked against the bundle
`VIRGO_OUTBOUND_CA_BUNDLE` names, or httpx's own (`tls_verify`); `fetch` reads a bounded body.

A URL whose host is no address and no name (`0177.0.0.1`: a leading zero, read as octal by
some resolvers and refused by httpx) is refused as not a URL, naming why.
"""

import ipaddress
import socket
import ssl
import time
from dataclasses import dataclass
from typing import Any

import httpx
from django.conf import settings

from virgo import resolvers

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

SETTING = "VIRGO_OUTBOUND_ALLOWED_NETWORKS"
CA_BUNDLE_SETTING = "VIRGO_OUTBOUND_CA_BUNDLE"
# How long a name may take to resolve through VIRGO_DNS_NAMESERVERS, both address families.
RESOLVE_SECONDS = 5.0

# Instance metadata services (AWS, Azure, GCP, OCI, DigitalOcean: 169.254.169.254; AWS IPv6,
# its DNS and its ECS task endpoint; Alibaba) and the names they answer to.
METADATA_ADDRESSES: frozenset[Address] = frozenset(
    ipaddress.ip_address(address)
    for address in (
        "169.254.169.254",
        "169.254.169.253",
        "169.254.170.2",
        "100.100.100.200",
        "192.0.0.192",
        "fd00:ec2::254",
        "fd00:ec2::253",
    )
)
METADATA_NAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.tencentyun.com",
    }
)
_SHARED = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
# RFC 8215: a network's own NAT64 prefix, carved out of this /48 in any of RFC 6052's layouts.
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_NAT64_LOCAL_LAYOUTS = (48, 56, 64, 96)
_TEREDO = ipaddress.ip_network("2001::/32")


class DestinationRefused(ValueError):
    """The URL leads somewhere Virgo does not send to; the message names the argument."""


class Unresolvable(DestinationRefused):
    """The URL's host resolves to no address right now."""


@dataclass(frozen=True, slots=True)
class Destination:
    """A URL and the checked address a request to it is sent to."""

    url: str
    host: str
    address: str
    addresses: tuple[str, ...]

    @property
    def pinned(self) -> httpx.URL:
        """The URL with its host replaced by the checked address."""
        return httpx.URL(self.url).copy_with(host=self.address)

    @property
    def host_header(self) -> str:
        return httpx.URL(self.url).netloc.decode("ascii")

    @property
    def extensions(self) -> dict[str, Any]:
        """What keeps TLS about the URL's host while the connection goes to the address."""
        return {"sni_hostname": self.host} if httpx.URL(self.url).scheme == "https" else {}


def _embedded_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address certainly stands for, if it stands for one."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if (
        address in _NAT64
        or address in _IPV4_TRANSLATED
        or (address in _IPV4_COMPATIBLE and int(address) > 1)
    ):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _rfc6052_ipv4(address: ipaddress.IPv6Address, prefix_length: int) -> ipaddress.IPv4Address:
    """The IPv4 address in a NAT64 address of a /prefix_length prefix (RFC 6052 section 2.2):
    the 32 bits after the prefix, skipping bits 64-71 (the u octet)."""
    if prefix_length == 96:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    bits = f"{int(address):0128b}"
    bits = bits[:64] + bits[72:]
    return ipaddress.IPv4Address(int(bits[prefix_length : prefix_length + 32], 2))


def _possible_ipv4(address: Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address may stand for where which one is not certain."""
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    if address in _NAT64_LOCAL:
        return [_rfc6052_ipv4(address, length) for length in _NAT64_LOCAL_LAYOUTS]
    if address.teredo is not None:
        return [address.teredo[1]]
    return []


def _allowed_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [
        ipaddress.ip_network(network, strict=False) for network in getattr(settings, SETTING, ())
    ]


NEVER = ", never allowed"


def address_problem(address: Address) -> str | None:
    """Why Virgo does not send to this address, or None when it may. A problem no setting
    lifts ends with NEVER."""
    embedded = _embedded_ipv4(address)
    if embedded is not None:
        problem = address_problem(embedded)
        if problem is None:
            return None
        what, never, _ = problem.partition(NEVER)
        return f"{what} in IPv6 form{never}"
    if address in METADATA_ADDRESSES or any(
        carried in METADATA_ADDRESSES for carried in _possible_ipv4(address)
    ):
        form = "" if address in METADATA_ADDRESSES else " in IPv6 form"
        return f"a cloud metadata address{form}{NEVER}"
    if address.is_unspecified:
        return f"the unspecified address{NEVER}"
    if address.is_multicast:
        return f"a multicast address{NEVER}"
    if any(address in network for network in _allowed_networks()):
        return None
    if address in _NAT64_LOCAL:
        return "a local-use NAT64 address, whose IPv4 address only the local translator knows"
    if address in _TEREDO:
        return "a Teredo tunnel address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if isinstance(address, ipaddress.IPv4Address) and address in _SHARED:
        return "a shared (CGNAT) address"
    if address.is_reserved:
        return "a reserved address"
    if address.is_private:
        return "a private address"
    if not address.is_global:
        return "a reserved address"
    return None


def _refusal(what: str, host: str, address: str, problem: str) -> DestinationRefused:
    shown = host if host == address else f"{host} (resolves to {address})"
    hint = "" if problem.endswith(NEVER) else f"; {SETTING} can allow its network"
    return DestinationRefused(f"{what}: {shown} is {problem}{hint}")


def destination(url: str, *, what: str, operator_chosen: bool = False) -> Destination:
    """The URL's destination, every address of its host checked.

    Raises DestinationRefused naming `what` (the argument) when the URL has no http(s) host or
    a port out of range, names a metadata service, or any address it resolves to is refused;
    Unresolvable when it resolves to none. A destination the operator chose (a federation peer
    they named) may be on a network VIRGO_OUTBOUND_ALLOWED_NETWORKS does not list, never on an
    address refused always.
    """
    try:
        parts = httpx.URL(url)
        host = parts.raw_host.decode("ascii").rstrip(".").lower()
    except httpx.InvalidURL as invalid:
        raise DestinationRefused(f"{what}: {url!r} is not a URL ({invalid})") from None
    except (UnicodeError, TypeError):
        raise DestinationRefused(f"{what}: {url!r} is not a URL") from None
    if parts.scheme not in ("http", "https") or not host:
        raise DestinationRefused(f"{what}: only http(s) URLs with a host are sent to")
    if parts.port is not None and not 0 < parts.port < 65536:
        # httpx parses any number as a port; connecting to it fails in the socket layer, for the
        # async client as an OverflowError inside anyio's ExceptionGroup, which no caller expects.
        raise DestinationRefused(f"{what}: port {parts.port} is not a TCP port (1 to 65535)")
    if host in METADATA_NAMES:
        raise DestinationRefused(f"{what}: {host} is a cloud metadata service, never allowed")
    addresses = _resolve(host, what=what)
    if not addresses:
        raise Unresolvable(f"{what}: {host} does not resolve to any address")
    for text in addresses:
        problem = address_problem(ipaddress.ip_address(text))
        if problem and (problem.endswith(NEVER) or not operator_chosen):
            raise _refusal(what, host, text, problem)
    return Destination(url=url, host=host, address=addresses[0], addresses=tuple(addresses))


def _resolve(host: str, *, what: str) -> list[str]:
    """Every address of `host`, in the resolver's order, without repeats.

    An address written as a number (in any spelling the C library reads) is itself; a name is
    asked of the servers VIRGO_DNS_NAMESERVERS names, or else of the system's resolver. No port
    is asked with it: it would only be copied into each answer, where nothing reads it.
    """
    try:
        numeric = socket.getaddrinfo(
            host, None, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST
        )
    except (socket.gaierror, UnicodeError):
        numeric = []
    try:
        if numeric:
            found: list[str] = [str(sockaddr[0]) for *_, sockaddr in numeric]
        elif resolvers.configured():
            found = resolvers.addresses(host, lifetime=RESOLVE_SECONDS)
        else:
            found = [
                str(sockaddr[0])
                for *_, sockaddr in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
            ]
    except (socket.gaierror, UnicodeError):
        raise Unresolvable(f"{what}: {host} does not resolve to any address") from None
    except resolvers.LookupFailed as failed:
        raise Unresolvable(f"{what}: {host} could not be resolved ({failed})") from None
    addresses: list[str] = []
    for text in (address.split("%", 1)[0] for address in found):
        if text not in addresses:
            addresses.append(text)
    return addresses


def tls_verify() -> ssl.SSLContext | bool:
    """How a server's certificate is checked: against the PEM bundle VIRGO_OUTBOUND_CA_BUNDLE
    names, or else httpx's own (certifi's copy of Mozilla's trusted authorities)."""
    bundle = getattr(settings, CA_BUNDLE_SETTING, "")
    return ssl.create_default_context(cafile=bundle) if bundle else True


class TooLarge(ValueError):
    """The answer was longer than the caller reads; the message names the argument."""


@dataclass(frozen=True, slots=True)
class Fetched:
    status: int
    headers: httpx.Headers
    body: bytes


def fetch(
    url: str,
    *,
    what: str,
    timeout: float,
    limit: int,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    content: bytes | None = None,
    operator_chosen: bool = False,
) -> Fetched:
    """Send `method` (GET unless told) to `url`'s checked address, never following a redirect,
    reading at most `limit` bytes of the body as sent (no content decoding) within `timeout`
    seconds in all.

    Raises DestinationRefused like `destination` (`operator_chosen` as there), TooLarge past the
    limit, httpx.TimeoutException past the time, and httpx's errors for what happens on the wire.
    """
    target = destination(url, what=what, operator_chosen=operator_chosen)
    deadline = time.monotonic() + timeout
    with (
        httpx.Client(timeout=timeout, follow_redirects=False, verify=tls_verify()) as client,
        client.stream(
            method,
            target.pinned,
            headers={
                **(headers or {}),
                "Host": target.host_header,
                "Accept-Encoding": "identity",
            },
            content=content,
            extensions=target.extensions,
        ) as response,
    ):
        body = bytearray()
        for chunk in response.iter_raw():
            body += chunk
            if len(body) > limit:
                raise TooLarge(f"{what}: the answer is longer than {limit} bytes")
            if time.monotonic() > deadline:
                raise httpx.ReadTimeout(f"{what}: no whole answer within {timeout:g} s")
        return Fetched(status=response.status_code, headers=response.headers, body=bytes(body))


def request(
    method: str,
    url: str,
    *,
    what: str,
    timeout: float,
    headers: dict[str, str] | None = None,
    **kwargs: Any,
) -> httpx.Response:
    """Send one request to the checked address of `url`, never following a redirect.

    Raises DestinationRefused (before anything is sent) like `destination`, and httpx's errors
    for what happens on the wire.
    """
    target = destination(url, what=what)
    with httpx.Client(timeout=timeout, follow_redirects=False, verify=tls_verify()) as client:
        return client.request(
            method,
            target.pinned,
            headers={**(headers or {}), "Host": target.host_header},
            extensions=target.extensions,
            **kwargs,
        )
