"""A scripted model on loopback that speaks the OpenAI Responses API as the Codex CLI uses it, so
that the real Codex CLI can be driven offline. Codex 0.171 ignores OPENAI_BASE_URL; it is pointed
here by a model provider of its own (which also keeps it from trying a WebSocket first, as it does
for the built-in `openai` provider):

    -c model_provider=scripted
    -c 'model_providers.scripted={name="scripted", base_url="<model.url>/v1",
        env_key="SCRIPTED_API_KEY", wire_api="responses"}'

The script is a list of turns, each either the tool calls of one response
(`[("mcp__virgo__workspace_list", {"path": ""})]`) or the final text. Codex offers an MCP server's
tools as one namespace (`mcp__virgo` holding `workspace_list`) and takes a call to one back only
as a function_call naming that namespace: a scripted name is split the same way, and results are
reported under the flat name again, so scripts and tests use Claude Code's `mcp__<server>__<tool>`.

A main request gets the turn numbered by the script's calls already in its conversation (each
call_id names its turn) rather than by a counter, so a retried request is answered the same way
again instead of skipping a turn. Main requests are the turns of the conversation: `POST
/v1/responses` whose turn metadata says `request_kind` "turn". Whatever else Codex asks of the
model gets a short text, leaves the script where it is, and is left out of `main_requests()`.
"""

import json
import re
import sys
import threading
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import count
from typing import Any, Self
from urllib.parse import urlsplit

type ToolCall = tuple[str, dict[str, Any]]
type Turn = list[ToolCall] | str

RESPONSES_PATH = "/v1/responses"
SIDE_ANSWER = "ok"
# Text, so that a CLI which outruns its script stops, and the result says why.
EXHAUSTED = "scripted model: the script has no turn left"
CALL_TYPES = ("function_call", "custom_tool_call")
OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output")
CALL_ID = re.compile(r"^call_scripted_t(\d+)_")


@dataclass(frozen=True)
class Recorded:
    """One request as received: header names lower-cased, `body` the parsed JSON or None."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes

    @property
    def turn_metadata(self) -> dict[str, Any]:
        """Codex's `x-codex-turn-metadata` header: what the request is for, and its session."""
        try:
            metadata = json.loads(self.headers.get("x-codex-turn-metadata", "{}"))
        except ValueError:
            return {}
        return metadata if isinstance(metadata, dict) else {}

    @property
    def is_main(self) -> bool:
        if self.method != "POST" or urlsplit(self.path).path != RESPONSES_PATH:
            return False
        if not isinstance(self.body, dict) or not isinstance(self.body.get("input"), list):
            return False
        return self.turn_metadata.get("request_kind", "turn") == "turn"

    def items(self) -> list[dict[str, Any]]:
        """The conversation the request carries: Codex keeps none on the server (`store` false),
        so every request repeats the whole history."""
        items = self.body.get("input", []) if isinstance(self.body, dict) else []
        return [item for item in items if isinstance(item, dict)]

    def tool_specs(self) -> list[dict[str, Any]]:
        """The tools offered as sent: a namespace holds the tools of one MCP server."""
        tools = self.body.get("tools") if isinstance(self.body, dict) else None
        specs = [tool for tool in tools or [] if isinstance(tool, dict)]
        # A model Codex's catalogue marks "responses lite" gets its tools in an input item.
        for item in self.items():
            if item.get("type") == "additional_tools":
                specs += [tool for tool in item.get("tools") or [] if isinstance(tool, dict)]
        return specs

    def tools_offered(self) -> dict[str, str]:
        """Each tool offered, by flat name (`<namespace>__<tool>` inside a namespace, the type
        of a hosted tool that has no name), with its type."""
        offered: dict[str, str] = {}
        for tool in self.tool_specs():
            if tool.get("type") == "namespace":
                for inner in tool.get("tools") or []:
                    offered[f"{tool['name']}__{inner['name']}"] = inner.get("type", "function")
            else:
                offered[tool.get("name") or tool["type"]] = tool["type"]
        return offered

    def namespaces(self) -> list[str]:
        return [tool["name"] for tool in self.tool_specs() if tool.get("type") == "namespace"]


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # The built-in provider drops its WebSocket attempts and their connections: not a fault
        # worth a traceback in the test's output.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class ScriptedOpenAI:
    """`with ScriptedOpenAI(script) as model:` serves on 127.0.0.1 until the block ends."""

    def __init__(self, script: list[Turn]) -> None:
        self.script = script
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._ids = count(1)
        self._server = _Server(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def main_requests(self) -> list[Recorded]:
        return [request for request in self.requests if request.is_main]

    def tool_names_offered(self) -> list[str]:
        """The flat names of the tools of every main request, each once: an MCP tool as
        `mcp__<server>__<tool>`, a hosted one (web_search) by its type. Compare as a set."""
        names = (name for request in self.main_requests() for name in request.tools_offered())
        return list(dict.fromkeys(names))

    def calls(self) -> list[dict[str, Any]]:
        """Each tool call the script made that the CLI answered, in order: its flat name and
        input beside the text of the output Codex sent back. Codex has no error flag: a tool it
        does not offer is refused in text, `unsupported call: <namespace><name>` (the two run
        together: `mcp__othertool`), and an MCP tool's own result (its structuredContent, as
        compact JSON, where it has one) follows a `Wall time: ... seconds\\nOutput:\\n`."""
        made: dict[str, dict[str, Any]] = {}
        outputs: dict[str, str] = {}
        for request in self.main_requests():
            for item in request.items():
                # Codex adds outputs of its own (a goal's objective) that answer no call.
                call_id = item.get("call_id")
                if not call_id:
                    continue
                if item.get("type") in CALL_TYPES:
                    made.setdefault(call_id, {"name": _flat(item), "input": _input(item)})
                elif item.get("type") in OUTPUT_TYPES:
                    outputs.setdefault(call_id, _text(item.get("output")))
        return [
            {**call, "output": outputs[call_id]}
            for call_id, call in made.items()
            if call_id in outputs
        ]

    def all_bodies_text(self) -> str:
        return "\n".join(request.raw.decode("utf-8", "replace") for request in self.requests)

    def _answer(self, request: Recorded) -> dict[str, Any]:
        body = request.body if isinstance(request.body, dict) else {}
        turn: Turn = SIDE_ANSWER
        done = 0
        if request.is_main:
            done = _turns_done(request)
            turn = self.script[done] if done < len(self.script) else EXHAUSTED
        if isinstance(turn, str):
            text = {"type": "output_text", "text": turn, "annotations": []}
            output = [
                {
                    "type": "message",
                    "id": self._id("msg"),
                    "role": "assistant",
                    "status": "completed",
                    "content": [text],
                }
            ]
        else:
            output = [self._call(request, done, name, arguments) for name, arguments in turn]
        return {
            "id": self._id("resp"),
            "object": "response",
            "created_at": int(time.time()),
            "status": "completed",
            "model": str(body.get("model", "scripted")),
            "output": output,
            "usage": {
                "input_tokens": 10,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 10,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 20,
            },
        }

    def _call(
        self, request: Recorded, turn: int, name: str, arguments: dict[str, Any]
    ) -> dict[str, Any]:
        call_id = f"call_scripted_t{turn}_{next(self._ids):04d}"
        namespace, inner = _split(name, request.namespaces())
        if request.tools_offered().get(name) == "custom":
            # A freeform tool (apply_patch, where a model's catalogue entry asks for it) takes
            # raw text, not JSON arguments.
            text = arguments.get("input")
            return {
                "type": "custom_tool_call",
                "id": self._id("ctc"),
                "call_id": call_id,
                "status": "completed",
                "name": inner,
                **({"namespace": namespace} if namespace else {}),
                "input": text if isinstance(text, str) else json.dumps(arguments),
            }
        return {
            "type": "function_call",
            "id": self._id("fc"),
            "call_id": call_id,
            "status": "completed",
            "name": inner,
            **({"namespace": namespace} if namespace else {}),
            "arguments": json.dumps(arguments),
        }

    def _id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}_scripted_{next(self._ids):04d}"

    def _record(self, request: Recorded) -> None:
        with self._lock:
            self.requests.append(request)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            # Keep-alive, as the API: the CLI's HTTP client reuses its connections.
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                request = self._receive()
                if urlsplit(self.path).path != RESPONSES_PATH:
                    self._not_found()
                elif isinstance(request.body, dict) and request.body.get("stream"):
                    self._stream(model._answer(request))
                else:
                    self._json(200, model._answer(request))

            def do_GET(self) -> None:
                # The built-in provider opens a WebSocket on GET /v1/responses first: a 404
                # sends it back to HTTPS.
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
                error = {
                    "message": f"Not found: {self.path}",
                    "type": "invalid_request_error",
                    "code": "not_found",
                }
                self._json(404, {"error": error})

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                self._send(status, "application/json", json.dumps(payload).encode())

            def _stream(self, response: dict[str, Any]) -> None:
                # The whole stream at once: the CLI parses events as they arrive either way.
                events = "".join(
                    f"event: {data['type']}\ndata: {json.dumps(data)}\n\n"
                    for data in _events(response)
                )
                self._send(200, "text/event-stream", events.encode())

            def _send(self, status: int, content_type: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("x-request-id", model._id("req"))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler


def _events(response: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The events the API streams for `response`: each output item is added empty, filled by one
    delta and done whole; Codex takes the finished item from `response.output_item.done`."""
    sequence = count()
    opening = {**response, "status": "in_progress", "output": [], "usage": None}
    yield {"type": "response.created", "sequence_number": next(sequence), "response": opening}
    for index, item in enumerate(response["output"]):
        where = {"output_index": index, "item_id": item["id"]}
        if item["type"] == "message":
            empty = {**item, "status": "in_progress", "content": []}
            delta = {"type": "response.output_text.delta", "content_index": 0}
            delta["delta"] = item["content"][0]["text"]
        elif item["type"] == "function_call":
            empty = {**item, "status": "in_progress", "arguments": ""}
            delta = {"type": "response.function_call_arguments.delta", "delta": item["arguments"]}
        else:
            empty = {**item, "status": "in_progress", "input": ""}
            delta = {"type": "response.custom_tool_call_input.delta", "delta": item["input"]}
        yield {
            "type": "response.output_item.added",
            "sequence_number": next(sequence),
            "output_index": index,
            "item": empty,
        }
        yield {**delta, **where, "sequence_number": next(sequence)}
        yield {
            "type": "response.output_item.done",
            "sequence_number": next(sequence),
            "output_index": index,
            "item": item,
        }
    yield {"type": "response.completed", "sequence_number": next(sequence), "response": response}


def _turns_done(request: Recorded) -> int:
    """How many of the script's turns the conversation already holds, by the turn each of its
    calls' call_id names."""
    done = 0
    for item in request.items():
        if item.get("type") not in CALL_TYPES:
            continue
        match = CALL_ID.match(str(item.get("call_id", "")))
        if match:
            done = max(done, int(match.group(1)) + 1)
    return done


def _split(name: str, namespaces: Collection[str]) -> tuple[str | None, str]:
    """The namespace and the name a call to the flat `name` goes back under: the longest
    namespace offered that prefixes it; else, for an MCP tool of a server that is not offered,
    the namespace that server's tools would have (a model that knows of it would use it)."""
    prefixes = [namespace for namespace in namespaces if name.startswith(f"{namespace}__")]
    if prefixes:
        namespace = max(prefixes, key=len)
        return namespace, name[len(namespace) + 2 :]
    parts = name.split("__")
    if len(parts) >= 3 and parts[0] == "mcp" and parts[1]:
        return f"mcp__{parts[1]}", "__".join(parts[2:])
    return None, name


def _flat(item: dict[str, Any]) -> str:
    namespace = item.get("namespace")
    return f"{namespace}__{item['name']}" if namespace else str(item["name"])


def _input(item: dict[str, Any]) -> Any:
    if item.get("type") == "custom_tool_call":
        return item.get("input", "")
    try:
        return json.loads(item.get("arguments") or "{}")
    except ValueError:
        return item.get("arguments")


def _text(output: Any) -> str:
    """A function_call_output's text: Codex sends a string, or content parts (input_text) where
    the tool's result has several."""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in output
            if isinstance(part, dict) and "text" in part
        )
    return json.dumps(output)
