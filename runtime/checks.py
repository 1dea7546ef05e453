"""Boot checks of the runtime: its transport (runtime.E001), the runtime side of the handler
registry (runtime.W001, runtime.W002) and, deploying, the shared workspace directory
(runtime.E002).

Without a registered transport (runtime.transport) no confirmation request could reach its
authority, so a runtime that has none does not start (an error, not a warning).

stamps.checks proves every handler action of the catalogue is declared in the one registry; this
check says which of them this runtime has not bound to an implementation yet. Calls to those
tools are refused (`not_implemented`), never answered with a made-up success, so the persona
still stands. At start-up that is one warning naming the actions (runtime.W002, constant time,
VX-OPS-5); `virgo check` names each standing persona and its exact tools (runtime.W001).
"""

from typing import Any

from django.core.checks import CheckMessage, Error, Warning, register
from django.db import DatabaseError

from runtime import workspace_directory
from runtime.transport import registered
from stamps.checks import every_stamp_verified
from stamps.registry import HANDLERS
from stamps.selectors import standing_personas_granting


@register("virgo")
def check_transport(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    if app_configs is not None and not any(config.name == "runtime" for config in app_configs):
        return []
    if registered() is not None:
        return []
    return [
        Error(
            "no transport is registered for the runtime: confirmation requests would reach nobody",
            hint="Install virgo-channel (`channel` in INSTALLED_APPS); it registers its "
            "transport when Django starts.",
            id="runtime.E001",
        )
    ]


@register("virgo")
def check_bound_handlers(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    if app_configs is not None and not any(config.name == "runtime" for config in app_configs):
        return []
    unbound = frozenset(a for a in HANDLERS.actions if HANDLERS.implementation(a) is None)
    if not unbound:
        # No persona can be granted an unbound action: one outside the registry is the stamp
        # checks' finding (virgo.E006), so with none unbound no stamp needs reading here.
        return []
    if not every_stamp_verified():
        return [
            Warning(
                "handler actions with no implementation in this runtime yet, refused when "
                f"called: {', '.join(sorted(unbound))}",
                hint="`virgo check` names the personas whose stamps grant them.",
                id="runtime.W002",
            )
        ]
    return [
        Warning(
            f"persona {persona.name!r} ({persona.uuid}): tools with no implementation "
            f"in this runtime yet, refused when called: {', '.join(tools)}",
            obj=persona,
            id="runtime.W001",
        )
        for persona, tools in standing_personas_granting(unbound.__contains__)
    ]


@register("virgo", deploy=True)
def check_workspace_directory(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """runtime.E002: this machine's workspace directory is not the one the installation's
    machines share (runtime.workspace_directory); a database that cannot say is its own
    checks' to report."""
    if app_configs is not None and not any(config.name == "runtime" for config in app_configs):
        return []
    try:
        workspace_directory.check_workspaces()
    except DatabaseError:
        return []
    except workspace_directory.NotShared as refused:
        return [Error(refused.reason, hint=refused.fix, id="runtime.E002")]
    return []
