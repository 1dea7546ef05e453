"""Load the SPEC-0009 demo: owner `demo`, one agent, a reviewer and a deployer persona.

Both personas stand: each carries every required tool of its class (the class matrix of
persona-capability-surface v1) plus its SPEC-0009 verbs, and the deployer is the reviewer's
owning lead, so deputy-scope confirmations of the reviewer are routed to it: the reviewer asks
first before it completes a todo (its owner's "ask first" verbs), and the deployer answers.

Each run (each `make run` and `make serve` start) creates what is missing and changes nothing
that exists (VX-OPS-9): an owner who widened the Reviewer, rewrote a description, delisted a
persona or narrowed the agent's grant finds it so after the next start, and a run that creates
nothing records nothing. The demo owner's password is made, and printed, once: when the owner is
created, or when `--new-password` asks for a new one. The commands it prints work pasted into a
new shell in the checkout: the settings they need are in VIRGO_HOME/virgo.env, or in the file
VIRGO_ENV_FILE names, which each printed command then names too (`make serve` sets it).
"""

import os
import secrets
import shlex
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction
from django.db.models import Q
from django.utils.module_loading import import_string
from oauth2_provider.models import Application

from personas import services
from personas.models import Agent, OwnerIdentity, Persona, PersonaClass, RegisteredAddress

REVIEWER_VERBS = ["list_todos", "claim", "complete"]
DEPLOYER_VERBS = [*REVIEWER_VERBS, "register_webhook", "trigger_webhook"]


def class_and(persona_class: str, verbs: list[str]) -> list[str]:
    """Every required tool of the class (the stamp rules', settings.VIRGO_CLASS_REQUIRED_TOOLS),
    then the persona's own SPEC-0009 verbs."""
    return [*import_string(settings.VIRGO_CLASS_REQUIRED_TOOLS)(persona_class), *verbs]


DEMO_DOMAIN = "demo.virgo.example"
DEMO_CLIENT = "Demo agent host"
# Registered for the owner's next personas, as a moderator would: README's walk copies the
# Reviewer from a snapshot and makes a persona from a card, and two personas of one owner never
# share an address (VX-GRANT-5).
SPARE_ADDRESSES = ("work/core/reviewer-copy", "work/core/helper")
DEMO_PERSONAS: list[dict[str, Any]] = [
    {
        "name": "Reviewer",
        "description": "Reviews pull requests queued for review.",
        "system_prompt": (
            "You review pull requests from the reviews queue. Point out defects, explain them, "
            "and never merge or deploy anything yourself."
        ),
        "verb_subset": class_and(PersonaClass.CODER_DEPUTY, REVIEWER_VERBS),
        "queues": ["reviews"],
        "persona_class": PersonaClass.CODER_DEPUTY,
        "address": "work/core/reviewer",
        "owning_lead": "Deployer",
        "ask_first_verbs": ["complete"],
    },
    {
        "name": "Deployer",
        "description": "Ships reviewed releases through confirmed deployment webhooks.",
        "system_prompt": (
            "You deploy releases from the deploys queue. Every deployment waits for a human's "
            "confirmation; report each outcome in the queue."
        ),
        "verb_subset": class_and(PersonaClass.PROJECT_LEAD, DEPLOYER_VERBS),
        "queues": ["deploys"],
        "persona_class": PersonaClass.PROJECT_LEAD,
        "address": "work/core/lead",
    },
]


def command(arguments: str) -> str:
    """`virgo <arguments>` as pasted into a new shell in the checkout: naming the settings file
    this process was given, if it was given one."""
    env_file = os.environ.get("VIRGO_ENV_FILE")
    prefix = f"VIRGO_ENV_FILE={shlex.quote(env_file)} " if env_file else ""
    return f"{prefix}.venv/bin/virgo {arguments}"


class Command(BaseCommand):
    help = (
        "Create what is missing of the demo, and print how to reach it. The demo owner, agent "
        "and personas are made where missing; nothing that exists is changed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--new-password",
            action="store_true",
            help="give the demo owner a new password (printed once) instead of keeping theirs",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        with transaction.atomic():
            owner, password = self._owner(new_password=options["new_password"])
            agent = self._agent(owner)
            personas: dict[str, Persona] = {}
            # Leads first, so that a deputy can name its owning lead.
            for spec in sorted(DEMO_PERSONAS, key=lambda spec: "owning_lead" in spec):
                personas[spec["name"]] = self._persona(agent, spec, personas)
            for path in SPARE_ADDRESSES:
                RegisteredAddress.objects.get_or_create(path=path)
            client = self._client(owner)
        base = settings.VIRGO_PUBLIC_BASE_URL
        if password:
            self.stdout.write(f"Demo owner: demo / {password} (printed only now)")
        else:
            self.stdout.write("Demo owner: demo (password unchanged: as printed when it was made)")
        self.stdout.write(f"Reset it:   {command('load_demo --new-password')}")
        self.stdout.write(
            f"Provider:   {DEMO_DOMAIN} (approved by this installation: nobody can publish "
            "a proof on the demo's domain)"
        )
        self.stdout.write(f"Admin:      {base}/admin/")
        self.stdout.write(f"Card:       {personas[DEMO_PERSONAS[0]['name']].card_url}")
        self.stdout.write(f"Directory:  {base}/api/directory/ (sign in first)")
        self.stdout.write(f"Addresses:  {', '.join(SPARE_ADDRESSES)} are free for new personas")
        for persona in personas.values():
            persona.refresh_from_db()
            state = {True: "stands", False: "does NOT stand", None: "stamp owed"}[persona.standing]
            self.stdout.write(f"Persona:    {persona.name} at {persona.address} {state}")
        reviewer = personas[DEMO_PERSONAS[0]["name"]].uuid
        self.stdout.write(f"MCP server: {command(f'mcp serve --persona {reviewer}')}")
        self.stdout.write(f"MCP config: {command(f'mcp config --persona {reviewer}')}")
        self.stdout.write(
            f"Allowlist:  {command(f'launch --persona {reviewer} --print-allowlist')}"
        )
        self.stdout.write(
            f"Remote:     .venv/bin/python -m serving.connect "
            f"{personas[DEMO_PERSONAS[0]['name']].mcp_url} --client-id {client.client_id}"
        )

    def _client(self, owner: Any) -> Application:
        """The demo owner's agent host client for the remote endpoint (README: over the
        network): made once, then left as the owner keeps it."""
        client = Application.objects.filter(user=owner, name=DEMO_CLIENT).first()
        if client is None:
            client = Application.objects.create(
                user=owner,
                name=DEMO_CLIENT,
                client_type=Application.CLIENT_PUBLIC,
                authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
                # Any loopback port (RFC 8252): `serving.connect` listens on one it picks.
                redirect_uris="http://127.0.0.1/callback",
            )
        return client

    def _owner(self, *, new_password: bool) -> tuple[Any, str | None]:
        """The demo owner, and their password when it is new (else None: it is kept)."""
        user, created = get_user_model().objects.get_or_create(
            username="demo", defaults={"is_staff": True, "email": "demo@example.org"}
        )
        password = None
        if created or new_password or not user.has_usable_password():
            password = secrets.token_urlsafe(12)
            user.set_password(password)
            user.save(update_fields=["password"])
        identity, made = OwnerIdentity.objects.get_or_create(
            user=user, defaults={"display_name": "Demo Owner"}
        )
        if made or identity.organization_domain_id is None:
            # Nobody can publish a token on the demo's domain: the installation vouches for it,
            # as a superuser may for any owner (the audit trail says so).
            claim = services.organization_claim(owner=user, domain=DEMO_DOMAIN)
            if not claim.is_verified:
                services.organization_approve(claim=claim, actor=services.INSTALLATION)
            services.owner_identity_update(user=user, organization_domain=claim)
        return user, password

    def _agent(self, owner: Any) -> Agent:
        verbs = sorted({verb for spec in DEMO_PERSONAS for verb in spec["verb_subset"]})
        queues = sorted({queue for spec in DEMO_PERSONAS for queue in spec["queues"]})
        agent = Agent.objects.filter(owner=owner, name="demo-agent").first()
        if agent is not None:
            return agent
        return services.agent_create(
            owner=owner,
            name="demo-agent",
            granted_verbs=verbs,
            granted_queues=queues,
            self_description="A general-purpose coding agent (self-described).",
        )

    def _persona(self, agent: Agent, spec: dict[str, Any], made: dict[str, Persona]) -> Persona:
        RegisteredAddress.objects.get_or_create(path=spec["address"])
        spec = {**spec}
        if "owning_lead" in spec:
            spec["owning_lead"] = made[spec["owning_lead"]]
        # The owner's, renamed or moved, is still the demo's: by its name or its address.
        persona = (
            agent.personas.filter(Q(name=spec["name"]) | Q(address__path=spec["address"]))
            .order_by("-pk")
            .first()
        )
        if persona is not None:
            return persona
        persona = services.persona_create(agent=agent, actor=agent.owner, **spec)
        return services.persona_set_discoverable(
            persona=persona, actor=agent.owner, discoverable=True, via="load_demo"
        )
