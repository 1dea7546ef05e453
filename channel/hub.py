"""A reference hub speaking the virgo-channel protocol (docs/channel.md), for tests and development.

A real HTTP server on loopback (the standard library's ThreadingHTTPServer) with its state in
memory. It reaches no real human surface: messages, cards, reactions and confirmations are kept
so that a test (or a developer) can look at what arrived, simulate the human side (a human's
message, a deleted message, an approve or deny press) and inject transport faults. It honours
the protocol's rules the way a production hub must: bearer credential, Idempotency-Key required
on every request, the first answer per (route, key) stored and replayed, never applied twice.

Run one by hand: `python -m channel.hub --port 8765 --surface teams:chat/ops` (the credential and
the callback secret come from VIRGO_CHANNEL_TOKEN and VIRGO_CHANNEL_SECRET).
"""

import argparse
import base64
import binascii
import hashlib
import itertools
import json
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from channel.signing import HEADER as SIGNATURE_HEADER
from channel.signing import sign

PERSONA_MAILBOX = "virgo:persona/"
MAX_BODY = 32 * 1024 * 1024
DEFAULT_REACTIONS = (
    {"id": "like", "label": "👍"},
    {"id": "heart", "label": "❤️"},
    {"id": "laugh", "label": "😆"},
    {"id": "surprised", "label": "😮"},
    {"id": "sad", "label": "😢"},
    {"id": "angry", "label": "😠"},
)

Answer = tuple[int, dict[str, Any]]


@dataclass
class Fault:
    """A transport fault injected on one route.

    error: answer 500 and apply nothing. echo: answer 500 with the request's Authorization header
    in the body (a careless hub). delay: apply, then answer `seconds` late. drop: apply, then
    close the socket in the middle of the response.
    """

    route: str
    mode: str
    times: int | None = None
    seconds: float = 0.0


@dataclass
class Received:
    method: str
    route: str
    path: str
    idempotency_key: str | None
    authorization: str | None
    body: dict[str, Any] | None


@dataclass
class Hub:
    token: str = ""
    host: str = "127.0.0.1"
    port: int = 0
    surfaces: dict[str, str] = field(default_factory=dict)
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    confirmations: dict[str, dict[str, Any]] = field(default_factory=dict)
    reactions: list[dict[str, Any]] = field(default_factory=list)
    typing: dict[str, bool] = field(default_factory=dict)
    applications: Counter[str] = field(default_factory=Counter)
    received: list[Received] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        self._stored: dict[tuple[str, str], tuple[str, Answer]] = {}
        self._faults: list[Fault] = []
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # Life cycle -------------------------------------------------------------------------------

    def start(self) -> "Hub":
        self._server = ThreadingHTTPServer((self.host, self.port), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> "Hub":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "the hub is not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # The human side and the test's levers ------------------------------------------------------

    def add_surface(self, binding: str, state: str = "connected") -> None:
        self.surfaces[binding] = state

    def human_message(self, binding: str, text: str) -> str:
        """A message a human wrote on a surface, which a persona may then answer or react to."""
        message_id = self._new_id("h")
        self.messages[message_id] = {"binding": binding, "text": text, "from": "human"}
        return message_id

    def delete_message(self, message_id: str) -> None:
        self.messages[message_id]["gone"] = True

    def fail(self, route: str, mode: str, *, times: int | None = None, seconds: float = 0) -> None:
        self._faults.append(Fault(route, mode, times, seconds))

    def clear_faults(self) -> None:
        self._faults.clear()

    def count(self, route: str) -> int:
        """How many times the hub really carried out `route` (replays are not counted)."""
        return self.applications[route]

    def signed_answer(
        self, correlation_id: str, decision: str, principal: dict[str, str], *, secret: str
    ) -> tuple[bytes, dict[str, str]]:
        """The callback a press of approve/deny produces: its body and headers, signed."""
        body = json.dumps(
            {
                "correlation_id": correlation_id,
                "decision": decision,
                "principal": principal,
                "message_id": self.confirmations[correlation_id]["message_id"],
            }
        ).encode()
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: sign(secret=secret, body=body),
        }
        return body, headers

    def answer(
        self, correlation_id: str, decision: str, principal: dict[str, str], *, secret: str
    ) -> httpx.Response:
        """Send the signed answer to the callback URL the confirmation request named."""
        body, headers = self.signed_answer(correlation_id, decision, principal, secret=secret)
        url = self.confirmations[correlation_id]["request"]["callback"]["url"]
        return httpx.post(url, content=body, headers=headers, timeout=30)

    # Dispatch ---------------------------------------------------------------------------------

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    def _take_fault(self, route: str) -> Fault | None:
        with self.lock:
            for fault in self._faults:
                if fault.route == route:
                    if fault.times is not None:
                        fault.times -= 1
                        if fault.times <= 0:
                            self._faults.remove(fault)
                    return fault
        return None

    def apply(self, route: str, key: str, fingerprint: str, run: Callable[[], Answer]) -> Answer:
        """Carry out a request once per (route, key); a repeat gets the stored answer."""
        with self.lock:
            stored = self._stored.get((route, key))
            if stored is not None:
                if stored[0] != fingerprint:
                    return 422, {"error": "idempotency_key_reused"}
                return stored[1]
            answer = run()
            if answer[0] < 500:
                self._stored[(route, key)] = (fingerprint, answer)
            if answer[0] < 300:
                self.applications[route] += 1
            return answer

    def _surface(self, binding: object) -> Answer | None:
        if not isinstance(binding, str) or not binding:
            return 400, {"error": "binding_required"}
        if binding.startswith(PERSONA_MAILBOX):
            return None
        state = self.surfaces.get(binding)
        if state is None:
            return 404, {"error": "unknown_binding"}
        if state != "connected":
            return 409, {"error": "surface_disconnected"}
        return None

    def _target(self, binding: str, message_id: str) -> tuple[dict[str, Any] | None, str | None]:
        message = self.messages.get(message_id)
        if message is None or message["binding"] != binding:
            return None, "message_not_found"
        if message.get("gone"):
            return message, "message_gone"
        return message, None

    def route_send(self, body: dict[str, Any], **_: str) -> Answer:
        if problem := self._surface(body.get("binding")):
            return problem
        if not isinstance(body.get("text"), str) or not body["text"]:
            return 400, {"error": "text_required"}
        message_id = self._new_id("m")
        self.messages[message_id] = {
            "binding": body["binding"],
            "text": body["text"],
            "from": "persona",
        }
        return 201, {"message_id": message_id, "binding": body["binding"]}

    def route_reply(self, body: dict[str, Any], message: str) -> Answer:
        if problem := self._surface(body.get("binding")):
            return problem
        _, missing = self._target(body["binding"], message)
        if missing:
            return (410 if missing == "message_gone" else 404), {"error": missing}
        message_id = self._new_id("m")
        self.messages[message_id] = {
            "binding": body["binding"],
            "text": body.get("text", ""),
            "from": "persona",
            "in_reply_to": message,
        }
        return 201, {"message_id": message_id, "in_reply_to": message}

    def route_ack(self, body: dict[str, Any], message: str) -> Answer:
        if problem := self._surface(body.get("binding")):
            return problem
        target, missing = self._target(body["binding"], message)
        if missing or target is None:
            return (410 if missing == "message_gone" else 404), {"error": missing}
        target["acknowledged"] = True
        return 200, {"acknowledged": True, "message_id": message}

    def route_react(self, body: dict[str, Any], message: str) -> Answer:
        if problem := self._surface(body.get("binding")):
            return problem
        if body.get("reaction") not in {r["id"] for r in DEFAULT_REACTIONS}:
            return 200, {"applied": False, "reason": "unknown_reaction"}
        _, missing = self._target(body["binding"], message)
        if missing:
            return 200, {"applied": False, "reason": missing}
        self.reactions.append({"message_id": message, "reaction": body["reaction"]})
        return 200, {"applied": True, "message_id": message, "reaction": body["reaction"]}

    def route_typing(self, body: dict[str, Any], **_: str) -> Answer:
        if problem := self._surface(body.get("binding")):
            return problem
        if body.get("state") not in ("start", "stop"):
            return 400, {"error": "state_must_be_start_or_stop"}
        self.typing[body["binding"]] = body["state"] == "start"
        return 200, {"typing": self.typing[body["binding"]], "binding": body["binding"]}

    def route_card(self, body: dict[str, Any], **_: str) -> Answer:
        return self._post_item(body, "card")

    def route_todo(self, body: dict[str, Any], **_: str) -> Answer:
        return self._post_item(body, "todo")

    def _post_item(self, body: dict[str, Any], kind: str) -> Answer:
        if problem := self._surface(body.get("binding")):
            return problem
        item = body.get(kind)
        if not isinstance(item, dict) or not item.get("title"):
            return 400, {"error": f"{kind}_title_required"}
        message_id = self._new_id("m")
        self.messages[message_id] = {"binding": body["binding"], kind: item, "from": "persona"}
        return 201, {"message_id": message_id, "binding": body["binding"]}

    def route_file(self, body: dict[str, Any], **_: str) -> Answer:
        if problem := self._surface(body.get("binding")):
            return problem
        file = body.get("file") or {}
        try:
            data = base64.b64decode(file.get("content_base64", ""), validate=True)
        except (binascii.Error, TypeError):
            return 400, {"error": "content_not_base64"}
        if len(data) != file.get("size") or hashlib.sha256(data).hexdigest() != file.get("sha256"):
            return 422, {"error": "file_digest_mismatch"}
        message_id = self._new_id("m")
        self.messages[message_id] = {
            "binding": body["binding"],
            "file": {**{k: v for k, v in file.items() if k != "content_base64"}, "data": data},
            "from": "persona",
        }
        return 201, {"message_id": message_id, "file_id": f"f-{message_id}"}

    def route_confirmation(self, body: dict[str, Any], **_: str) -> Answer:
        if problem := self._surface(body.get("binding")):
            return problem
        correlation_id = body.get("correlation_id")
        if not isinstance(correlation_id, str) or not isinstance(body.get("callback"), dict):
            return 400, {"error": "correlation_id_and_callback_required"}
        message_id = self._new_id("c")
        self.confirmations[correlation_id] = {"message_id": message_id, "request": body}
        return 201, {"message_id": message_id, "binding": body["binding"]}

    def route_reactions(self, query: dict[str, list[str]], **_: str) -> Answer:
        binding = (query.get("binding") or [""])[0]
        if problem := self._surface(binding):
            return problem
        return 200, {"binding": binding, "reactions": list(DEFAULT_REACTIONS)}

    def route_status(self, query: dict[str, list[str]], **_: str) -> Answer:
        surfaces = [
            {"binding": binding, "state": self.surfaces.get(binding, "unknown")}
            for binding in query.get("binding", [])
        ]
        return 200, {"hub": "ok", "surfaces": surfaces}


_ROUTES: tuple[tuple[str, re.Pattern[str], str], ...] = tuple(
    (method, re.compile(pattern), name)
    for method, pattern, name in (
        ("POST", r"^/v1/messages$", "send"),
        ("POST", r"^/v1/messages/(?P<message>[^/]+)/replies$", "reply"),
        ("POST", r"^/v1/messages/(?P<message>[^/]+)/ack$", "ack"),
        ("POST", r"^/v1/messages/(?P<message>[^/]+)/reactions$", "react"),
        ("POST", r"^/v1/typing$", "typing"),
        ("POST", r"^/v1/cards$", "card"),
        ("POST", r"^/v1/todos$", "todo"),
        ("POST", r"^/v1/files$", "file"),
        ("POST", r"^/v1/confirmations$", "confirmation"),
        ("GET", r"^/v1/reactions$", "reactions"),
        ("GET", r"^/v1/status$", "status"),
    )
)


def _route(method: str, path: str) -> tuple[str, dict[str, str]] | None:
    for route_method, pattern, name in _ROUTES:
        match = pattern.match(path)
        if match and route_method == method:
            return name, match.groupdict()
    return None


def _handler_for(hub: Hub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: tests read the hub's state, not its access log."""

        def do_GET(self) -> None:
            self._dispatch("GET")

        def do_POST(self) -> None:
            self._dispatch("POST")

        def _dispatch(self, method: str) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                self._send(413, {"error": "body_too_large"})
                return
            raw = self.rfile.read(length) if length else b""
            found = _route(method, url.path)
            if found is None:
                self._send(404, {"error": "no_such_route"})
                return
            name, arguments = found
            body: dict[str, Any] | None = None
            if method == "POST":
                try:
                    parsed = json.loads(raw or b"null")
                except ValueError:
                    parsed = None
                if not isinstance(parsed, dict):
                    self._send(400, {"error": "body_must_be_a_json_object"})
                    return
                body = parsed
            key = self.headers.get("Idempotency-Key")
            authorization = self.headers.get("Authorization")
            with hub.lock:
                hub.received.append(Received(method, name, url.path, key, authorization, body))
            if hub.token and authorization != f"Bearer {hub.token}":
                self._send(401, {"error": "unauthorized"})
                return
            if not key:
                self._send(400, {"error": "idempotency_key_required"})
                return
            fault = hub._take_fault(name)
            if fault is not None and fault.mode == "error":
                self._send(500, {"error": "hub_failure"})
                return
            if fault is not None and fault.mode == "echo":
                self._send(500, {"error": "hub_failure", "request_authorization": authorization})
                return
            fingerprint = hashlib.sha256(f"{method} {self.path} ".encode() + raw).hexdigest()
            handler = getattr(hub, f"route_{name}")
            if method == "GET":
                status, payload = hub.apply(
                    name, key, fingerprint, lambda: handler(parse_qs(url.query), **arguments)
                )
            else:
                status, payload = hub.apply(
                    name, key, fingerprint, lambda: handler(body, **arguments)
                )
            if fault is not None and fault.mode == "delay":
                time.sleep(fault.seconds)
            if fault is not None and fault.mode == "drop":
                self._drop(status)
                return
            self._send(status, payload)

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def _drop(self, status: int) -> None:
            """Start a response, then hang up: the connection is lost mid-response."""
            try:
                self.wfile.write(
                    f"HTTP/1.1 {status} OK\r\nContent-Type: application/json\r\n"
                    'Content-Length: 4096\r\n\r\n{"mess'.encode()
                )
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Reference virgo-channel hub (development only)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--surface", action="append", default=[], help="a binding to accept")
    options = parser.parse_args(argv)
    hub = Hub(token=os.environ.get("VIRGO_CHANNEL_TOKEN", ""), host=options.host, port=options.port)
    for binding in options.surface:
        hub.add_surface(binding)
    hub.start()
    print(f"virgo-channel reference hub on {hub.url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        hub.stop()


if __name__ == "__main__":
    main()
