"""HTTP clients signed in the ways owners sign in, and reading pages the way a browser does."""

from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any

import pytest
from django.core.cache import cache
from django.http import HttpResponseBase
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

PASSWORD = "correct horse battery staple"  # the factories' password for every owner


def token_client(user: Any) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def session_client(user: Any, *, enforce_csrf_checks: bool = True) -> APIClient:
    """A browser-like session: signed in with a password, CSRF enforced like a real request."""
    client = APIClient(enforce_csrf_checks=enforce_csrf_checks)
    assert client.login(username=user.get_username(), password=PASSWORD)
    return client


def csrf_token(client: APIClient) -> str:
    """The CSRF secret a page hands the browser (the admin index sets the cookie)."""
    client.get("/admin/")
    return client.cookies["csrftoken"].value


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> Iterator[None]:
    """Rate-limit counters live in the local-memory cache; each test starts with none."""
    cache.clear()
    yield
    cache.clear()


class _FormReader(HTMLParser):
    """What a browser would submit from one form of a page, and every URL the page loads."""

    def __init__(self, form_id: str | None) -> None:
        super().__init__(convert_charrefs=True)
        self.form_id = form_id
        self.in_form = form_id is None
        self.data: dict[str, list[str]] = {}
        self.urls: list[str] = []
        self._select: tuple[str, bool] | None = None
        self._select_first: str | None = None
        self._select_chosen = False
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = {name: value or "" for name, value in attrs}
        self.urls += [attr[name] for name in ("src", "href", "action") if attr.get(name)]
        if tag == "form" and attr.get("id") == self.form_id:
            self.in_form = True
        if not self.in_form or "name" not in attr:
            if tag == "option" and self._select is not None:
                self._option(attr)
            return
        name = attr["name"]
        if tag == "input":
            kind = attr.get("type", "text")
            if kind in ("submit", "button", "image", "file", "reset"):
                return
            if kind in ("checkbox", "radio") and "checked" not in attr:
                return
            default = "on" if kind in ("checkbox", "radio") else ""
            self.data.setdefault(name, []).append(attr.get("value", default))
        elif tag == "textarea":
            self._textarea = name
            self.data.setdefault(name, []).append("")
        elif tag == "select":
            self._select = (name, "multiple" in attr)
            self._select_first, self._select_chosen = None, False

    def _option(self, attr: dict[str, str]) -> None:
        assert self._select is not None
        name = self._select[0]
        if self._select_first is None:
            self._select_first = attr.get("value", "")
        if "selected" in attr:
            self._select_chosen = True
            self.data.setdefault(name, []).append(attr.get("value", ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "form" and self.form_id is not None:
            self.in_form = False
        elif tag == "textarea":
            self._textarea = None
        elif tag == "select" and self._select is not None:
            name, multiple = self._select
            if not multiple and not self._select_chosen and self._select_first is not None:
                self.data.setdefault(name, []).append(self._select_first)
            self._select = None

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self.data[self._textarea][-1] += data.removeprefix("\n")


def form_data(response: HttpResponseBase, form_id: str | None) -> dict[str, Any]:
    """The fields of form `form_id` (None: of every form) on the page as a browser would post
    them (lists for multiple values)."""
    reader = _FormReader(form_id)
    reader.feed(response.content.decode())
    return {name: values if len(values) > 1 else values[0] for name, values in reader.data.items()}


def loaded_urls(response: HttpResponseBase) -> list[str]:
    """Every src, href and action on the page."""
    reader = _FormReader(None)
    reader.feed(response.content.decode())
    return reader.urls
