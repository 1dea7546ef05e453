"""Boot check of the runtime side of the handler registry (runtime.W001).

stamps.checks proves every handler action of an active stamp is declared in the one registry;
this check says which of them this runtime has not bound to an implementation yet. Calls to those
tools are refused (`not_implemented`), never answered with a made-up success, so the persona
still stands; the warning names the persona and the exact tools.
"""

from typing import Any

from django.core.checks import CheckMessage, Warning, register

from stamps.registry import HANDLERS
from stamps.selectors import standing_handler_tables


@register("virgo")
def check_bound_handlers(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    if app_configs is not None and not any(config.name == "runtime" for config in app_configs):
        return []
    messages: list[CheckMessage] = []
    for persona, table in standing_handler_tables():
        unbound = sorted(
            rule.tool for action, rule in table.items() if HANDLERS.implementation(action) is None
        )
        if unbound:
            messages.append(
                Warning(
                    f"persona {persona.name!r} ({persona.uuid}): tools with no implementation "
                    f"in this runtime yet, refused when called: {', '.join(unbound)}",
                    obj=persona,
                    id="runtime.W001",
                )
            )
    return messages
