"""The DNS resolvers Virgo asks about names it sends to or proves (VIRGO_DNS_NAMESERVERS).

Empty, the setting leaves names to the system: `socket.getaddrinfo` for the outbound guard's
addresses, dnspython reading /etc/resolv.conf for TXT records. Set (`127.0.0.1:5353`,
`[2001:db8::53]:53`, `9.9.9.9`), every lookup goes to those servers alone: an operator who wants
proofs and outbound requests to see one resolver's answers (a validating one, or the test
suite's own DNS server on loopback) names it here.
"""

import ipaddress
from typing import Any

import dns.exception
import dns.nameserver
import dns.resolver
from django.conf import settings

SETTING = "VIRGO_DNS_NAMESERVERS"
DNS_PORT = 53


class LookupFailed(Exception):
    """No answer could be had (timeout, no server answered): not the same as "no such name"."""


def parse_nameserver(text: str) -> tuple[str, int]:
    """`address`, `address:port` or `[ipv6]:port` as (address, port); ValueError saying why."""
    entry = text.strip()
    address, port_text = entry, str(DNS_PORT)
    if entry.startswith("["):
        address, bracket, rest = entry[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError(f"{text!r} is not [IPv6 address]:port")
        port_text = rest[1:] if rest else port_text
    elif entry.count(":") == 1:
        address, _, port_text = entry.partition(":")
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        raise ValueError(
            f"{text!r} is not an IP address (a DNS server is named by address)"
        ) from None
    port = int(port_text) if port_text.isdigit() else 0
    if not 0 < port < 65536:
        raise ValueError(f"{text!r} has no port between 1 and 65535")
    return str(parsed), port


def configured() -> list[tuple[str, int]]:
    return [parse_nameserver(entry) for entry in getattr(settings, SETTING, ())]


def resolver(lifetime: float) -> dns.resolver.Resolver:
    """A stub resolver asking the configured servers (the system's when none), giving up after
    `lifetime` seconds in all. LookupFailed when the system names no server."""
    servers = configured()
    try:
        made = dns.resolver.Resolver(configure=not servers)
    except dns.resolver.NoResolverConfiguration:
        raise LookupFailed("the system names no DNS server; set VIRGO_DNS_NAMESERVERS") from None
    if servers:
        made.nameservers = [dns.nameserver.Do53Nameserver(addr, port) for addr, port in servers]
    made.lifetime = lifetime
    made.timeout = lifetime
    return made


def answers(name: str, rdtype: str, *, lifetime: float) -> list[Any]:
    """The records of `rdtype` at `name` (an absolute name, never the search list): [] when the
    name or the type has none, LookupFailed when no answer could be had."""
    try:
        found = resolver(lifetime).resolve(name, rdtype, search=False)
    except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
        return []
    except dns.exception.Timeout:
        raise LookupFailed(f"no DNS answer within {lifetime:g} s") from None
    except dns.resolver.NoNameservers:
        raise LookupFailed("no DNS server gave an answer (SERVFAIL or refused)") from None
    except (dns.exception.DNSException, ValueError) as error:
        raise LookupFailed(f"the DNS lookup failed ({type(error).__name__})") from None
    return list(found)


def addresses(host: str, *, lifetime: float) -> list[str]:
    """The IPv4 and IPv6 addresses of `host` from the configured servers, A records first."""
    return [
        record.address
        for rdtype in ("A", "AAAA")
        for record in answers(host, rdtype, lifetime=lifetime)
    ]
