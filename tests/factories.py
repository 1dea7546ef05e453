"""Object graphs for tests, built through the same services the product uses."""

import itertools
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractUser
from django.test import TestCase
from django.utils import timezone

from personas import services, surfaces
from personas.catalogue import REQUIRED_TOOL_NAMES
from personas.models import (
    Agent,
    HumanSurface,
    OrganizationDomain,
    OwnerIdentity,
    Persona,
    PersonaClass,
    RegisteredAddress,
    Verification,
)
from stamps.factory import PersonaIdentity, workspace_binding_for
from stamps.profiles import required_tools

_counter = itertools.count(1)

REVIEWER_VERBS = ["list_todos", "claim", "complete"]
DEPLOYER_VERBS = [*REVIEWER_VERBS, "register_webhook", "trigger_webhook"]
ALL_VERBS = [*REQUIRED_TOOL_NAMES, *DEPLOYER_VERBS, "create_for"]


# A canonical address for each class (two segments for root and scope-wide roles, three for
# project duties), so a persona made with defaults stands whatever its class.
CLASS_ADDRESSES = {
    PersonaClass.SECRETARY: "root/secretary",
    PersonaClass.TEAM_COORDINATOR: "work/coordinator",
    PersonaClass.PROJECT_LEAD: "work/core/lead",
    PersonaClass.CODER_DEPUTY: "work/core/reviewer",
}


def class_verbs(persona_class: str) -> list[str]:
    """Every required tool the class matrix gives the class: the least a standing persona has."""
    return list(required_tools(persona_class))


def standing_verbs(persona_class: str, *extra: str) -> list[str]:
    """A verb subset with which a persona of the class stands: its class tools plus `extra`."""
    verbs = class_verbs(persona_class)
    return verbs + [verb for verb in extra if verb not in verbs]


def run_on_commit() -> Any:
    """Run on_commit callbacks (the Celery tasks, eager here) when the block ends."""
    return TestCase.captureOnCommitCallbacks(execute=True)


def make_owner(username: str | None = None, **identity: Any) -> AbstractUser:
    """A staff owner whose identity is proven: an OIDC subject (as a sign-in leaves it) and an
    organization domain the installation approved, `<username>.example.org` unless `organization`
    names another (empty: none). `oidc=False` leaves the subject unproven."""
    username = username or f"owner{next(_counter)}"
    user = get_user_model().objects.create_user(
        username=username,
        password="correct horse battery staple",
        is_staff=True,
        is_superuser=identity.pop("is_superuser", False),
    )
    proven_subject = identity.pop("oidc", True)
    domain = identity.pop("organization", f"{username}.example.org")
    # Made as the proofs leave them, without their audit events: tests count those.
    proven_domain = (
        OrganizationDomain.objects.create(
            owner=user,
            domain=services.normalise_domain(domain),
            verification=Verification.OPERATOR,
            verified_at=timezone.now(),
        )
        if domain
        else None
    )
    OwnerIdentity.objects.create(
        user=user,
        display_name=identity.pop("display_name", username.title()),
        identity_issuer=identity.pop("identity_issuer", "https://id.example.org/"),
        identity_subject=identity.pop("identity_subject", f"sub-{username}"),
        identity_verified_at=timezone.now() if proven_subject else None,
        organization_domain=proven_domain,
        **identity,
    )
    return user


def make_agent(owner: AbstractUser, **fields: Any) -> Agent:
    fields.setdefault("name", f"agent-{next(_counter)}")
    fields.setdefault("granted_verbs", list(ALL_VERBS))
    fields.setdefault("granted_queues", ["reviews", "deploys", "triage"])
    return services.agent_create(owner=owner, **fields)


def address(path: str) -> RegisteredAddress:
    return RegisteredAddress.objects.get_or_create(path=path)[0]


def free_address(agent: Agent, path: str) -> RegisteredAddress:
    """`path`, or a sibling of it (`work/core/reviewer-2`...) when one of the owner's live
    personas holds it: two personas of one owner never share an address (VX-GRANT-5)."""
    held = set(
        Persona.objects.filter(agent__owner_id=agent.owner_id, revoked_at__isnull=True).values_list(
            "address__path", flat=True
        )
    )
    candidate, number = path, 1
    while candidate in held:
        number += 1
        candidate = f"{path}-{number}"
    return address(candidate)


def register_surfaces(owner: AbstractUser, bindings: Any) -> None:
    """Register to `owner` each binding nobody holds yet, as the owner would before binding it.

    Persona mailboxes and bindings another owner holds are left alone, so a test binding one of
    those still meets the refusal.
    """
    for binding in bindings if isinstance(bindings, list) else []:
        if not isinstance(binding, str) or binding.startswith(surfaces.RESERVED_PREFIX):
            continue
        if not HumanSurface.objects.filter(binding__iexact=binding).exists():
            surfaces.surface_register(owner=owner, actor=owner, binding=binding)


def make_persona(agent: Agent, **fields: Any) -> Persona:
    """A persona as its owner would create it; its on-commit work has run when this returns.

    Its human-surface bindings are registered to the owner first where nobody holds them.
    """
    fields.setdefault("name", f"Persona {next(_counter)}")
    fields.setdefault("system_prompt", "You review pull requests. Be precise and kind.")
    fields.setdefault("persona_class", PersonaClass.CODER_DEPUTY)
    # By default a persona stands: its class tools plus the reviewer's todo verbs, as far as the
    # agent's grant reaches (a narrower grant gives a persona that does not stand).
    fields.setdefault(
        "verb_subset",
        [
            verb
            for verb in standing_verbs(fields["persona_class"], *REVIEWER_VERBS)
            if verb in agent.granted_verbs
        ],
    )
    fields.setdefault("queues", ["reviews"])
    fields.setdefault("address", free_address(agent, CLASS_ADDRESSES[fields["persona_class"]]))
    discoverable = fields.pop("discoverable", False)
    register_surfaces(agent.owner, fields.get("human_surface_bindings"))
    with run_on_commit():
        persona = services.persona_create(agent=agent, actor=agent.owner, **fields)
        if discoverable:
            persona = services.persona_set_discoverable(
                persona=persona, actor=agent.owner, discoverable=True, via="test"
            )
    persona.refresh_from_db()
    return persona


def update_persona(persona: Persona, **changes: Any) -> Persona:
    register_surfaces(persona.agent.owner, changes.get("human_surface_bindings"))
    with run_on_commit():
        services.persona_update(persona=persona, actor=persona.agent.owner, **changes)
    persona.refresh_from_db()
    return persona


def stop_standing(persona: Persona, *verbs: str) -> Persona:
    """The persona stops standing the one way left once a write to it cannot do that
    (VX-GRANT-4): its agent's grant narrows to leave out `verbs`, tools its class needs."""
    agent = persona.agent
    granted = [verb for verb in agent.granted_verbs if verb not in verbs]
    with run_on_commit():
        services.agent_update(agent=agent, actor=agent.owner, granted_verbs=granted)
    persona.refresh_from_db()
    return persona


def stamp_kwargs(
    persona_class: str = PersonaClass.CODER_DEPUTY, **overrides: Any
) -> dict[str, Any]:
    """Keyword arguments for stamps.factory.build_stamp: a persona of the class that stands."""
    path = overrides.pop("address", CLASS_ADDRESSES[PersonaClass(persona_class)])
    kwargs: dict[str, Any] = {
        "persona": PersonaIdentity(
            id="6f1c1b8e-3f5e-4a0e-9a57-2b7c6d8e9f01",
            name="Stamped",
            generation=1,
            owner="user:1",
            owning_lead=None,
        ),
        "base_composition_hash": "a" * 64,
        "address": path,
        "persona_class": persona_class,
        "graph_namespace": path,
        "human_surface_bindings": ["teams:general"],
        "workspace": workspace_binding_for(address=path, persona_class=persona_class),
        "verb_subset": standing_verbs(persona_class, *REVIEWER_VERBS),
        "queues": ["reviews"],
        "ask_first_verbs": [],
    }
    kwargs.update(overrides)
    return kwargs
