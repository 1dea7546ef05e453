"""The deployer's webhook verbs: always confirmed, a real POST, every attempt recorded."""

import socket

import pytest

from runtime import confirmations
from runtime.models import DecisionRecord, Webhook, WebhookDelivery
from tests.factories import DEPLOYER_VERBS, address, make_owner
from tests.runtime_support import call, correlation, standing_persona
from tests.tools_support import HookServer, allow_loopback, confirmed, ok, refused

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def loopback_receivers(settings) -> None:
    allow_loopback(settings)


@pytest.fixture
def deployer():
    return standing_persona(
        make_owner(),
        extra=tuple(DEPLOYER_VERBS),
        queues=["deploys"],
        address=address("work/core/deployer"),
    )


def register(persona, url: str, name: str = "prod") -> dict:
    return ok(confirmed(persona, "register_webhook", {"webhook": name, "url": url}))


def trigger(persona, name: str = "prod", payload: dict | None = None) -> dict:
    return ok(confirmed(persona, "trigger_webhook", {"webhook": name, "payload": payload or {}}))


def test_registration_is_a_permission_change_held_for_the_bound_human(deployer) -> None:
    """V1-GB-1, V1-CONF-2: nothing is registered before the owner approves."""
    cid = correlation()
    held = call(
        deployer, "register_webhook", {"webhook": "prod", "url": "https://ci.example/h"}, cid
    )
    assert (held["code"], held["boundary"]) == (
        "confirmation_required",
        "credential-or-permission-change",
    )
    assert not Webhook.objects.exists()
    record = DecisionRecord.objects.get(correlation_id=cid)
    confirmations.decide(record=record, approve=True, user=deployer.agent.owner)
    registered = ok(
        call(deployer, "register_webhook", {"webhook": "prod", "url": "https://ci.example/h"}, cid)
    )
    assert (registered["webhook"], registered["replaced"]) == ("prod", False)
    assert Webhook.objects.get().registered_under == record


def test_a_trigger_posts_once_with_the_correlation_id_and_the_senders_envelope(deployer) -> None:
    """V1-GB-3, V1-STD-7: publication is confirmed, then delivered once; the receiver gets the
    registry-derived sender and an idempotency key equal to the correlation id."""
    with HookServer() as hook:
        register(deployer, hook.url)
        cid = correlation()
        arguments = {"webhook": "prod", "payload": {"ref": "v2.4"}}
        held = call(deployer, "trigger_webhook", arguments, cid)
        assert held["boundary"] == "external-publication-or-deployment"
        assert hook.received == []
        record = DecisionRecord.objects.get(correlation_id=cid)
        confirmations.decide(record=record, approve=True, user=deployer.agent.owner)
        result = ok(call(deployer, "trigger_webhook", arguments, cid))
        again = ok(call(deployer, "trigger_webhook", arguments, cid))
    assert result == again
    assert (result["outcome"], result["status_code"]) == ("delivered", 204)
    [request] = hook.received
    assert request["headers"]["Idempotency-Key"] == cid
    assert request["json"]["payload"] == {"ref": "v2.4"}
    assert request["json"]["sender"]["sender"]["peer_id"] == str(deployer.uuid)
    assert WebhookDelivery.objects.get().correlation_id == cid


def test_a_non_2xx_answer_is_recorded_as_rejected(deployer) -> None:
    with HookServer(status=503) as hook:
        register(deployer, hook.url)
        result = trigger(deployer)
    assert (result["outcome"], result["status_code"]) == ("rejected", 503)


def test_a_timeout_or_a_dropped_connection_is_unknown_never_success(deployer, settings) -> None:
    """V1-GB-3: a delivery whose fate is not known is recorded as such."""
    settings.VIRGO_WEBHOOK_TIMEOUT_SECONDS = 0.2
    with HookServer(delay=30) as slow:
        register(deployer, slow.url, "slow")
        assert trigger(deployer, "slow")["outcome"] == "unknown"
    with HookServer(drop=True) as dropping:
        register(deployer, dropping.url, "dropping")
        dropped = trigger(deployer, "dropping")
    assert (dropped["outcome"], dropped["status_code"]) == ("unknown", None)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    register(deployer, f"http://127.0.0.1:{port}/gone", "gone")
    refused_connection = trigger(deployer, "gone")
    assert refused_connection["outcome"] == "unknown"
    assert "connection failed" in refused_connection["error"]
    assert set(WebhookDelivery.objects.values_list("outcome", flat=True)) == {"unknown"}


def test_a_persona_triggers_only_its_own_webhooks(deployer) -> None:
    other = standing_persona(
        deployer.agent.owner,
        agent=deployer.agent,
        extra=tuple(DEPLOYER_VERBS),
        queues=["deploys"],
        address=address("work/core/second-deployer"),
    )
    register(deployer, "https://ci.example/h")
    refused(confirmed(other, "trigger_webhook", {"webhook": "prod"}), "not_found")
    assert not WebhookDelivery.objects.exists()


def test_a_url_with_credentials_is_never_registered(deployer) -> None:
    """V1-GB-4: a webhook URL never carries a credential; nobody is asked to approve one."""
    refused(
        call(deployer, "register_webhook", {"webhook": "prod", "url": "https://u:p@ci.example/h"}),
        "invalid_arguments",
    )
    assert not Webhook.objects.exists()
    assert not DecisionRecord.objects.exists()
