"""The public base URL in one spelling (VX-SCALE-4).

Cards, their signatures and every document Virgo publishes name VIRGO_PUBLIC_BASE_URL, and each
process compares its own with the installation's (cards.base_url). Spellings of the same place
(`HTTPS://Virgo.Example.org:443/`) must therefore be one string, or two machines configured
"alike" would render different bytes and take each other for misconfigured; what is not a base
URL at all is refused where the setting is read.
"""

from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}


def normalise_base_url(text: str) -> str:
    """`text` as Virgo renders and compares it: scheme and host in lower case, no default port,
    no trailing slash, the path as written. ValueError saying what is wrong when it is not an
    http(s) URL of a host with at most a path."""
    origin = origin_of(text)
    parts = urlsplit(text.strip())
    if "@" in parts.netloc:
        raise ValueError("it holds a user name or password")
    if parts.query or parts.fragment:
        raise ValueError("it has a query or a fragment")
    return f"{origin}{parts.path.rstrip('/')}"


def origin_of(url: str) -> str:
    """`url`'s origin in one spelling (RFC 6454): scheme and host in lower case, no default
    port; any user name, path, query or fragment left out. Two URLs are on one origin exactly
    when theirs are equal, however each was written. ValueError saying what is wrong when it is
    not an http(s) URL of a host."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise ValueError("it does not start with https:// or http://")
    if not parts.hostname:
        raise ValueError("it names no host")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        raise ValueError("its port is not a TCP port (1 to 65535)")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    netloc = host if port in (None, DEFAULT_PORTS[scheme]) else f"{host}:{port}"
    return f"{scheme}://{netloc}"
