"""Request bodies are bounded at 64 KiB before anything reads them (SPEC-0009 body limits).

An echo view in this module's own URLconf shows what a view downstream of the middleware
receives; the card endpoint and the persona API are exercised through the real URLconf.
"""

import hashlib
import io
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.core.cache import cache
from django.http import HttpRequest, JsonResponse
from django.test import Client
from django.urls import path
from django.views.decorators.csrf import csrf_exempt
from rest_framework.authtoken.models import Token

from personas.models import Persona
from tests.factories import make_agent, make_owner, make_persona

pytestmark = pytest.mark.django_db

LIMIT = 64 * 1024


@csrf_exempt
def echo(request: HttpRequest) -> JsonResponse:
    body = request.body
    return JsonResponse({"length": len(body), "sha256": hashlib.sha256(body).hexdigest()})


urlpatterns = [path("echo/", echo)]


@pytest.fixture(autouse=True)
def fresh_rate_limits() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


def digest(body: bytes) -> dict[str, Any]:
    return {"length": len(body), "sha256": hashlib.sha256(body).hexdigest()}


def send(body: io.BytesIO, **environ: Any) -> Any:
    """POST with the given input stream and environ, as a WSGI server would hand them over."""
    return Client().generic("POST", "/echo/", **{"wsgi.input": body, **environ})


def chunked(body: bytes) -> dict[str, Any]:
    """A chunked request from a server that ends the input at the end of the body (granian)."""
    return {
        "wsgi.input": io.BytesIO(body),
        "HTTP_TRANSFER_ENCODING": "chunked",
        "wsgi.input_terminated": True,
    }


@pytest.mark.urls(__name__)
def test_a_declared_length_over_the_limit_gets_413_without_reading_the_body() -> None:
    """S9-BODY-1: 64 KiB + 1 declared: refused, and not one byte of the stream consumed."""
    stream = io.BytesIO(b"x" * (LIMIT + 1))
    response = send(stream, CONTENT_LENGTH=str(LIMIT + 1), CONTENT_TYPE="text/plain")
    assert response.status_code == 413
    assert json.loads(response.content)["code"] == "payload_too_large"
    assert stream.tell() == 0


@pytest.mark.urls(__name__)
def test_a_body_of_exactly_the_limit_arrives_whole() -> None:
    """S9-BODY-1: the limit is inclusive."""
    body = bytes(range(256)) * (LIMIT // 256)
    response = Client().post("/echo/", data=body, content_type="application/octet-stream")
    assert response.status_code == 200
    assert json.loads(response.content) == digest(body)


@pytest.mark.urls(__name__)
@pytest.mark.parametrize("length", ["-1", "lots"])
def test_a_malformed_content_length_is_a_400(length: str) -> None:
    response = send(io.BytesIO(b"{}"), CONTENT_LENGTH=length)
    assert response.status_code == 400
    assert json.loads(response.content)["code"] == "bad_length"


@pytest.mark.urls(__name__)
def test_a_chunked_body_over_the_limit_gets_413() -> None:
    """S9-BODY-1: without a declared length the body is counted, and refused past 64 KiB."""
    environ = chunked(b"y" * (LIMIT + 1))
    response = Client().generic("POST", "/echo/", **environ)
    assert response.status_code == 413
    assert json.loads(response.content)["code"] == "payload_too_large"


@pytest.mark.urls(__name__)
def test_a_chunked_body_under_the_limit_arrives_intact_not_empty() -> None:
    """S9-BODY-1: the counted bytes are the body the view reads: same length, same hash."""
    body = b"".join(i.to_bytes(4, "big") for i in range(10_000))
    response = Client().generic("POST", "/echo/", **chunked(body))
    assert response.status_code == 200
    assert json.loads(response.content) == digest(body)
    assert json.loads(response.content)["length"] == 40_000


@pytest.mark.urls(__name__)
def test_a_chunked_body_on_a_server_that_cannot_frame_it_gets_411() -> None:
    """S9-BODY-1: where the input stream does not end with the body, reading would see
    nothing; the request is refused rather than handed on with an empty body."""
    environ = {"wsgi.input": io.BytesIO(b'{"a": 1}'), "HTTP_TRANSFER_ENCODING": "chunked"}
    response = Client().generic("POST", "/echo/", **environ)
    assert response.status_code == 411
    assert json.loads(response.content)["code"] == "length_required"


def test_a_chunked_get_on_the_card_endpoint_is_refused() -> None:
    """S9-BODY-1: the card endpoint accepts no body, chunked ones included."""
    persona = make_persona(make_agent(make_owner()), discoverable=True)
    response = Client().generic(
        "GET", f"/a/{persona.uuid}/.well-known/agent-card.json", **chunked(b"hello")
    )
    assert response.status_code == 413
    assert json.loads(response.content)["code"] == "body_not_accepted"


@pytest.mark.parametrize("signed_in", ["session", "token"])
def test_a_70_kib_persona_update_gets_413_and_changes_nothing(signed_in: str) -> None:
    """S9-BODY-1: the owner's own PATCH with a 70 KiB system prompt is refused before
    authentication, routing or parsing, and the persona is exactly as it was."""
    owner = make_owner("ada")
    persona = make_persona(make_agent(owner), discoverable=True)
    before = Persona.objects.filter(pk=persona.pk).values().get()
    client = Client()
    headers: dict[str, str] = {}
    if signed_in == "session":
        client.force_login(owner)
    else:
        headers["Authorization"] = f"Token {Token.objects.create(user=owner).key}"
    body = json.dumps({"system_prompt": "p" * (70 * 1024)})
    response = client.patch(
        f"/api/personas/{persona.uuid}/",
        data=body,
        content_type="application/json",
        headers=headers,
    )
    assert response.status_code == 413
    assert json.loads(response.content)["code"] == "payload_too_large"
    assert Persona.objects.filter(pk=persona.pk).values().get() == before


@pytest.mark.live
def test_a_real_server_never_hands_on_a_chunked_body_as_empty(live_server: Any) -> None:
    """S9-BODY-1: Django's development server cannot frame chunked input; a chunked POST is
    answered 411 instead of reaching a view with an empty body."""

    def chunks() -> Iterator[bytes]:
        yield b'{"system_prompt": '
        yield b'"hello"}'

    response = httpx.post(
        f"{live_server.url}/api/personas/",
        content=chunks(),
        headers={"Content-Type": "application/json"},
    )
    assert response.request.headers["Transfer-Encoding"] == "chunked"
    assert response.status_code == 411
    assert response.json()["code"] == "length_required"
    assert response.headers["X-Frame-Options"] == "DENY"
