"""Revocation as its tests make it (VX-TRUST-5): a revocation by an actor, a moderator, and the
card URL's answer."""

from typing import Any

from django.contrib.auth import get_user_model
from django.test import Client

from personas.models import Persona
from personas.services import persona_revoke
from tests.factories import run_on_commit


def revoke(persona: Persona, actor: Any, **kwargs: Any) -> Any:
    kwargs.setdefault("reason_code", "compromised")
    kwargs.setdefault("reason", "its host was broken into")
    kwargs.setdefault("via", "test")
    with run_on_commit():
        return persona_revoke(persona=persona, actor=actor, **kwargs)


def moderator() -> Any:
    return get_user_model().objects.create_superuser("moderator", password="x" * 20)


def get_card(persona: Persona, client: Client | None = None) -> Any:
    return (client or Client()).get(persona.card_path)
