"""Outbound destinations: no loopback, private, link-local or metadata address unless allowed."""

import os
import re
import subprocess
import sys

import pytest

from runtime.models import DecisionRecord, RefusalRecord, Webhook, WebhookDelivery
from tests.factories import DEPLOYER_VERBS, address, make_owner
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
    "http://100.64.0.9/": "shared (CGNAT)",
    "http://0.0.0.0/": "unspecified",
    "http://[::]/": "unspecified",
    "http://224.0.0.251/": "multicast",
    "http://[ff02::1]/": "multicast",
    "http://240.0.0.1/": "reserved",
    "http://[::ffff:127.0.0.1]/": "loopback address in IPv6 form",
    "http://[::ffff:10.1.2.3]/": "private address in IPv6 form",
    "http://[::ffff:169.254.169.254]/": "metadata",
    "http://169.254.169.254/latest/meta-data/": "metadata",
    "http://[fd00:ec2::254]/": "metadata",
    "http://100.100.100.200/": "metadata",
    # Spellings the resolver turns into 127.0.0.1: judged by the address, not the spelling.
    "http://2130706433/": "loopback",
    "http://0x7f.1/": "loopback",
}


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
    settings.VIRGO_OUTBOUND_ALLOWED_NETWORKS = ["0.0.0.0/0", "::/0"]
    for url in ("http://169.254.169.254/", "http://0.0.0.0/", "http://224.0.0.1/"):
        with pytest.raises(outbound.DestinationRefused, match="never allowed"):
            outbound.destination(url, what="url")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/hook",
        "http://localhost:9/hook",
        "http://10.0.0.7/hook",
        "http://169.254.169.254/latest/",
        "http://metadata.google.internal/",
        "http://[::ffff:192.168.0.1]/",
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
