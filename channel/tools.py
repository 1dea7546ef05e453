"""The eleven human-surface tools, bound into the one handler registry.

Each tool talks to the hub through the virgo-channel adapter and only to the surfaces its stamp
binds (`scope.surfaces`; the classifier already denies any other binding as cross-scope access,
and the tools check again). Writes go through channel.deliveries: a definitive result
(`applied: true`, or `applied: false` with a reason) is recorded under the correlation id; an
unknown outcome is a retryable failure, never success. The stamp carries binding names only:
the hub credential comes from settings.
"""

import base64
import dataclasses
import datetime
import hashlib
import mimetypes
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from django.conf import settings

from channel import deliveries
from channel.client import HubReply, Outcome, hub_code
from channel.deliveries import HubRejected, OutcomeUnknown, Terminal
from runtime.workspace import InvalidArgument, OutOfScope, TooLarge
from stamps.profiles import WHOLE_WORKSPACE
from stamps.registry import HANDLERS

if TYPE_CHECKING:
    from runtime.handler import ToolCall

MAX_TEXT = 16_000
MAX_TITLE = 200
MAX_ITEMS = 20
_MESSAGE_ID = re.compile(r"^[A-Za-z0-9._:@-]{1,200}$")
_REACTION_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
_IDENTITY_KEYS = ("workspace", "project", "persona")

Validator = Callable[[str, Any], Any]


# Arguments ----------------------------------------------------------------------------------


def _text(limit: int) -> Validator:
    def check(name: str, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise InvalidArgument(f"{name} must be a non-empty string")
        if len(value) > limit:
            raise InvalidArgument(f"{name} is longer than {limit} characters")
        return value

    return check


def _message_id(name: str, value: Any) -> str:
    if not isinstance(value, str) or not _MESSAGE_ID.match(value):
        raise InvalidArgument(f"{name} must be a hub message id (1-200 of A-Z a-z 0-9 . _ : @ -)")
    return value


def _reaction_id(name: str, value: Any) -> str:
    if not isinstance(value, str) or not _REACTION_ID.match(value):
        raise InvalidArgument(f"{name} must be a reaction id from list_reaction_ids")
    return value


def _choice(*options: str) -> Validator:
    def check(name: str, value: Any) -> str:
        if value not in options:
            raise InvalidArgument(f"{name} must be one of {', '.join(options)}")
        return value

    return check


def _date(name: str, value: Any) -> str:
    try:
        return datetime.date.fromisoformat(value).isoformat()
    except (TypeError, ValueError):
        raise InvalidArgument(f"{name} must be a date, YYYY-MM-DD") from None


def _pairs(first: str, second: str, second_check: Validator) -> Validator:
    def check(name: str, value: Any) -> list[dict[str, str]]:
        if not isinstance(value, list) or len(value) > MAX_ITEMS:
            raise InvalidArgument(f"{name} must be a list of at most {MAX_ITEMS} items")
        items = []
        for item in value:
            if not isinstance(item, dict) or set(item) != {first, second}:
                raise InvalidArgument(f"each item of {name} is an object {{{first}, {second}}}")
            items.append(
                {
                    first: _text(MAX_TITLE)(f"{name}.{first}", item[first]),
                    second: second_check(f"{name}.{second}", item[second]),
                }
            )
        return items

    return check


def _web_url(name: str, value: Any) -> str:
    url = _text(2000)(name, value)
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.netloc:
        raise InvalidArgument(f"{name} must be an http(s) URL")
    return url


def _file_name(name: str, value: Any) -> str:
    text = _text(MAX_TITLE)(name, value)
    if "/" in text or "\\" in text or text in (".", ".."):
        raise InvalidArgument(f"{name} is a file name, not a path")
    return text


def _arguments(
    call: "ToolCall", required: dict[str, Validator], optional: dict[str, Validator] | None = None
) -> dict[str, Any]:
    """The tool's own arguments, checked; anything unknown is refused, nothing is guessed."""
    optional = optional or {}
    given = {k: v for k, v in call.op.arguments.items() if k not in _IDENTITY_KEYS}
    unknown = sorted(set(given) - set(required) - set(optional))
    if unknown:
        raise InvalidArgument(f"unknown arguments for {call.tool.name}: {', '.join(unknown)}")
    missing = sorted(set(required) - set(given))
    if missing:
        raise InvalidArgument(f"{call.tool.name} needs {', '.join(missing)}")
    checks = {**required, **optional}
    return {name: checks[name](name, value) for name, value in given.items()}


def _bound(call: "ToolCall", binding: Any) -> str:
    """The binding, if the stamp binds this tool to it (the classifier has refused others)."""
    surfaces = tuple(call.tool.scope.get("surfaces", ()))
    if not isinstance(binding, str) or binding not in surfaces:
        raise OutOfScope(
            f"surface {binding!r} is not bound to this persona ({', '.join(surfaces) or 'none'})"
        )
    return binding


def _sender(call: "ToolCall") -> dict[str, str]:
    persona = call.stamp.document["persona"]
    return {"persona": persona["id"], "name": persona["name"], "class": persona["class"]}


# Interpreting the hub's answers -------------------------------------------------------------


def _created(reply: HubReply) -> Terminal:
    message_id = reply.body.get("message_id")
    if not isinstance(message_id, str) or not message_id:
        # A 2xx is the hub's word that it applied the request, even without a readable id.
        return Terminal(True, {"message_id": None})
    fields: dict[str, Any] = {"message_id": message_id}
    for key in ("in_reply_to", "file_id"):
        if isinstance(reply.body.get(key), str):
            fields[key] = reply.body[key]
    return Terminal(True, fields)


def _done(**fields: Any) -> Callable[[HubReply], Terminal]:
    return lambda reply: Terminal(True, dict(fields))


def _reaction(reaction: str, message: str) -> Callable[[HubReply], Terminal]:
    def interpret(reply: HubReply) -> Terminal:
        fields = {"message_id": message, "reaction": reaction}
        if reply.body.get("applied") is True:
            return Terminal(True, fields)
        return Terminal(False, fields, hub_code(reply.body.get("reason"), "not_applied"))

    return interpret


def _read(call: "ToolCall", route: str, params: dict[str, Any]) -> HubReply:
    reply = deliveries.client().get(route, idempotency_key=call.correlation_id, params=params)
    if reply.outcome is Outcome.UNKNOWN:
        raise OutcomeUnknown(reply.reason, attempts=reply.attempts)
    if reply.outcome is Outcome.UNAUTHORIZED:
        raise deliveries.CredentialRefused()
    if reply.outcome is Outcome.REJECTED:
        raise HubRejected(reply.reason)
    return reply


# The tools ----------------------------------------------------------------------------------


def send_human_message(call: "ToolCall") -> dict[str, Any]:
    args = _arguments(
        call,
        {"binding": _text(MAX_TITLE), "text": _text(MAX_TEXT)},
        {"format": _choice("plain", "markdown")},
    )
    binding = _bound(call, args["binding"])
    body = {
        "binding": binding,
        "sender": _sender(call),
        "text": args["text"],
        "format": args.get("format", "plain"),
    }
    return deliveries.deliver(
        call=call, route="/messages", body=body, binding=binding, interpret=_created
    )


def reply_human_message(call: "ToolCall") -> dict[str, Any]:
    args = _arguments(
        call,
        {"binding": _text(MAX_TITLE), "message": _message_id, "text": _text(MAX_TEXT)},
        {"format": _choice("plain", "markdown")},
    )
    binding = _bound(call, args["binding"])
    body = {
        "binding": binding,
        "sender": _sender(call),
        "text": args["text"],
        "format": args.get("format", "plain"),
    }
    route = f"/messages/{quote(args['message'], safe='')}/replies"
    return deliveries.deliver(
        call=call, route=route, body=body, binding=binding, interpret=_created
    )


def ack_human_message(call: "ToolCall") -> dict[str, Any]:
    args = _arguments(call, {"binding": _text(MAX_TITLE), "message": _message_id})
    binding = _bound(call, args["binding"])
    route = f"/messages/{quote(args['message'], safe='')}/ack"
    body = {"binding": binding, "sender": _sender(call)}
    return deliveries.deliver(
        call=call,
        route=route,
        body=body,
        binding=binding,
        interpret=_done(message_id=args["message"], acknowledged=True),
    )


def _typing(call: "ToolCall", state: str) -> dict[str, Any]:
    args = _arguments(call, {"binding": _text(MAX_TITLE)})
    binding = _bound(call, args["binding"])
    body = {"binding": binding, "sender": _sender(call), "state": state}
    return deliveries.deliver(
        call=call,
        route="/typing",
        body=body,
        binding=binding,
        interpret=_done(typing=state == "start"),
    )


def start_typing(call: "ToolCall") -> dict[str, Any]:
    return _typing(call, "start")


def stop_typing(call: "ToolCall") -> dict[str, Any]:
    return _typing(call, "stop")


def list_reaction_ids(call: "ToolCall") -> dict[str, Any]:
    args = _arguments(call, {"binding": _text(MAX_TITLE)})
    binding = _bound(call, args["binding"])
    reply = _read(call, "/reactions", {"binding": binding})
    reactions = [
        {"id": item["id"], "label": str(item.get("label", ""))[:50]}
        for item in reply.body.get("reactions", [])
        if isinstance(item, dict)
        and isinstance(item.get("id"), str)
        and _REACTION_ID.match(item["id"])
    ]
    return {"binding": binding, "reactions": reactions}


def apply_human_reaction(call: "ToolCall") -> dict[str, Any]:
    args = _arguments(
        call,
        {"binding": _text(MAX_TITLE), "message": _message_id, "reaction": _reaction_id},
    )
    binding = _bound(call, args["binding"])
    route = f"/messages/{quote(args['message'], safe='')}/reactions"
    body = {"binding": binding, "sender": _sender(call), "reaction": args["reaction"]}
    return deliveries.deliver(
        call=call,
        route=route,
        body=body,
        binding=binding,
        interpret=_reaction(args["reaction"], args["message"]),
    )


def send_human_card(call: "ToolCall") -> dict[str, Any]:
    args = _arguments(
        call,
        {"binding": _text(MAX_TITLE), "title": _text(MAX_TITLE)},
        {
            "text": _text(MAX_TEXT),
            "facts": _pairs("name", "value", _text(1000)),
            "links": _pairs("label", "url", _web_url),
        },
    )
    binding = _bound(call, args["binding"])
    card = {key: args[key] for key in ("title", "text", "facts", "links") if key in args}
    body = {"binding": binding, "sender": _sender(call), "card": card}
    return deliveries.deliver(
        call=call, route="/cards", body=body, binding=binding, interpret=_created
    )


def send_human_todo(call: "ToolCall") -> dict[str, Any]:
    args = _arguments(
        call,
        {"binding": _text(MAX_TITLE), "title": _text(MAX_TITLE)},
        {"detail": _text(MAX_TEXT), "due": _date},
    )
    binding = _bound(call, args["binding"])
    todo = {key: args[key] for key in ("title", "detail", "due") if key in args}
    body = {"binding": binding, "sender": _sender(call), "todo": todo}
    return deliveries.deliver(
        call=call, route="/todos", body=body, binding=binding, interpret=_created
    )


def send_human_file(call: "ToolCall") -> dict[str, Any]:
    """Send a file of the persona's own workspace; secret and authority files never leave."""
    args = _arguments(
        call,
        {"binding": _text(MAX_TITLE), "path": _text(1024)},
        {"name": _file_name, "caption": _text(2000), "content_type": _text(100)},
    )
    binding = _bound(call, args["binding"])
    path = args["path"]
    data = _read_file(call, path, limit=settings.VIRGO_CHANNEL_MAX_FILE_BYTES)
    name = args.get("name") or path.rsplit("/", 1)[-1]
    content_type = (
        args.get("content_type") or mimetypes.guess_type(name)[0] or "application/octet-stream"
    )
    described = {
        "name": name,
        "content_type": content_type,
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    body = {
        "binding": binding,
        "sender": _sender(call),
        "caption": args.get("caption", ""),
        "file": {**described, "content_base64": base64.b64encode(data).decode()},
    }
    recorded = {**body, "file": {**described, "path": path}}
    return deliveries.deliver(
        call=call,
        route="/files",
        body=body,
        binding=binding,
        interpret=_created,
        recorded=recorded,
    )


def _read_file(call: "ToolCall", path: str, *, limit: int) -> bytes:
    """The file's bytes, read through the workspace's own checks (scope, symlinks, secrets).

    A persona may read its whole workspace (its read tools are stamped with `**`); the file tool
    sends what it could read, nothing more.
    """
    space = dataclasses.replace(call.workspace, readable_paths=(WHOLE_WORKSPACE,))
    size = space.stat(path)["size"]
    if size is None:
        raise InvalidArgument(f"{path!r} is a directory, not a file")
    if size > limit:
        raise TooLarge(f"{path!r} is {size} bytes; the hub takes files up to {limit} bytes")
    data = bytearray()
    offset = 0
    while True:
        page = space.read(path, offset=offset, length=256 * 1024)
        if page["encoding"] == "base64":
            data += base64.b64decode(page["content"])
        else:
            data += page["content"].encode("utf-8")
        offset = page["next_offset"]
        if page["done"] or len(data) > limit:
            break
    if len(data) > limit:
        raise TooLarge(f"{path!r} grew past {limit} bytes while it was read")
    return bytes(data)


def get_human_surface_status(call: "ToolCall") -> dict[str, Any]:
    """The hub's state and each bound surface's, as the hub reports them right now.

    An unreachable or unconfigured hub is a status, and reported as one (`reachable: false`),
    with every surface `unknown`; nothing is claimed that the hub did not say.
    """
    args = _arguments(call, {}, {"binding": _text(MAX_TITLE)})
    surfaces = (
        [_bound(call, args["binding"])]
        if "binding" in args
        else list(call.tool.scope.get("surfaces", ()))
    )
    unknown = [{"binding": binding, "state": "unknown"} for binding in surfaces]
    try:
        hub = deliveries.client()
    except deliveries.ChannelUnconfigured:
        return {
            "hub": {"configured": False, "reachable": False, "reason": "channel_unconfigured"},
            "surfaces": unknown,
        }
    reply = hub.get("/status", idempotency_key=call.correlation_id, params={"binding": surfaces})
    if reply.outcome is not Outcome.OK:
        return {
            "hub": {"configured": True, "reachable": reply.outcome is not Outcome.UNKNOWN,
                    "reason": reply.reason},
            "surfaces": unknown,
        }  # fmt: skip
    reported = {
        item["binding"]: hub_code(item.get("state"), "unknown")
        for item in reply.body.get("surfaces", [])
        if isinstance(item, dict) and item.get("binding") in surfaces
    }
    return {
        "hub": {
            "configured": True,
            "reachable": True,
            "state": hub_code(reply.body.get("hub"), "unknown"),
        },
        "surfaces": [
            {"binding": binding, "state": reported.get(binding, "unknown")} for binding in surfaces
        ],
    }


IMPLEMENTATIONS = {
    "human.send_message": send_human_message,
    "human.reply_message": reply_human_message,
    "human.ack_message": ack_human_message,
    "human.start_typing": start_typing,
    "human.stop_typing": stop_typing,
    "human.list_reactions": list_reaction_ids,
    "human.apply_reaction": apply_human_reaction,
    "human.send_card": send_human_card,
    "human.send_todo": send_human_todo,
    "human.send_file": send_human_file,
    "human.status": get_human_surface_status,
}


def bind_all() -> None:
    """Bind every human-surface tool; called once when the channel app is ready."""
    for action, implementation in IMPLEMENTATIONS.items():
        HANDLERS.register(action, implementation)
