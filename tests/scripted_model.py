"""A scripted model on loopback that speaks the Anthropic Messages API, so that the real Claude
Code CLI can be driven offline: give it ANTHROPIC_BASE_URL=<model.url>.

The script is a list of turns, each either the tool calls of one assistant message
(`[("mcp__virgo__echo", {"text": "hi"})]`) or the final text. A main request gets the turn
numbered by the assistant messages already in its conversation rather than by a counter, so a
retried request is answered the same way again instead of skipping a turn.

Main requests are the turns of the conversation itself. Claude Code also makes requests of its
own (a quota probe, titles, token counts, the prompt suggestion after the last turn): they get
a short text, leave the script where it is, and are left out of `main_requests()`.
"""

import json
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from tests.scripted_server import ScriptedServer, Turn

SIDE_ANSWER = "ok"
# Text, so that a CLI which outruns its script stops, and the result says why.
EXHAUSTED = "scripted model: the script has no turn left"


@dataclass(frozen=True)
class Recorded:
    """One request as received: header names lower-cased, `body` the parsed JSON or None."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes

    @property
    def is_main(self) -> bool:
        if self.method != "POST" or urlsplit(self.path).path != "/v1/messages":
            return False
        if not isinstance(self.body, dict) or "tools" not in self.body:
            return False
        # A fork of the conversation (the prompt suggestion) carries the same tools and history,
        # so it is told apart by its last user turn: the conversation's are the prompt, then
        # only tool results.
        users = [m for m in self.body.get("messages", []) if m.get("role") == "user"]
        if len(users) <= 1:
            return len(users) == 1
        return any(
            isinstance(block, dict) and block.get("type") == "tool_result"
            for block in _blocks(users[-1])
        )


class ScriptedAnthropic(ScriptedServer):
    """`with ScriptedAnthropic(script) as model:` serves on 127.0.0.1 until the block ends."""

    requests: list[Recorded]

    def tool_names_offered(self) -> list[str]:
        """The `tools[].name` of every main request, each once. The CLI's order varies from run
        to run, so compare as a set; Claude Code 2.1 adds `DeferredToolPlaceholder`
        (defer_loading, not callable) whenever an MCP tool is offered."""
        names = (tool["name"] for request in self.main_requests() for tool in request.body["tools"])
        return list(dict.fromkeys(names))

    def tool_results(self) -> list[dict[str, Any]]:
        """Each tool_result the CLI sent back, once (every later request repeats the history):
        tool_use_id, is_error and the text of its content."""
        results: dict[str, dict[str, Any]] = {}
        for request in self.main_requests():
            for message in request.body.get("messages", []):
                if message.get("role") != "user":
                    continue
                for block in _blocks(message):
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        results.setdefault(block["tool_use_id"], _result(block))
        return list(results.values())

    def calls(self) -> list[dict[str, Any]]:
        """Each tool call the script made that the CLI answered, in order: its name and input
        beside the result's is_error and text."""
        uses: dict[str, dict[str, Any]] = {}
        for request in self.main_requests():
            for message in request.body.get("messages", []):
                if message.get("role") != "assistant":
                    continue
                for block in _blocks(message):
                    if isinstance(block, dict) and block.get("type") == "tool_use":
                        call = {"name": block["name"], "input": block["input"]}
                        uses.setdefault(block["id"], call)
        return [
            {**uses[result["tool_use_id"]], **result}
            for result in self.tool_results()
            if result["tool_use_id"] in uses
        ]

    def _answer(self, request: Recorded) -> dict[str, Any]:
        body = request.body if isinstance(request.body, dict) else {}
        turn: Turn = SIDE_ANSWER
        if request.is_main:
            done = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
            turn = self.script[done] if done < len(self.script) else EXHAUSTED
        if isinstance(turn, str):
            content = [{"type": "text", "text": turn}]
            stop_reason = "end_turn"
        else:
            content = [
                {"type": "tool_use", "id": self._id("toolu"), "name": name, "input": arguments}
                for name, arguments in turn
            ]
            stop_reason = "tool_use"
        return {
            "id": self._id("msg"),
            "type": "message",
            "role": "assistant",
            "model": str(body.get("model", "claude-scripted")),
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 10},
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            # Keep-alive, as the API: the CLI's HTTP client reuses its connections.
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                request = self._receive()
                path = urlsplit(self.path).path
                if path == "/v1/messages/count_tokens":
                    self._json(200, {"input_tokens": 10})
                elif path != "/v1/messages":
                    self._not_found()
                elif isinstance(request.body, dict) and request.body.get("stream"):
                    self._stream(model._answer(request))
                else:
                    self._json(200, model._answer(request))

            def do_GET(self) -> None:
                self._receive()
                self._not_found()

            def _receive(self) -> Recorded:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                headers = {name.lower(): value for name, value in self.headers.items()}
                request = Recorded(self.command, self.path, headers, body, raw)
                model._record(request)
                return request

            def _not_found(self) -> None:
                error = {"type": "not_found_error", "message": f"Not found: {self.path}"}
                self._json(404, {"type": "error", "error": error})

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                self._send(status, "application/json", json.dumps(payload).encode())

            def _stream(self, message: dict[str, Any]) -> None:
                # The whole stream at once: the CLI parses events as they arrive either way.
                events = "".join(
                    f"event: {data['type']}\ndata: {json.dumps(data)}\n\n"
                    for data in _events(message)
                )
                self._send(200, "text/event-stream", events.encode())

            def _send(self, status: int, content_type: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("request-id", model._id("req"))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler


def _events(message: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The events the API streams for `message`: each block opens empty and is filled by one
    delta; a tool_use block's input arrives as input_json_delta, a JSON fragment."""
    opening = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"]}}
    opening["usage"]["output_tokens"] = 1
    yield {"type": "message_start", "message": opening}
    yield {"type": "ping"}
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            empty = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            empty = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield {"type": "content_block_start", "index": index, "content_block": empty}
        yield {"type": "content_block_delta", "index": index, "delta": delta}
        yield {"type": "content_block_stop", "index": index}
    yield {
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": message["usage"]["output_tokens"]},
    }
    yield {"type": "message_stop"}


def _blocks(message: dict[str, Any]) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def _result(block: dict[str, Any]) -> dict[str, Any]:
    content = block.get("content", "")
    if isinstance(content, list):
        content = "\n".join(part.get("text", "") for part in content if part.get("type") == "text")
    return {
        "tool_use_id": block["tool_use_id"],
        "is_error": bool(block.get("is_error", False)),
        "text": content,
    }
