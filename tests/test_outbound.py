"""Outbound destinations: no loopback, private, link-local or metadata address unless allowed."""

import contextlib
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from runtime.models import DecisionRecord, RefusalRecord, Webhook, WebhookDelivery
from tests.factories import DEPLOYER_VERBS, address, make_owner
from tests.proof_servers import ProofWorld
from tests.runtime_support import REPO, call, correlation, standing_persona
from tests.tools_support import HookServer, allow_loopback, confirmed, ok, refused
from virgo import outbound

pytestmark = pytest.mark.django_db

REFUSED_LITERALS = {
    "http://127.0.0.1/": "loopback",
    "http://127.8.9.10:8080/": "loopback",
    "http://[::1]/": "loopback",
    "http://10.0.0.7/": "private",
    "http://172.16.3.4/": "private",
    "http://192.168.1.20/": "private",
    "http://[fd12:3456::1]/": "private",
    "http://[fc00::1]/": "private",
    "http://169.254.10.1/": "link-local",
    "http://[fe80::1]/": "link-local",
    "http://100.64.0.9/": "is a shared (CGNAT) address;",
    "http://0.0.0.0/": "unspecified",
    "http://[::]/": "unspecified",
    "http://224.0.0.251/": "multicast",
    "http://[ff02::1]/": "multicast",
    "http://240.0.0.1/": "is a reserved address;",
    "http://[::ffff:127.0.0.1]/": "loopback address in IPv6 form",
    "http://[::ffff:10.1.2.3]/": "private address in IPv6 form",
    "http://[::ffff:169.254.169.254]/": "metadata",
    "http://169.254.169.254/latest/meta-data/": "metadata",
    "http://[fd00:ec2::254]/": "metadata",
    "http://100.100.100.200/": "metadata",
    # Spellings the resolver turns into 127.0.0.1: judged by the address, not the spelling.
    "http://2130706433/": "loopback",
    "http://0x7f.1/": "loopback",
    "http://0177.1/": "loopback",
    # A leading zero httpx will not read (octal to some resolvers): not a URL, saying why.
    "http://0177.0.0.1/": "'http://0177.0.0.1/' is not a URL (Invalid IPv4 address: '0177.0.0.1')",
    # IPv4 written as IPv6 is judged as the IPv4 address it carries: NAT64 (RFC 6052)...
    "http://[64:ff9b::7f00:1]/": "a loopback address in IPv6 form;",
    "http://[64:ff9b::a00:1]/": "a private address in IPv6 form;",
    "http://[64:ff9b::a9fe:a01]/": "a link-local address in IPv6 form;",
    "http://[64:ff9b::a9fe:a9fe]/": "a cloud metadata address in IPv6 form, never allowed",
    # ...6to4, IPv4-compatible and IPv4-translated (SIIT)...
    "http://[2002:7f00:1::]/": "a loopback address in IPv6 form;",
    "http://[2002:c0a8:1::1]/": "a private address in IPv6 form;",
    "http://[2002:a9fe:a9fe::]/": "a cloud metadata address in IPv6 form, never allowed",
    "http://[::127.0.0.1]/": "a loopback address in IPv6 form;",
    "http://[::7f00:1]/": "a loopback address in IPv6 form;",
    # The lowest IPv4-compatible address that carries one (::1 is IPv6's own loopback).
    "http://[::2]/": "is a private address in IPv6 form;",
    "http://[::a9fe:a9fe]/": "a cloud metadata address in IPv6 form, never allowed",
    "http://[::ffff:0:7f00:1]/": "a loopback address in IPv6 form;",
    "http://[::ffff:7f00:1]/": "a loopback address in IPv6 form;",
    # ...while a local-use NAT64 prefix (RFC 8215) or a Teredo tunnel carries an IPv4 address
    # only the network knows: refused unless allowed, whatever it seems to carry.
    "http://[64:ff9b:1::7f00:1]/": "a local-use NAT64 address",
    "http://[64:ff9b:1::808:808]/": "a local-use NAT64 address",
    "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/": "a Teredo tunnel address",
}
# Every spelling of 169.254.169.254 in IPv6: refused whatever the setting allows.
METADATA_IN_IPV6 = (
    "64:ff9b::a9fe:a9fe",  # NAT64, well-known prefix
    "64:ff9b:1::a9fe:a9fe",  # local-use NAT64, /96 layout
    "64:ff9b:1:a9fe:a9:fe00::",  # local-use NAT64, /48 layout
    "64:ff9b:1:0:a9:fea9:fe00:0",  # local-use NAT64, /64 layout
    "2002:a9fe:a9fe::1",  # 6to4
    "::a9fe:a9fe",  # IPv4-compatible
    "::ffff:a9fe:a9fe",  # IPv4-mapped
    "::ffff:0:a9fe:a9fe",  # IPv4-translated
    "2001:0:4136:e378:8000:63bf:5601:5601",  # Teredo, client 169.254.169.254
)


@pytest.fixture
def deployer():
    return standing_persona(
        make_owner(),
        extra=tuple(DEPLOYER_VERBS),
        queues=["deploys"],
        address=address("work/core/deployer"),
    )


@pytest.mark.parametrize(("url", "what"), REFUSED_LITERALS.items())
def test_an_address_that_is_not_public_is_refused_by_default(url: str, what: str) -> None:
    """VX-SEC-3: refused, naming the argument and what the address is."""
    with pytest.raises(outbound.DestinationRefused, match=rf"^url: .*{re.escape(what)}"):
        outbound.destination(url, what="url")


@pytest.mark.parametrize("port", [0, 65536, 99999])
def test_a_port_out_of_range_is_refused_before_anything_is_sent(port: int, settings) -> None:
    """VX-GRANT-4: httpx parses any number as a port, so such a URL was sent to: the async
    client (a card import) failed with an OverflowError inside anyio's ExceptionGroup, which no
    caller catches (a 500). Refused as the argument, before any connection, even where the
    address is allowed."""
    allow_loopback(settings)
    with pytest.raises(outbound.DestinationRefused, match=rf"^url: port {port} is not a TCP port"):
        outbound.request("GET", f"http://127.0.0.1:{port}/", what="url", timeout=1)


@pytest.mark.parametrize("port", [1, 65535])
def test_the_ends_of_the_port_range_are_ports(port: int) -> None:
    """VX-SEC-3: 1 and 65535 are TCP ports: the address alone decides."""
    assert outbound.destination(f"http://8.8.8.8:{port}/", what="url").address == "8.8.8.8"


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("ftp://8.8.8.8/", "url: only http(s) URLs with a host are sent to"),
        ("http:///no-host", "url: only http(s) URLs with a host are sent to"),
        (None, "url: None is not a URL"),
    ],
)
def test_what_is_not_an_http_url_with_a_host_is_refused_saying_so(url: Any, said: str) -> None:
    """VX-SEC-3, VX-GRANT-4: another scheme, no host, or a value that is no text at all, each
    refused in the argument's name."""
    with pytest.raises(outbound.DestinationRefused) as refused:
        outbound.destination(url, what="url")
    assert str(refused.value) == said


def test_a_name_that_does_not_resolve_says_so_and_which(settings, monkeypatch) -> None:
    """VX-SEC-3: a name no address answers for, through the system's resolver or the configured
    servers (here one that never answers), is refused naming the host and why."""
    with pytest.raises(outbound.Unresolvable) as system:
        outbound.destination("https://nothing.invalid/", what="url")
    assert str(system.value) == "url: nothing.invalid does not resolve to any address"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind(("127.0.0.1", 0))
        settings.VIRGO_DNS_NAMESERVERS = [f"127.0.0.1:{silent.getsockname()[1]}"]
        monkeypatch.setattr(outbound, "RESOLVE_SECONDS", 0.3)
        with pytest.raises(outbound.Unresolvable) as configured:
            outbound.destination("https://example.test/", what="url")
    assert str(configured.value) == (
        "url: example.test could not be resolved (no DNS answer within 0.3 s)"
    )


def test_a_name_is_judged_by_every_address_it_resolves_to() -> None:
    """VX-SEC-3: a host name is resolved; a metadata service's name is refused unresolved."""
    with pytest.raises(outbound.DestinationRefused, match=r"localhost \(resolves to 127\.0\.0\.1"):
        outbound.destination("http://localhost:8000/hook", what="url")
    for name in ("metadata.google.internal", "METADATA.GOOGLE.INTERNAL.", "instance-data"):
        with pytest.raises(outbound.DestinationRefused, match="metadata service, never"):
            outbound.destination(f"http://{name}/computeMetadata/v1/", what="url")
    with pytest.raises(outbound.Unresolvable):
        outbound.destination("https://nothing.invalid/", what="url")


def test_a_public_address_is_sent_to_pinned_with_its_host_and_tls_name_kept() -> None:
    """VX-SEC-3: the request goes to the checked address; Host and SNI stay the URL's."""
    public = outbound.destination("https://8.8.8.8:8443/hook?x=1", what="url")
    assert (public.address, str(public.pinned)) == ("8.8.8.8", "https://8.8.8.8:8443/hook?x=1")
    v6 = outbound.destination("https://[2606:4700:4700::1111]/", what="url")
    assert str(v6.pinned) == "https://[2606:4700:4700::1111]/"


def test_the_setting_allows_networks_but_never_metadata(settings) -> None:
    """VX-SEC-3: VIRGO_OUTBOUND_ALLOWED_NETWORKS lets a development or CI network through;
    metadata, unspecified and multicast addresses stay refused whatever it says."""
    settings.VIRGO_OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8", "10.20.0.0/16"]
    named = outbound.destination("http://localhost:8000/hook", what="url")
    assert (str(named.pinned), named.host_header) == (
        "http://127.0.0.1:8000/hook",
        "localhost:8000",
    )
    assert named.extensions == {}
    assert outbound.destination("https://10.20.3.4/", what="url").extensions == {
        "sni_hostname": "10.20.3.4"
    }
    with pytest.raises(outbound.DestinationRefused, match="private"):
        outbound.destination("http://10.21.0.1/", what="url")
    # Written with host bits, as an operator may copy an interface's address: its network.
    settings.VIRGO_OUTBOUND_ALLOWED_NETWORKS = ["10.20.3.4/16"]
    assert outbound.destination("http://10.20.9.9/", what="url").address == "10.20.9.9"
    settings.VIRGO_OUTBOUND_ALLOWED_NETWORKS = ["0.0.0.0/0", "::/0"]
    for url in ("http://169.254.169.254/", "http://0.0.0.0/", "http://224.0.0.1/"):
        with pytest.raises(outbound.DestinationRefused, match="never allowed"):
            outbound.destination(url, what="url")


def test_ipv4_in_ipv6_form_is_as_allowed_as_the_ipv4_address(settings) -> None:
    """VX-SEC-3: allowing 127.0.0.0/8 allows 127.0.0.1 in every IPv6 form that certainly carries
    it, and pins that IPv6 address; a form whose IPv4 address is uncertain (local-use NAT64,
    Teredo) needs its IPv6 network allowed; 10.0.0.1 in IPv6 form stays refused."""
    settings.VIRGO_OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    for form in ("64:ff9b::7f00:1", "2002:7f00:1::", "::127.0.0.1", "::ffff:0:7f00:1"):
        assert outbound.destination(f"http://[{form}]:8000/", what="url").address == form
    for form, problem in (
        ("64:ff9b::a00:1", "a private address in IPv6 form"),
        ("64:ff9b:1::7f00:1", "a local-use NAT64 address"),
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", "a Teredo tunnel address"),
    ):
        with pytest.raises(outbound.DestinationRefused, match=re.escape(problem)):
            outbound.destination(f"http://[{form}]/", what="url")
    settings.VIRGO_OUTBOUND_ALLOWED_NETWORKS = ["64:ff9b:1::/48", "2001::/32"]
    for form in ("64:ff9b:1::7f00:1", "2001:0:4136:e378:8000:63bf:80ff:fffe"):
        assert outbound.destination(f"http://[{form}]/", what="url").address == form


@pytest.mark.parametrize("form", METADATA_IN_IPV6)
def test_a_metadata_address_in_any_ipv6_form_is_never_allowed(form: str, settings) -> None:
    """VX-SEC-3: 169.254.169.254 written in IPv6 (each NAT64 layout, 6to4, compatible, mapped,
    translated, Teredo) is refused even with every network allowed."""
    settings.VIRGO_OUTBOUND_ALLOWED_NETWORKS = ["0.0.0.0/0", "::/0"]
    with pytest.raises(
        outbound.DestinationRefused, match=r"a cloud metadata address in IPv6 form, never allowed$"
    ):
        outbound.destination(f"http://[{form}]/latest/meta-data/", what="url")


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Names under .example answer what the test puts here; every other name resolves as usual."""
    answers: dict[str, list[str]] = {}
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, str) and host.endswith(".example"):
            if not answers.get(host):
                raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
            return [
                (
                    socket.AF_INET6 if ":" in address else socket.AF_INET,
                    socket.SOCK_STREAM,
                    6,
                    "",
                    (address, port, 0, 0) if ":" in address else (address, port),
                )
                for address in answers[host]
            ]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return answers


DNS_ANSWERS = {
    "64:ff9b::7f00:1": "a loopback address in IPv6 form",
    "64:ff9b::a9fe:a9fe": "a cloud metadata address in IPv6 form, never allowed",
    "64:ff9b:1::a00:1": "a local-use NAT64 address",
    "2002:a00:1::1": "a private address in IPv6 form",
    "::127.0.0.1": "a loopback address in IPv6 form",
    "::ffff:127.0.0.1": "a loopback address in IPv6 form",
    "::ffff:0:a00:1": "a private address in IPv6 form",
    "2001:0:4136:e378:8000:63bf:80ff:fffe": "a Teredo tunnel address",
    "127.0.0.1": "a loopback address",
}


@pytest.mark.parametrize(("answer", "problem"), DNS_ANSWERS.items())
def test_a_name_answering_an_internal_address_in_any_form_is_refused(
    answer: str, problem: str, dns: dict[str, list[str]]
) -> None:
    """VX-SEC-3: DNS answers are judged like literals, every one of them: a name whose second
    answer is loopback in NAT64 form (a public first one beside it) is refused, naming it."""
    dns["hook.example"] = ["93.184.215.14", "2606:4700:4700::1111", answer]
    with pytest.raises(
        outbound.DestinationRefused,
        match=rf"^url: hook\.example \(resolves to {re.escape(answer)}\) is {re.escape(problem)}",
    ):
        outbound.destination("https://hook.example/", what="url")
    dns["hook.example"] = ["93.184.215.14", "2606:4700:4700::1111"]
    assert outbound.destination("https://hook.example/", what="url").addresses == (
        "93.184.215.14",
        "2606:4700:4700::1111",
    )


def test_a_webhook_whose_name_answers_nat64_loopback_is_refused(deployer, dns) -> None:
    """VX-SEC-3: registering a webhook on a name that resolves to 127.0.0.1 in NAT64 form is
    refused before anyone is asked."""
    dns["ci.example"] = ["64:ff9b::7f00:1"]
    result = refused(
        call(deployer, "register_webhook", {"webhook": "ci", "url": "http://ci.example/hook"}),
        "invalid_arguments",
    )
    assert "ci.example (resolves to 64:ff9b::7f00:1) is a loopback address" in result["reason"]
    assert not DecisionRecord.objects.exists()


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/hook",
        "http://localhost:9/hook",
        "http://10.0.0.7/hook",
        "http://169.254.169.254/latest/",
        "http://metadata.google.internal/",
        "http://[::ffff:192.168.0.1]/",
        "http://[64:ff9b::7f00:1]/",
        "http://[2002:7f00:1::]/",
        "http://[::127.0.0.1]/",
        "http://0177.0.0.1/",
        "http://2130706433/",
        "http://0x7f.1/",
    ],
)
def test_a_webhook_to_such_an_address_is_refused_before_anyone_is_asked(deployer, url) -> None:
    """VX-SEC-3: refused with the argument named; no confirmation, no webhook."""
    result = refused(
        call(deployer, "register_webhook", {"webhook": "ci", "url": url}), "invalid_arguments"
    )
    assert result["reason"].startswith("url: ")
    assert not DecisionRecord.objects.exists()
    assert not Webhook.objects.exists()


def test_a_publication_to_such_an_address_is_refused(deployer) -> None:
    """VX-SEC-3: an artifact is not recorded as published to an internal address."""
    lead = standing_persona(persona_class="project-lead")
    run = ok(call(lead, "create_run", {"title": "docs", "kind": "build"}))["run"]["id"]
    arguments = {"run": run, "name": "site.tar", "publish_to": "http://192.168.0.10/docs/"}
    result = refused(call(lead, "record_artifact", arguments), "invalid_arguments")
    assert result["reason"].startswith("publish_to: 192.168.0.10 is a private address")
    assert not DecisionRecord.objects.exists()


def test_the_address_is_checked_again_when_the_trigger_connects(deployer, settings) -> None:
    """VX-SEC-3: a URL accepted once (here: while loopback was allowed) is checked when the
    trigger dials it; refused, nothing is sent and the refusal is recorded."""
    allow_loopback(settings)
    with HookServer() as hook:
        name_url = hook.url.replace("127.0.0.1", "localhost")
        ok(confirmed(deployer, "register_webhook", {"webhook": "ci", "url": name_url}))
        settings.VIRGO_OUTBOUND_ALLOWED_NETWORKS = []
        result = refused(
            confirmed(deployer, "trigger_webhook", {"webhook": "ci"}), "destination_refused"
        )
    assert "nothing was sent" in result["reason"] and "loopback" in result["reason"]
    assert hook.received == []
    assert not WebhookDelivery.objects.exists()
    assert RefusalRecord.objects.get(code="destination_refused").persona == deployer


def test_a_trigger_dials_the_checked_address_with_the_urls_host(deployer, settings) -> None:
    """VX-SEC-3: the POST goes to the address that was checked, and says which host it is for;
    the delivery records the URL it was sent to."""
    allow_loopback(settings)
    with HookServer() as hook:
        name_url = hook.url.replace("127.0.0.1", "localhost")
        ok(confirmed(deployer, "register_webhook", {"webhook": "ci", "url": name_url}))
        cid = correlation()
        call(deployer, "trigger_webhook", {"webhook": "ci"}, cid)
        from runtime import confirmations

        record = DecisionRecord.objects.get(correlation_id=cid)
        confirmations.decide(record=record, approve=True, user=deployer.agent.owner)
        assert ok(call(deployer, "trigger_webhook", {"webhook": "ci"}, cid))["outcome"] == (
            "delivered"
        )
    [request] = hook.received
    assert request["headers"]["Host"] == name_url.split("/")[2]
    assert WebhookDelivery.objects.get().url == name_url


def test_a_malformed_allowed_network_stops_the_settings_with_its_name() -> None:
    """VX-SEC-3: a setting that names no network is refused at start, naming itself."""
    env = {**os.environ, "VIRGO_EMBEDDED": "1", "VIRGO_OUTBOUND_ALLOWED_NETWORKS": "intranet"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    result = subprocess.run(
        [sys.executable, "-c", "import virgo.settings"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "VIRGO_OUTBOUND_ALLOWED_NETWORKS: 'intranet' is not an IP address" in result.stderr


# Redirects ---------------------------------------------------------------------------------------


class Server:
    """A real HTTP server on a loopback address: records every request (method, path, Host) and
    answers each with `status`, `headers` and `body`."""

    def __init__(
        self, host: str = "127.0.0.1", *, status: int = 200, headers=None, body: bytes = b""
    ) -> None:
        self.requests: list[tuple[str, str, str]] = []
        self.encodings_asked: list[str] = []
        self.bodies: list[bytes] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def answer(self) -> None:
                server.requests.append((self.command, self.path, self.headers.get("Host", "")))
                server.encodings_asked.append(self.headers.get("Accept-Encoding", ""))
                server.bodies.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = answer

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer((host, 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> "Server":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


CARD = (REPO / "tests" / "fixtures" / "cards" / "v1.json").read_bytes()


@pytest.fixture
def only_127_0_0_1(settings) -> None:
    """Loopback allowed for the test's own servers at 127.0.0.1 only: 127.0.0.2 stays refused."""
    settings.VIRGO_OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.1/32"]


@pytest.fixture
def allowed_target() -> Iterator[Server]:
    """Where a redirect points that the guard itself would allow: answers a card to GET."""
    with Server(headers={"Content-Type": "application/json"}, body=CARD) as server:
        yield server


@pytest.fixture
def refused_target() -> Iterator[Server]:
    """Where a redirect points that the guard refuses (127.0.0.2, outside the allowed /32)."""
    with Server("127.0.0.2", headers={"Content-Type": "application/json"}, body=CARD) as server:
        yield server


def redirecting(to: str, status: int = 302) -> Server:
    return Server(status=status, headers={"Location": to})


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
@pytest.mark.parametrize("target", ["allowed_target", "refused_target"])
def test_a_request_never_follows_a_redirect(
    status: int, target: str, only_127_0_0_1: None, request: pytest.FixtureRequest
) -> None:
    """VX-SEC-3: the guard's request answers the redirect itself; nothing is sent where it
    points, whether the guard would allow that place (a redirect at all) or not (a redirect to
    a loopback address outside the allowed network)."""
    to: Server = request.getfixturevalue(target)
    with redirecting(f"{to.url}/elsewhere", status) as first:
        response = outbound.request("POST", f"{first.url}/hook", what="url", timeout=5, json={})
    assert (response.status_code, response.headers["Location"]) == (status, f"{to.url}/elsewhere")
    assert [method for method, *_ in first.requests] == ["POST"]
    assert to.requests == []


@pytest.mark.parametrize("target", ["allowed_target", "refused_target"])
def test_a_webhook_answered_with_a_redirect_is_rejected_and_not_followed(
    target: str, deployer, only_127_0_0_1: None, request: pytest.FixtureRequest
) -> None:
    """VX-SEC-3: a receiver that redirects is recorded as rejecting the delivery (its 307 kept);
    the redirect's target gets nothing."""
    to: Server = request.getfixturevalue(target)
    with redirecting(f"{to.url}/hook", 307) as first:
        url = f"{first.url}/hook"
        ok(confirmed(deployer, "register_webhook", {"webhook": "ci", "url": url}))
        result = ok(confirmed(deployer, "trigger_webhook", {"webhook": "ci"}))
    assert (result["outcome"], result["status_code"]) == ("rejected", 307)
    assert len(first.requests) == 1 and to.requests == []
    assert WebhookDelivery.objects.get().url == url


@pytest.mark.parametrize("target", ["allowed_target", "refused_target"])
def test_a_card_import_answered_with_a_redirect_is_refused_and_not_followed(
    target: str, only_127_0_0_1: None, request: pytest.FixtureRequest
) -> None:
    """VX-SEC-3, VX-IMP-1: the card is read from the URL given or not at all: a redirect, to a
    card the guard would allow or to an address it refuses, is one clear error."""
    from personas import card_import

    to: Server = request.getfixturevalue(target)
    refused = pytest.raises(card_import.CardImportError, match=r"^url: answered HTTP 302")
    with redirecting(f"{to.url}/.well-known/agent-card.json") as first, refused:
        card_import.load_card(first.url)
    assert [path for _, path, _ in first.requests] == ["/.well-known/agent-card.json"]
    assert to.requests == []
    # The target itself serves a card the guard lets through when it is asked directly.
    if target == "allowed_target":
        assert card_import.load_card(to.url).name


# Reading an answer -------------------------------------------------------------------------------


class Trickle(Server):
    """A server that sends its body in `pieces`, `pause` seconds apart, each within any read
    timeout, so only a deadline on the whole answer stops the reader."""

    def __init__(self, pieces: list[bytes], pause: float) -> None:
        super().__init__(body=b"")
        total = sum(map(len, pieces))

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", str(total))
                self.end_headers()
                # The reader hangs up part-way when it gives up: that is the point.
                with contextlib.suppress(ConnectionError):
                    for piece in pieces:
                        self.wfile.write(piece)
                        self.wfile.flush()
                        threading.Event().wait(pause)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd.RequestHandlerClass = Handler


def test_fetch_reads_the_answer_as_sent_from_the_checked_address(only_127_0_0_1: None) -> None:
    """VX-SEC-3: a fetch returns the status, headers and exact body, asks for no content
    encoding, and names the URL's own host in Host."""
    headers = {"Content-Type": "text/plain", "X-Kept": "yes"}
    with Server(status=203, headers=headers, body=b"token-bytes\n") as server:
        fetched = outbound.fetch(f"{server.url}/.well-known/x", what="url", timeout=5, limit=12)
        assert (fetched.status, fetched.body) == (203, b"token-bytes\n")
        assert fetched.headers["X-Kept"] == "yes"
        host = server.url.removeprefix("http://")
        assert server.requests == [("GET", "/.well-known/x", host)]
        assert server.encodings_asked == ["identity"]


def test_fetch_of_a_name_dials_its_address_and_says_the_name(settings) -> None:
    """VX-SEC-3: a fetch of a URL that names its host dials the address it checked and says
    the name in Host (what a virtual host answers by), asking for no content encoding."""
    allow_loopback(settings)
    with Server(body=b"ok") as server:
        by_name = server.url.replace("127.0.0.1", "localhost")
        assert outbound.fetch(f"{by_name}/x", what="url", timeout=5, limit=8).body == b"ok"
    assert server.requests == [("GET", "/x", by_name.removeprefix("http://"))]
    assert server.encodings_asked == ["identity"]


def test_fetch_stops_reading_past_its_limit_and_names_the_argument(only_127_0_0_1: None) -> None:
    """VX-SEC-3: an answer one byte past the limit is refused as too large, naming the caller's
    argument; an answer of exactly the limit is read whole."""
    with Server(body=b"x" * 65) as server:
        with pytest.raises(outbound.TooLarge, match=r"^the-url: the answer is longer than 64 b"):
            outbound.fetch(server.url, what="the-url", timeout=5, limit=64)
        assert outbound.fetch(server.url, what="the-url", timeout=5, limit=65).body == b"x" * 65


def test_fetch_answers_a_redirect_itself(only_127_0_0_1: None, allowed_target: Server) -> None:
    """VX-SEC-3: a fetch answered with a redirect returns it; its target is never asked."""
    with redirecting(f"{allowed_target.url}/card", 301) as first:
        fetched = outbound.fetch(first.url, what="url", timeout=5, limit=1024)
    assert (fetched.status, fetched.headers["Location"]) == (301, f"{allowed_target.url}/card")
    assert allowed_target.requests == []


def test_fetch_sends_the_method_and_body_it_is_given(only_127_0_0_1: None) -> None:
    """VX-SEC-3: what a caller posts (a federation search's query) reaches the peer whole."""
    with Server(body=b"ok") as server:
        fetched = outbound.fetch(
            f"{server.url}/search", what="url", timeout=5, limit=8, method="POST", content=b"{}"
        )
    assert fetched.body == b"ok"
    assert server.requests == [("POST", "/search", server.url.removeprefix("http://"))]
    assert server.bodies == [b"{}"]


def test_fetch_of_a_destination_the_operator_chose_may_leave_the_allowed_networks(
    only_127_0_0_1: None, refused_target: Server
) -> None:
    """VX-SEC-3: a peer the operator named is reached on an address the setting does not
    allow (never on one refused always), where the same fetch for anyone else is refused."""
    fetched = outbound.fetch(
        refused_target.url, what="peer", timeout=5, limit=4096, operator_chosen=True
    )
    assert fetched.body == CARD
    with pytest.raises(outbound.DestinationRefused, match=r"^peer: .*loopback"):
        outbound.fetch(refused_target.url, what="peer", timeout=5, limit=4096)
    with pytest.raises(outbound.DestinationRefused, match="never allowed"):
        outbound.fetch(
            "http://169.254.169.254/", what="peer", timeout=5, limit=64, operator_chosen=True
        )


def test_a_name_the_dns_servers_have_no_address_for_is_unresolvable(
    proof_world: ProofWorld,
) -> None:
    """VX-SEC-3: a name the configured DNS servers answer with no address is refused naming
    the argument and the host."""
    with pytest.raises(outbound.Unresolvable) as refused:
        outbound.destination("https://nothing.example/", what="peer")
    assert str(refused.value) == "peer: nothing.example does not resolve to any address"


def test_fetch_refuses_an_address_outside_the_allowed_networks(
    only_127_0_0_1: None, refused_target: Server
) -> None:
    """VX-SEC-3: a fetch of a loopback address the setting does not allow is refused before
    anything is sent, naming what was asked for."""
    with pytest.raises(outbound.DestinationRefused, match=r"^proof-url: .*loopback"):
        outbound.fetch(refused_target.url, what="proof-url", timeout=5, limit=64)
    assert refused_target.requests == []


def test_fetch_gives_up_on_an_answer_that_trickles_past_its_time(only_127_0_0_1: None) -> None:
    """VX-SEC-3: a server that sends a byte at a time, each within the read timeout, is cut off
    once the whole answer has taken longer than the fetch's time."""
    late = pytest.raises(httpx.ReadTimeout, match=r"^url: no whole answer within 0.3 s")
    with Trickle([b"a"] * 8, pause=0.15) as server, late:
        outbound.fetch(server.url, what="url", timeout=0.3, limit=64)
    with Trickle([b"a"] * 2, pause=0.01) as server:
        assert outbound.fetch(server.url, what="url", timeout=5, limit=64).body == b"aa"


class Slow(Server):
    """A server that waits `pause` seconds before it answers at all."""

    def __init__(self, pause: float) -> None:
        super().__init__(body=b"")

        class Handler(BaseHTTPRequestHandler):
            def answer(self) -> None:
                threading.Event().wait(pause)
                with contextlib.suppress(ConnectionError):
                    self.send_response(204)
                    self.end_headers()

            do_GET = do_POST = answer

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd.RequestHandlerClass = Handler


def test_a_request_and_a_fetch_give_up_after_their_time(only_127_0_0_1: None) -> None:
    """VX-SEC-3: a request or a fetch to a server that does not answer within the caller's time
    raises a timeout then, not after httpx's own default."""
    with Slow(pause=1.5) as server, pytest.raises(httpx.TimeoutException):
        outbound.request("POST", server.url, what="url", timeout=0.3)
    with Slow(pause=1.5) as server, pytest.raises(httpx.TimeoutException):
        outbound.fetch(server.url, what="url", timeout=0.3, limit=8)
    with Slow(pause=0.0) as server:
        assert outbound.request("POST", server.url, what="url", timeout=5).status_code == 204


@pytest.mark.live
@pytest.mark.mutation
def test_over_https_the_certificate_is_checked_for_the_urls_name(
    proof_world: ProofWorld, settings: Any
) -> None:
    """VX-SEC-3: a request and a fetch dial the checked address, yet check TLS for the URL's
    name (SNI and the certificate's names) against VIRGO_OUTBOUND_CA_BUNDLE: the certified name
    answers; a name the certificate does not cover fails; so does the test authority once the
    setting no longer names it (httpx's own trusted authorities then)."""
    proof_world.point_at("acme.example")
    proof_world.site.put("acme.example", "/hook", b"ok")
    url = f"https://acme.example:{proof_world.https_port}/hook"
    assert outbound.request("GET", url, what="url", timeout=5).content == b"ok"
    assert outbound.fetch(url, what="url", timeout=5, limit=8).body == b"ok"
    proof_world.point_at("uncertified.example")
    proof_world.site.put("uncertified.example", "/hook", b"ok")
    elsewhere = f"https://uncertified.example:{proof_world.https_port}/hook"
    for attempt in (
        lambda: outbound.request("GET", elsewhere, what="url", timeout=5),
        lambda: outbound.fetch(elsewhere, what="url", timeout=5, limit=8),
    ):
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            attempt()
    settings.VIRGO_OUTBOUND_CA_BUNDLE = ""
    assert outbound.tls_verify() is True
    for attempt in (
        lambda: outbound.request("GET", url, what="url", timeout=5),
        lambda: outbound.fetch(url, what="url", timeout=5, limit=8),
    ):
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            attempt()
