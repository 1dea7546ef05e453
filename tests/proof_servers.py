"""Real servers on loopback for the organization proofs (VX-ID-2): a DNS server answering from
a dict the test edits, and an HTTPS server whose certificate a test authority (trustme) signed.

`proof_world` points Virgo at both: VIRGO_DNS_NAMESERVERS names the DNS server (so the proof's
TXT lookup and the outbound guard's address lookup both ask it), VIRGO_OUTBOUND_CA_BUNDLE the
test authority, VIRGO_OUTBOUND_ALLOWED_NETWORKS loopback, and the well-known file is fetched
from the HTTPS server's port.
"""

import socket
import socketserver
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import trustme
from dnslib import QTYPE, RCODE, RR, TXT, A, DNSRecord
from dnslib.server import DNSLogger, DNSServer

from personas import proofs

# The names the test certificate is good for; any other name fails TLS verification.
CERTIFIED = ["acme.example", "rival.example", "*.proof.example"]

# A record's value: an A record's address; a TXT record's text, its raw bytes (DNS does not say
# they are UTF-8), or its strings (a long TXT record is split into strings of up to 255 bytes).
type RecordValue = str | bytes | list[bytes]


@dataclass
class Zone:
    """What the DNS server answers: records by (name, type), e.g. ("acme.example", "A")."""

    records: dict[tuple[str, str], list[RecordValue]] = field(default_factory=dict)

    def add(self, name: str, rdtype: str, value: RecordValue) -> None:
        self.records.setdefault((name.lower(), rdtype), []).append(value)

    def drop(self, name: str, rdtype: str) -> None:
        self.records.pop((name.lower(), rdtype), None)

    def resolve(self, request: DNSRecord, handler: Any) -> DNSRecord:
        reply = request.reply()
        name = str(request.q.qname).rstrip(".").lower()
        rdtype = QTYPE[request.q.qtype]
        if not any(known == name for known, _ in self.records):
            reply.header.rcode = RCODE.NXDOMAIN
            return reply
        for value in self.records.get((name, rdtype), []):
            rdata = A(value) if rdtype == "A" else TXT(value)
            reply.add_answer(RR(request.q.qname, QTYPE.reverse[rdtype], rdata=rdata, ttl=1))
        return reply


@dataclass
class Site:
    """What the HTTPS server answers: (status, body) by (host, path); 404 otherwise. None: it
    closes the connection without answering."""

    pages: dict[tuple[str, str], tuple[int, bytes] | None] = field(default_factory=dict)

    def put(self, host: str, path: str, body: bytes, status: int = 200) -> None:
        self.pages[(host, path)] = (status, body)

    def hang_up(self, host: str, path: str) -> None:
        self.pages[(host, path)] = None


def _handler(site: Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            host = self.headers.get("Host", "").split(":", 1)[0]
            page = site.pages.get((host, self.path), (404, b"not here\n"))
            if page is None:
                self.close_connection = True
                return
            status, body = page
            self.send_response(status)
            if 300 <= status < 400:
                self.send_header("Location", f"https://elsewhere.proof.example{self.path}")
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


@dataclass
class ProofWorld:
    zone: Zone
    site: Site
    dns_port: int
    https_port: int
    ca_bundle: Path

    def point_at(self, domain: str) -> None:
        """`domain` resolves to 127.0.0.1, where the HTTPS server is."""
        self.zone.drop(domain, "A")
        self.zone.add(domain, "A", "127.0.0.1")

    def publish_txt(self, domain: str, value: str | bytes | list[bytes]) -> None:
        self.zone.add(proofs.txt_name(domain), "TXT", value)

    def publish_file(self, domain: str, body: bytes, status: int = 200) -> None:
        self.site.put(domain, proofs.WELL_KNOWN_PATH, body, status)

    def hang_up_on_the_file(self, domain: str) -> None:
        """Asked for `domain`'s file, the server closes the connection without an answer."""
        self.site.hang_up(domain, proofs.WELL_KNOWN_PATH)


@pytest.fixture(scope="module")
def proof_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProofWorld]:
    authority = trustme.CA()
    bundle = tmp_path_factory.mktemp("proof-ca") / "ca.pem"
    authority.cert_pem.write_to_path(str(bundle))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert(*CERTIFIED).configure_cert(context)

    zone, site = Zone(), Site()
    dns = DNSServer(zone, address="127.0.0.1", port=0, logger=DNSLogger(logf=lambda _: None))
    dns.start_thread()
    https = ThreadingHTTPServer(("127.0.0.1", 0), _handler(site))
    https.socket = context.wrap_socket(https.socket, server_side=True)
    thread = threading.Thread(target=https.serve_forever, daemon=True)
    thread.start()
    try:
        yield ProofWorld(
            zone=zone,
            site=site,
            dns_port=dns.server.server_address[1],
            https_port=https.server_address[1],
            ca_bundle=bundle,
        )
    finally:
        https.shutdown()
        https.server_close()
        dns.stop()
        dns.server.server_close()


@pytest.fixture
def proof_world(
    proof_servers: ProofWorld, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ProofWorld]:
    """The servers, empty, with Virgo pointed at them and loopback allowed outbound."""
    settings.VIRGO_DNS_NAMESERVERS = [f"127.0.0.1:{proof_servers.dns_port}"]
    settings.VIRGO_OUTBOUND_CA_BUNDLE = str(proof_servers.ca_bundle)
    settings.VIRGO_OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    monkeypatch.setattr(proofs, "WELL_KNOWN_PORT", proof_servers.https_port)
    proof_servers.zone.records.clear()
    proof_servers.site.pages.clear()
    yield proof_servers
    proof_servers.zone.records.clear()
    proof_servers.site.pages.clear()


class _PlainHttp(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        try:
            self.request.recv(4096)
            self.request.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            # Close only once the client has read the answer and left, so that it reads the
            # answer rather than a reset.
            self.request.shutdown(socket.SHUT_WR)
            while self.request.recv(4096):
                pass
        except OSError:
            pass


@contextmanager
def plain_http_server() -> Iterator[int]:
    """A port on 127.0.0.1 where a server answers in plain HTTP, as on a site's port 443 that
    does not speak TLS: it reads what it is sent (a TLS hello) and says 400 in clear text."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _PlainHttp)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def closed_port() -> int:
    """A loopback port nothing listens on (it was bound a moment ago, then released)."""
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port: int = probe.getsockname()[1]
    return port
