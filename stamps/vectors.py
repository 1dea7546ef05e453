"""What `virgo stamp vectors` and `virgo stamp test` need, declared here and provided above.

A persona's policy vectors are calls with the verdict and rule the runtime gives each; only the
runtime can explain a call (runtime.explain), and the producers may not import it. So, as
runtime.transport does for virgo-channel, this module declares the provider and keeps the one
registered: runtime.apps.RuntimeConfig.ready registers runtime.vectors.
"""

from dataclasses import dataclass
from typing import Any, Protocol

from django.core.exceptions import ImproperlyConfigured

from personas.models import Persona


class MalformedVectors(ValueError):
    """A vectors file that is no vectors document: one line saying what is wrong."""


class PersonaUnexplainable(ValueError):
    """The persona has no stamp a call could be explained against (revoked, not standing...)."""


@dataclass(frozen=True, slots=True)
class Changed:
    """One call whose verdict or deciding rule is no longer what the vectors expect."""

    id: str
    tool: str
    arguments: dict[str, Any]
    expected: str
    now: str


@dataclass(frozen=True, slots=True)
class Replay:
    total: int
    changed: list[Changed]


class VectorProvider(Protocol):
    def export(self, persona: Persona) -> dict[str, Any]:
        """The persona's policy vectors as a JSON document."""

    def replay(self, persona: Persona, document: Any) -> Replay:
        """Each vector of `document` explained against the persona's current grant."""


class NoVectorProvider(ImproperlyConfigured):
    def __init__(self) -> None:
        super().__init__("no policy-vector provider is registered: the runtime app registers it")


_registered: VectorProvider | None = None


def register(provider: VectorProvider | None) -> VectorProvider | None:
    """Make `provider` the one that exports and replays vectors; returns the one it replaces."""
    global _registered
    previous, _registered = _registered, provider
    return previous


def provider() -> VectorProvider:
    if _registered is None:
        raise NoVectorProvider
    return _registered
