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
