"""The admin as its tests drive it: an owner signed in, the persona form's URL and what "Save"
posts, and the headers every HTML management page must carry."""

from typing import Any

from django.http import HttpResponseBase
from django.test import Client

from personas.models import Persona
from tests.owner_clients import form_data


def change_url(persona: Persona) -> str:
    return f"/admin/personas/persona/{persona.pk}/change/"


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def saving(page: Any) -> dict[str, Any]:
    """The persona form as the browser posts it when "Save" is pressed."""
    return {**form_data(page, "persona_form"), "_save": "Save"}


def csp_directives(header: str) -> dict[str, str]:
    directives = (part.strip().split(None, 1) for part in header.split(";") if part.strip())
    return {name: value for name, value in directives}


def assert_secure_html(response: HttpResponseBase) -> None:
    """S9-HDR-1, S9-HDR-2, S9-HDR-3, S9-HDR-4 on an HTML management page."""
    assert response["Content-Type"].startswith("text/html")
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "strict-origin-when-cross-origin"
    assert csp_directives(response["Content-Security-Policy"])["default-src"] == "'self'"
