"""Helpers of the runtime tests: standing personas with real stamps, and calls through handle()."""

import itertools
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.contrib.auth.models import AbstractUser
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from personas.models import Generation, Persona, PersonaClass
from runtime import transport
from runtime.handler import handle
from runtime.models import DecisionRecord
from runtime.stamp import load_active_stamp
from stamps.factory import PersonaIdentity, build_stamp
from stamps.models import CapabilityStamp
from stamps.profiles import required_tools
from stamps.services import owner_reference, stamp_inputs
from stamps.storage import stamp_path, write_stamp_file
from tests.factories import free_address, make_agent, make_owner, make_persona
from virgo import telemetry
from virgo.canonical import composition_hash, sha256_hex, stamp_bytes

_correlations = itertools.count(1)


class RecordingTransport:
    """A transport that keeps what it was asked to carry, instead of reaching the hub."""

    def __init__(self) -> None:
        self.sent: list[DecisionRecord] = []

    def confirmation_requested(self, record: DecisionRecord) -> None:
        self.sent.append(record)


@contextmanager
def recording_transport() -> Iterator[RecordingTransport]:
    """The runtime's transport is a RecordingTransport while the block runs."""
    recording = RecordingTransport()
    previous = transport.register(recording)
    try:
        yield recording
    finally:
        transport.register(previous)


CLASS_ADDRESSES = {
    PersonaClass.SECRETARY: "root/secretary",
    PersonaClass.TEAM_COORDINATOR: "work/coordinator",
    PersonaClass.PROJECT_LEAD: "work/core/lead",
    PersonaClass.CODER_DEPUTY: "work/core/deputy",
}


def standing_persona(
    owner: AbstractUser | None = None,
    *,
    persona_class: str = PersonaClass.CODER_DEPUTY,
    extra: tuple[str, ...] = (),
    **fields: Any,
) -> Persona:
    """A persona of `persona_class` whose generation stands: its stamp file is on disk."""
    owner = owner or make_owner()
    agent = fields.pop("agent", None) or make_agent(owner)
    verbs = list(required_tools(persona_class))
    fields.setdefault("verb_subset", verbs + [verb for verb in extra if verb not in verbs])
    fields.setdefault("queues", ["reviews"])
    fields.setdefault("address", free_address(agent, CLASS_ADDRESSES[PersonaClass(persona_class)]))
    persona = make_persona(agent, persona_class=persona_class, **fields)
    assert persona.standing is True, persona.generations.first().not_standing_reasons
    return persona


def root_of(persona: Persona) -> Path:
    """The persona's workspace directory, made if it is not there yet."""
    stamp = load_active_stamp(persona)
    return stamp.workspace_for(stamp.tools["workspace_read"]).ensure()


def install_unchecked_stamp(persona: Persona, **changes: Any) -> Persona:
    """Make a stamp the factory would refuse the persona's active one, as a snapshot restore wrote
    stamps before: built by the pure factory from the current generation's inputs with `changes`
    (e.g. `owning_lead`, `human_surface_bindings`), its row, file and generation consistent.

    It stands for every stamp that reaches a runtime without the stamp service's ownership checks
    (restored from elsewhere, or built before they existed): the runtime must not trust it.
    """
    current = persona.generations.select_related("persona__agent").get(number=persona.generation)
    inputs = stamp_inputs(current)
    number = persona.generation + 1
    lead = changes.pop("owning_lead", inputs["persona"].owning_lead)
    inputs["persona"] = PersonaIdentity(
        id=str(persona.uuid),
        name=persona.name,
        generation=number,
        owner=owner_reference(persona.agent.owner_id),
        owning_lead=lead,
    )
    inputs.update(changes)
    composition = {**current.composition, "owning_lead": lead}
    composition.update((key, value) for key, value in changes.items() if key in composition)
    data = stamp_bytes(build_stamp(**inputs))
    digest = sha256_hex(data)
    generation = Generation.objects.create(
        persona=persona,
        number=number,
        composition=composition,
        base_composition_hash=current.base_composition_hash,
        standing=True,
        stamp_hash=digest,
        composition_hash=composition_hash(
            base_composition_hash=current.base_composition_hash, stamp_hash=digest
        ),
    )
    CapabilityStamp.objects.create(
        generation=generation,
        persona_uuid=persona.uuid,
        generation_number=number,
        stamp_hash=digest,
        body=data,
    )
    write_stamp_file(stamp_path(persona.uuid, number), data)
    Persona.objects.filter(pk=persona.pk).update(generation=number, standing=True)
    persona.refresh_from_db()
    return persona


def correlation() -> str:
    return f"corr-{next(_correlations)}"


def call(
    persona: Persona,
    tool: str,
    arguments: dict[str, Any] | None = None,
    correlation_id: str | None = None,
) -> dict[str, Any]:
    return handle(persona, tool, arguments or {}, correlation_id or correlation())


# A Virgo of its own for subprocess tests: its own VIRGO_HOME, SQLite file and eager Celery, so a
# real `manage.py mcp serve` or `launch` process sees the personas the test made.

REPO = Path(__file__).resolve().parent.parent
MANAGE = [sys.executable, str(REPO / "manage.py")]
# Bounds how long a broken run hangs; not a performance assertion.
PROCESS_TIMEOUT = 120

_MAKE_PERSONAS = """
from personas import services
from personas.models import RegisteredAddress
from django.contrib.auth import get_user_model
from stamps.profiles import required_tools

owner = get_user_model().objects.create_user("standalone-owner", password="x" * 20)
verbs = list(required_tools("coder-deputy"))
agent = services.agent_create(
    owner=owner, name="standalone", granted_verbs=verbs, granted_queues=["reviews"]
)
for name, path in (("Deputy", "work/core/deputy"), ("Broken", "work/core/broken")):
    RegisteredAddress.objects.get_or_create(path=path)
    persona = services.persona_create(
        agent=agent, actor=owner, name=name, system_prompt="Work the queue.",
        verb_subset=verbs, queues=["reviews"], persona_class="coder-deputy", address=path,
    )
    persona.refresh_from_db()
    assert persona.standing is True, persona.generations.first().not_standing_reasons
    print("PERSONA", name, persona.uuid)
"""


@dataclass(frozen=True)
class Standalone:
    home: Path
    env: dict[str, str]
    personas: dict[str, str]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*MANAGE, *args],
            env=self.env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=PROCESS_TIMEOUT,
        )

    def stamp_bytes(self, name: str) -> bytes:
        path = self.home / "personas" / self.personas[name] / "generations/1/CAPABILITY-STAMP.json"
        return path.read_bytes()


def start_standalone(home: Path) -> Standalone:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "REDIS_URL") and not key.startswith("CELERY_")
    }
    env.update(
        DJANGO_SETTINGS_MODULE="virgo.settings",
        VIRGO_EMBEDDED="1",
        VIRGO_HOME=str(home),
        DATABASE_URL=f"sqlite:///{home / 'virgo.sqlite3'}",
        SECRET_KEY="standalone-" + os.urandom(8).hex(),
        LOG_LEVEL="WARNING",
        PYTHONUNBUFFERED="1",
    )
    standalone = Standalone(home, env, {})
    migrated = standalone.run("migrate", "--noinput")
    assert migrated.returncode == 0, migrated.stderr
    made = standalone.run("shell", "-c", _MAKE_PERSONAS)
    assert made.returncode == 0, made.stderr
    for line in made.stdout.splitlines():
        if line.startswith("PERSONA "):
            _, name, uuid = line.split()
            standalone.personas[name] = uuid
    return standalone


@contextmanager
def in_memory_spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on for the block, its spans kept in memory for the test to read."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    previous = telemetry.install(provider)
    try:
        yield exporter
    finally:
        telemetry.install(previous)
        provider.shutdown()


def handle_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name == "virgo.handle"]
