"""Helpers of the virgo-channel tests: a real reference hub on loopback, personas bound to it."""

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from channel.hub import Hub
from personas.models import Persona, PersonaClass
from tests.runtime_support import standing_persona

# Settings values only: never written into a stamp, a card or a result.
TOKEN = "hub-token-3f9c2a7e51d84b06"
SECRET = "callback-secret-9a1e77c04f2b4d1c"
OPS = "teams:chat/ops"
FINANCE = "teams:chat/finance"
SURFACE_CLASSES = (PersonaClass.SECRETARY, PersonaClass.TEAM_COORDINATOR)
NO_SURFACE_CLASSES = (PersonaClass.PROJECT_LEAD, PersonaClass.CODER_DEPUTY)


@contextmanager
def running_hub(settings: Any, *, token: str = TOKEN) -> Iterator[Hub]:
    """A reference hub on a free loopback port, and Virgo's settings pointed at it.

    Short timeouts and backoff keep the fault tests quick; no test asserts on time.
    """
    with Hub(token=token) as hub:
        hub.add_surface(OPS)
        hub.add_surface(FINANCE)
        settings.VIRGO_CHANNEL_URL = hub.url
        settings.VIRGO_CHANNEL_TOKEN = TOKEN
        settings.VIRGO_CHANNEL_SECRET = SECRET
        settings.VIRGO_CHANNEL_TIMEOUT = 0.5
        settings.VIRGO_CHANNEL_RETRIES = 2
        settings.VIRGO_CHANNEL_BACKOFF = 0.01
        settings.VIRGO_CHANNEL_BACKOFF_MAX = 0.05
        yield hub


def surface_persona(
    persona_class: str = PersonaClass.SECRETARY,
    *,
    surfaces: tuple[str, ...] = (OPS,),
    **fields: Any,
) -> Persona:
    """A standing persona of the class, bound to `surfaces` on the hub."""
    return standing_persona(
        persona_class=persona_class, human_surface_bindings=list(surfaces), **fields
    )


DELETE = {"path": "memory/old.md", "mode": "delete"}


def owner_with_surface(hub: Hub, name: str | None = None) -> Any:
    """An owner whose confirmations go to a personal chat on the hub."""
    from channel import services
    from tests.factories import make_owner, register_surfaces

    owner = make_owner(name)
    binding = f"teams:user/{owner.username}"
    hub.add_surface(binding)
    register_surfaces(owner, [binding])
    services.authority_surface_set(
        user=owner, actor=owner, binding=binding, principal=human_principal(owner)["id"]
    )
    return owner


def human_principal(owner: Any) -> dict[str, str]:
    return {"kind": "human", "id": f"aad:{owner.username}@example.org"}


def persona_principal(persona: Persona) -> dict[str, str]:
    return {"kind": "persona", "id": str(persona.uuid)}


def signed_answer(hub: Hub, correlation_id: str, decision: str, principal: dict[str, str]) -> Any:
    """The hub's signed callback with a principal's answer, posted to Virgo."""
    from django.test import Client
    from django.urls import reverse

    body, headers = hub.signed_answer(correlation_id, decision, principal, secret=SECRET)
    return Client(enforce_csrf_checks=True).post(
        reverse("channel-decision"),
        body,
        content_type="application/json",
        headers={"X-Virgo-Signature": headers["X-Virgo-Signature"]},
    )


def held_delete(persona: Persona, correlation_id: str) -> dict[str, Any]:
    """A delete of a workspace file: held for confirmation, the request sent once committed."""
    from tests.factories import run_on_commit
    from tests.runtime_support import call

    assert call(persona, "workspace_write", {"path": "memory/old.md", "content": "keep"})["ok"]
    with run_on_commit():
        result = call(persona, "workspace_write", DELETE, correlation_id)
    assert result["code"] == "confirmation_required", result
    return result
