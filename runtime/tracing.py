"""One OpenTelemetry span per handle() call (VX-AUDIT-1), when tracing is configured.

`traced_handle` wraps runtime.handler.handle: a `virgo.handle` span carrying the persona's uuid,
the tool and the correlation id the call was made under, and, once the handler has decided
(`decided`, around its decide() call), the verdict and the deciding rule, as runtime.explain
names them (allow, confirm, deny, refused; a rule's id, or the refusal's code). What the call
came to is `virgo.code` (`ok`, or the code of its answer). The arguments are never put on a
span, nor the reason a refusal gives: both may carry what the call must not leak.

With tracing off (virgo.telemetry: nothing configured) handle() runs straight through. A dry
run (runtime.explain, runtime.vectors) calls decide() alone, so it makes no span.

The verdict is read by the function runtime.apps registers (runtime.explain.verdict_and_rule):
this module is imported by the handler, and may not import what imports the handler.
"""

import functools
import logging
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from virgo import telemetry

logger = logging.getLogger("virgo.runtime")

SPAN = "virgo.handle"
TRACER = "virgo.runtime"

Describe = Callable[[Any, str, Any], tuple[str, str]]

_describe: Describe | None = None
# The span of the handle() call running in this context, and who it is for.
_current: ContextVar[tuple[Any, Any, str] | None] = ContextVar("virgo_handle_span", default=None)


def register(describe: Describe | None) -> Describe | None:
    """The function that reads (persona, tool, decision) as (verdict, rule); returns the old."""
    global _describe
    previous, _describe = _describe, describe
    return previous


def traced_handle(handle: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    @functools.wraps(handle)
    def traced(
        persona: Any, tool_name: str, arguments: dict[str, Any] | None, correlation_id: str
    ) -> dict[str, Any]:
        tracer = telemetry.tracer(TRACER)
        if tracer is None:
            return handle(persona, tool_name, arguments, correlation_id)
        attributes = {
            "virgo.persona": str(persona.uuid),
            "virgo.tool": str(tool_name)[:100],
            "virgo.correlation_id": str(correlation_id)[:200],
        }
        with tracer.start_as_current_span(SPAN, attributes=attributes) as span:
            token = _current.set((span, persona, str(tool_name)))
            try:
                result = handle(persona, tool_name, arguments, correlation_id)
            finally:
                _current.reset(token)
            span.set_attribute("virgo.code", str(result.get("code") or "ok"))
            return result

    return traced


def decided(decision: Any) -> Any:
    """The handler's decision, passed through; on the running handle() span, its verdict and
    rule."""
    current = _current.get()
    if current is not None and _describe is not None:
        span, persona, tool_name = current
        try:
            verdict, rule = _describe(persona, tool_name, decision)
        except Exception:
            # A span is an observation: reading it must never change what the call does.
            logger.exception("could not read the decision of %s for its span", tool_name)
            verdict, rule = "unknown", "unknown"
        span.set_attributes({"virgo.verdict": verdict, "virgo.rule": rule})
    return decision
