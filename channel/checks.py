"""Boot checks of virgo-channel (channel.W001, channel.W002).

A standing persona whose stamp grants human-surface writes needs a hub to reach: without
VIRGO_CHANNEL_URL those tools refuse every call (`channel_unconfigured`), never fake a delivery.
Without VIRGO_CHANNEL_SECRET the decision callback refuses every answer. (Production settings
refuse to start with a hub and no secret; the embedded default only warns.) Naming each persona
reads every standing stamp, so only `virgo check` does it (VX-OPS-5).
"""

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Warning, register

from personas.catalogue import VERBS, Bundle
from stamps.checks import every_stamp_verified
from stamps.selectors import standing_personas_granting

# Status is the one human-surface tool that answers without a hub (it reports the hub missing).
HUB_ACTIONS = frozenset(
    verb.handler_action
    for verb in VERBS
    if verb.handler_action.startswith("human.") and verb.bundle != Bundle.HUMAN_SURFACE_STATUS
)


@register("virgo")
def check_channel(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    if app_configs is not None and not any(config.name == "channel" for config in app_configs):
        return []
    messages: list[CheckMessage] = []
    if settings.VIRGO_CHANNEL_URL and not settings.VIRGO_CHANNEL_SECRET:
        messages.append(
            Warning(
                "VIRGO_CHANNEL_SECRET is not set: the hub's decision callbacks are all refused",
                id="channel.W002",
            )
        )
    if settings.VIRGO_CHANNEL_URL or not every_stamp_verified():
        return messages
    for persona, tools in standing_personas_granting(HUB_ACTIONS.__contains__):
        messages.append(
            Warning(
                f"persona {persona.name!r} ({persona.uuid}): VIRGO_CHANNEL_URL is not set, so "
                f"these tools refuse every call: {', '.join(tools)}",
                obj=persona,
                id="channel.W001",
            )
        )
    return messages
