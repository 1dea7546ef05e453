"""Helpers of the persona-tool tests: a team of standing personas and calls that must succeed."""

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractUser

from personas.models import Agent, Persona, PersonaClass
from runtime import confirmations
from runtime.models import DecisionRecord
from stamps.profiles import allowed_tools, required_tools
from tests.factories import address, make_agent, make_owner
from tests.runtime_support import call, correlation, standing_persona


def every_tool(persona_class: str) -> tuple[str, ...]:
    """All the tools the class may be granted beyond its required ones (todo, webhook verbs)."""
    required = set(required_tools(persona_class))
    return tuple(name for name in allowed_tools(persona_class) if name not in required)


def ok(result: dict[str, Any]) -> dict[str, Any]:
    assert result["ok"] is True, result
    return result["result"]


def refused(result: dict[str, Any], code: str) -> dict[str, Any]:
    assert result["ok"] is False, result
    assert result["code"] == code, result
    return result


def confirmed(persona: Persona, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call a confirm tool: held, approved by the routed authority, then run once."""
    cid = correlation()
    held = call(persona, tool, arguments, cid)
    assert held["code"] == "confirmation_required", held
    record = DecisionRecord.objects.get(correlation_id=cid)
    assert record.authority_user_id == persona.agent.owner_id
    confirmations.decide(record=record, approve=True, user=persona.agent.owner)
    return call(persona, tool, arguments, cid)


@dataclass
class Team:
    """One owner's installation: a persona of each class on one agent, the deputy under the lead."""

    owner: AbstractUser
    agent: Agent
    secretary: Persona
    coordinator: Persona
    lead: Persona
    deputy: Persona

    def of(self, persona_class: str) -> Persona:
        return {
            PersonaClass.SECRETARY: self.secretary,
            PersonaClass.TEAM_COORDINATOR: self.coordinator,
            PersonaClass.PROJECT_LEAD: self.lead,
            PersonaClass.CODER_DEPUTY: self.deputy,
        }[PersonaClass(persona_class)]


def make_team(owner: AbstractUser | None = None, *, queues: list[str] | None = None) -> Team:
    owner = owner or make_owner()
    agent = make_agent(owner)
    queues = queues or ["reviews"]

    def persona(persona_class: str, **fields: Any) -> Persona:
        return standing_persona(
            owner,
            agent=agent,
            persona_class=persona_class,
            extra=every_tool(persona_class),
            queues=queues,
            **fields,
        )

    secretary = persona(PersonaClass.SECRETARY, name="Secretary")
    coordinator = persona(PersonaClass.TEAM_COORDINATOR, name="Coordinator")
    lead = persona(PersonaClass.PROJECT_LEAD, name="Lead")
    deputy = persona(
        PersonaClass.CODER_DEPUTY,
        name="Deputy",
        owning_lead=lead,
        address=address("work/core/deputy"),
    )
    return Team(owner, agent, secretary, coordinator, lead, deputy)


def allow_loopback(settings: Any) -> None:
    """Let outbound URLs lead to loopback, as a development setup would: the receivers here
    listen there, which the outbound guard refuses by default (VX-SEC-3)."""
    settings.VIRGO_OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]


class HookServer:
    """A real HTTP receiver on loopback that records what it was sent and answers `status`.

    Tests sending to it opt in with `allow_loopback`."""

    def __init__(self, status: int = 204, *, delay: float = 0, drop: bool = False) -> None:
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        received: list[dict[str, Any]] = []
        self.received = received
        self.status = status
        server = self
        release = threading.Event()
        self.release = release

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                received.append(
                    {
                        "path": self.path,
                        "headers": dict(self.headers),
                        "json": json.loads(self.rfile.read(length) or b"{}"),
                    }
                )
                if drop:
                    self.close_connection = True
                    self.connection.close()
                    return
                if delay:
                    release.wait(delay)
                self.send_response(server.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/hook"

    def __enter__(self) -> "HookServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
