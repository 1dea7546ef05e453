"""A scripted model on loopback that speaks the Gemini API as Gemini CLI uses it, so that the real
CLI can be driven offline: give it GOOGLE_GEMINI_BASE_URL=<model.url>, GEMINI_API_KEY=<anything>
and the `gemini-api-key` auth type in its settings (with the base URL alone it picks a `gateway`
auth type that 0.61 refuses).

The script is a list of turns, each either the function calls of one model turn
(`[("mcp_virgo_echo", {"text": "hi"})]`) or the final text. A main request gets the turn
numbered by the model turns already in its history rather than by a counter, so a retried
request is answered the same way again instead of skipping a turn.

Main requests are the turns of the conversation itself, which the CLI always streams
(`:streamGenerateContent?alt=sse`; so would a subagent, which a confined CLI never runs). Its
side requests (the routing classifier, next-speaker checks, loop detection, compression,
summaries) are `:generateContent` calls, most asking for JSON of a given schema: they get the
most harmless value the schema allows, leave the script where it is, and are left out of
`main_requests()`.
"""

import json
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from tests.scripted_server import ScriptedServer, Turn

SIDE_ANSWER = "ok"
# Text, so that a CLI which outruns its script stops, and the result says why.
EXHAUSTED = "scripted model: the script has no turn left"
STREAM = ":streamGenerateContent"
USAGE = {"promptTokenCount": 10, "candidatesTokenCount": 10, "totalTokenCount": 20}
UNTRUSTED_OPEN = "<untrusted_context>\n"
UNTRUSTED_CLOSE = "\n</untrusted_context>"
TOOL_ERROR = " reported tool error for function call: "
TOOL_ERROR_RESPONSE = " with response: "


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
        return (
            self.method == "POST"
            and urlsplit(self.path).path.endswith(STREAM)
            and isinstance(self.body, dict)
            and isinstance(self.body.get("contents"), list)
        )

    @property
    def function_names(self) -> list[str]:
        """The functionDeclarations names this request offers, in its order."""
        body = self.body if isinstance(self.body, dict) else {}
        return [
            declaration["name"]
            for tool in body.get("tools") or []
            for declaration in tool.get("functionDeclarations") or []
        ]


class ScriptedGemini(ScriptedServer):
    """`with ScriptedGemini(script) as model:` serves on 127.0.0.1 until the block ends."""

    requests: list[Recorded]

    def tool_names_offered(self) -> list[str]:
        """The functionDeclarations names of every main request, each once, in first-seen order
        (compare as a set; each request's own list is `Recorded.function_names`)."""
        names = (name for request in self.main_requests() for name in request.function_names)
        return list(dict.fromkeys(names))

    def calls(self) -> list[dict[str, Any]]:
        """Each functionCall the script made that the CLI answered, in order: its name and input
        beside the functionResponse's `response` object and its text (`output`, else `error`,
        else the whole object as JSON), `content` that text as the MCP server returned it, and
        `is_error` when the CLI answered with an error (an unknown tool: `Tool "x" not found`)."""
        answered: dict[tuple[int, int], dict[str, Any]] = {}
        for request in self.main_requests():
            contents = request.body["contents"]
            for index, content in enumerate(contents):
                if content.get("role") != "model" or index + 1 >= len(contents):
                    continue
                calls = [part["functionCall"] for part in _parts(content) if "functionCall" in part]
                responses = [
                    part["functionResponse"]
                    for part in _parts(contents[index + 1])
                    if "functionResponse" in part
                ]
                for position, call in enumerate(calls):
                    response = _matching(call, position, responses)
                    if response is not None:
                        answered.setdefault((index, position), _call(call, response))
        return [answered[key] for key in sorted(answered)]

    def _turn(self, request: Recorded) -> Turn:
        done = sum(1 for content in request.body["contents"] if content.get("role") == "model")
        return self.script[done] if done < len(self.script) else EXHAUSTED

    def _main_answer(self, request: Recorded) -> dict[str, Any]:
        turn = self._turn(request)
        if isinstance(turn, str):
            parts: list[dict[str, Any]] = [{"text": turn}]
        else:
            parts = [
                {"functionCall": {"id": self._id("call"), "name": name, "args": arguments}}
                for name, arguments in turn
            ]
        return _response(parts, _model(request))

    def _side_answer(self, request: Recorded) -> dict[str, Any]:
        body = request.body if isinstance(request.body, dict) else {}
        config = body.get("generationConfig") or {}
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        text = json.dumps(_harmless(schema)) if isinstance(schema, dict) else SIDE_ANSWER
        return _response([{"text": text}], _model(request))

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            # Keep-alive, as the API: the CLI's HTTP client reuses its connections.
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                request = self._receive()
                path = urlsplit(self.path).path
                if request.is_main:
                    self._stream(model._main_answer(request))
                elif path.endswith(STREAM):
                    self._stream(model._side_answer(request))
                elif path.endswith(":generateContent"):
                    self._json(200, model._side_answer(request))
                elif path.endswith(":countTokens"):
                    self._json(200, {"totalTokens": USAGE["promptTokenCount"]})
                else:
                    self._not_found()

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
                message = f"Not found: {self.path}"
                self._json(404, {"error": {"code": 404, "message": message, "status": "NOT_FOUND"}})

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                self._send(status, "application/json", json.dumps(payload).encode())

            def _stream(self, response: dict[str, Any]) -> None:
                # One event holding the whole turn, finishReason and usage included: the CLI
                # reads a turn the same way however the API splits it.
                event = f"data: {json.dumps(response)}\r\n\r\n"
                self._send(200, "text/event-stream", event.encode())

            def _send(self, status: int, content_type: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        return Handler


def _response(parts: list[dict[str, Any]], model: str) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": USAGE,
        "modelVersion": model,
    }


def _model(request: Recorded) -> str:
    # .../models/<model>:<method>
    return urlsplit(request.path).path.rpartition("/")[2].partition(":")[0] or "gemini-scripted"


def _harmless(schema: dict[str, Any]) -> Any:
    """A value of `schema` that changes nothing: the next speaker is the user (the CLI would
    otherwise carry on by itself), a number is 0 (no loop suspected) and an integer 1 (the
    router's complexity score counts from 1, unsaid in its schema), a string is "ok"."""
    kind = str(schema.get("type", "object")).lower()
    if "enum" in schema:
        values = list(schema["enum"])
        return "user" if "user" in values else values[0]
    if kind == "object":
        properties = schema.get("properties") or {}
        return {name: _harmless(spec) for name, spec in properties.items()}
    if kind == "array":
        return []
    if kind == "integer":
        return schema.get("minimum", 1)
    if kind == "number":
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    return SIDE_ANSWER


def _parts(content: dict[str, Any]) -> list[dict[str, Any]]:
    parts = content.get("parts")
    return [part for part in parts if isinstance(part, dict)] if isinstance(parts, list) else []


def _matching(
    call: dict[str, Any], position: int, responses: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The response to `call`: by id where the CLI kept it, else the one in the same place."""
    for response in responses:
        if call.get("id") and response.get("id") == call["id"]:
            return response
    if position < len(responses) and responses[position].get("name") == call.get("name"):
        return responses[position]
    return None


def _call(call: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    payload = response.get("response")
    payload = payload if isinstance(payload, dict) else {"output": payload}
    if "output" in payload:
        text = payload["output"]
    elif "error" in payload:
        text = payload["error"]
    else:
        text = payload
    text = text if isinstance(text, str) else json.dumps(text)
    return {
        "name": call.get("name"),
        "input": call.get("args") or {},
        "response": payload,
        "text": text,
        "content": _unwrapped(text),
        "is_error": "error" in payload,
    }


def _unwrapped(text: str) -> str:
    """What an MCP server said, as the server said it. The CLI wraps a result in
    <untrusted_context> tags (escaping any closing tag inside), and turns a result marked isError
    (or a JSON-RPC error) into "MCP tool 'x' reported tool error for function call: <call JSON>
    with response: <parts JSON>". Any other text (an unknown tool) is the CLI's own."""
    if text.startswith(UNTRUSTED_OPEN) and text.endswith(UNTRUSTED_CLOSE):
        inner = text[len(UNTRUSTED_OPEN) : -len(UNTRUSTED_CLOSE)]
        return inner.replace("&lt;/untrusted_context&gt;", "</untrusted_context>")
    _, marker, rest = text.partition(TOOL_ERROR)
    if not marker:
        return text
    # Decoded rather than split: the call's arguments may hold the separator too.
    decoder = json.JSONDecoder()
    try:
        _, end = decoder.raw_decode(rest)
        if not rest[end:].startswith(TOOL_ERROR_RESPONSE):
            return text
        parts, _ = decoder.raw_decode(rest[end + len(TOOL_ERROR_RESPONSE) :])
    except ValueError:
        return text
    said = []
    for part in parts if isinstance(parts, list) else []:
        response = part.get("functionResponse", {}).get("response", {})
        said += [item.get("text", "") for item in response.get("content") or []]
        if isinstance(response.get("error"), dict):
            said.append(str(response["error"].get("message", "")))
    return "\n".join(said)
