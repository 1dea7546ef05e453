"""The one handler registry: handler action -> the implementation the runtime dispatches to.

Every handler action of the verb catalogue is declared here at import, so the declared set is
derived from the catalogue rather than typed a second time. The runtime binds implementations
with `HANDLERS.register(action, implementation)`; until it does, an action counts as registered
when it is declared. Boot validation asks this registry, and nothing else, whether a stamp's
handler actions exist.
"""

from collections.abc import Callable, Iterable
from typing import Any

from personas.catalogue import VERBS

Handler = Callable[..., Any]


class HandlerRegistry:
    def __init__(self, actions: Iterable[str] = ()) -> None:
        self._handlers: dict[str, Handler | None] = {}
        for action in actions:
            self.declare(action)

    def declare(self, action: str) -> None:
        """Announce that `action` exists; its implementation may be registered later."""
        self._handlers.setdefault(action, None)

    def register(self, action: str, implementation: Handler) -> None:
        if action not in self._handlers:
            raise KeyError(f"handler action {action!r} is not declared by the verb catalogue")
        bound = self._handlers[action]
        if bound is not None and bound is not implementation:
            raise ValueError(f"handler action {action!r} is already bound to {bound!r}")
        self._handlers[action] = implementation

    def is_registered(self, action: str) -> bool:
        return action in self._handlers

    def implementation(self, action: str) -> Handler | None:
        return self._handlers.get(action)

    @property
    def actions(self) -> frozenset[str]:
        return frozenset(self._handlers)


HANDLERS = HandlerRegistry(verb.handler_action for verb in VERBS)
