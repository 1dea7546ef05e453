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
import hashlib
import mimetypes
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from django.conf import settings

from channel import deliveries
from channel.client import HubReply, Outcome, hub_code
from channel.deliveries import HubRejected, OutcomeUnknown, Terminal
from personas.surfaces import unowned_bindings
from runtime.tools.params import Choice, Key, Records, Text, date, url
from runtime.tools.toolkit import Arguments, ToolCall, takes
from runtime.tools.workspace import InvalidArgument, OutOfScope, TooLarge
from stamps.profiles import WHOLE_WORKSPACE
from stamps.registry import HANDLERS

MAX_TEXT = 16_000
MAX_TITLE = 200
MAX_ITEMS = 20
_REACTION_ID = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


# What the tools take ------------------------------------------------------------------------


def _text(
    name: str,
    description: str,
    max_length: int,
    *,
    required: bool = False,
    key: Key = Key.VALUE,
) -> Text:
    """A text argument of a human surface: when given, never empty."""
    return Text(name, description, required=required, blank=False, max_length=max_length, key=key)


_BINDING = _text(
    "binding",
    "The human surface to use: one of those your stamp binds (get_human_surface_status).",
    MAX_TITLE,
    required=True,
    key=Key.TARGET,
)
_MESSAGE = Text(
    "message",
    "The hub's id of the message.",
    required=True,
    max_length=200,
    pattern="[A-Za-z0-9._:@-]+",
    key=Key.TARGET,
)
_FORMAT = Choice(
    "format", "How the text is written.", options=("plain", "markdown"), default="plain"
)
_MESSAGE_TEXT = _text("text", "The message.", MAX_TEXT, required=True, key=Key.DIGEST)


def _bound(call: ToolCall, binding: Any) -> str:
    """The binding, if the stamp binds this tool to it (the classifier has refused others) and
    it is still a surface of the persona's owner (a stamp built before surfaces were registered,
    or restored from elsewhere, may bind one that is not)."""
    surfaces = tuple(call.tool.scope.get("surfaces", ()))
    if not isinstance(binding, str) or binding not in surfaces:
        raise OutOfScope(
            f"surface {binding!r} is not bound to this persona ({', '.join(surfaces) or 'none'})"
        )
    if unowned_bindings(call.persona.agent.owner_id, [binding]):
        raise OutOfScope(
            f"surface {binding!r} is not a human surface of this persona's owner; nothing was sent"
        )
    return binding


def _sender(call: ToolCall) -> dict[str, str]:
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


def _read(call: ToolCall, route: str, params: dict[str, Any]) -> HubReply:
    reply = deliveries.client().get(route, idempotency_key=call.correlation_id, params=params)
    if reply.outcome is Outcome.UNKNOWN:
        raise OutcomeUnknown(reply.reason, attempts=reply.attempts)
    if reply.outcome is Outcome.UNAUTHORIZED:
        raise deliveries.CredentialRefused()
    if reply.outcome is Outcome.REJECTED:
        raise HubRejected(reply.reason)
    return reply


# The tools ----------------------------------------------------------------------------------


@takes(_BINDING, _MESSAGE_TEXT, _FORMAT)
def send_human_message(call: ToolCall, args: Arguments) -> dict[str, Any]:
    binding = _bound(call, args["binding"])
    body = {
        "binding": binding,
        "sender": _sender(call),
        "text": args["text"],
        "format": args["format"],
    }
    return deliveries.deliver(
        call=call, route="/messages", body=body, binding=binding, interpret=_created
    )


@takes(_BINDING, _MESSAGE, _MESSAGE_TEXT, _FORMAT)
def reply_human_message(call: ToolCall, args: Arguments) -> dict[str, Any]:
    binding = _bound(call, args["binding"])
    body = {
        "binding": binding,
        "sender": _sender(call),
        "text": args["text"],
        "format": args["format"],
    }
    route = f"/messages/{quote(args['message'], safe='')}/replies"
    return deliveries.deliver(
        call=call, route=route, body=body, binding=binding, interpret=_created
    )


@takes(_BINDING, _MESSAGE)
def ack_human_message(call: ToolCall, args: Arguments) -> dict[str, Any]:
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


def _typing(call: ToolCall, binding: str, state: str) -> dict[str, Any]:
    binding = _bound(call, binding)
    body = {"binding": binding, "sender": _sender(call), "state": state}
    return deliveries.deliver(
        call=call,
        route="/typing",
        body=body,
        binding=binding,
        interpret=_done(typing=state == "start"),
    )


@takes(_BINDING)
def start_typing(call: ToolCall, args: Arguments) -> dict[str, Any]:
    return _typing(call, args["binding"], "start")


@takes(_BINDING)
def stop_typing(call: ToolCall, args: Arguments) -> dict[str, Any]:
    return _typing(call, args["binding"], "stop")


@takes(_BINDING)
def list_reaction_ids(call: ToolCall, args: Arguments) -> dict[str, Any]:
    binding = _bound(call, args["binding"])
    reply = _read(call, "/reactions", {"binding": binding})
    reactions = [
        {"id": item["id"], "label": str(item.get("label", ""))[:50]}
        for item in reply.body.get("reactions", [])
        if isinstance(item, dict)
        and isinstance(item.get("id"), str)
        and _REACTION_ID.fullmatch(item["id"])
    ]
    return {"binding": binding, "reactions": reactions}


@takes(
    _BINDING,
    _MESSAGE,
    Text(
        "reaction",
        "A reaction id from list_reaction_ids.",
        required=True,
        max_length=64,
        pattern=_REACTION_ID.pattern,
    ),
)
def apply_human_reaction(call: ToolCall, args: Arguments) -> dict[str, Any]:
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


@takes(
    _BINDING,
    _text("title", "The card's title.", MAX_TITLE, required=True),
    _text("text", "The card's text.", MAX_TEXT, key=Key.DIGEST),
    Records(
        "facts",
        "Name/value lines shown on the card.",
        fields=(
            _text("name", "What the fact is.", MAX_TITLE, required=True),
            _text("value", "Its value.", 1000, required=True),
        ),
        max_items=MAX_ITEMS,
    ),
    Records(
        "links",
        "Links shown on the card.",
        fields=(
            _text("label", "The link's text.", MAX_TITLE, required=True),
            url(
                "url",
                "Where it leads: http(s), without credentials.",
                required=True,
                max_length=2000,
            ),
        ),
        max_items=MAX_ITEMS,
    ),
)
def send_human_card(call: ToolCall, args: Arguments) -> dict[str, Any]:
    binding = _bound(call, args["binding"])
    card = {key: value for key, value in args.given_values().items() if key != "binding"}
    body = {"binding": binding, "sender": _sender(call), "card": card}
    return deliveries.deliver(
        call=call, route="/cards", body=body, binding=binding, interpret=_created
    )


@takes(
    _BINDING,
    _text("title", "The todo in a line.", MAX_TITLE, required=True),
    _text("detail", "What is to be done, in full.", MAX_TEXT, key=Key.DIGEST),
    date("due", "When it is due, YYYY-MM-DD."),
)
def send_human_todo(call: ToolCall, args: Arguments) -> dict[str, Any]:
    binding = _bound(call, args["binding"])
    todo = {key: value for key, value in args.given_values().items() if key != "binding"}
    body = {"binding": binding, "sender": _sender(call), "todo": todo}
    return deliveries.deliver(
        call=call, route="/todos", body=body, binding=binding, interpret=_created
    )


@takes(
    _BINDING,
    _text(
        "path",
        "The file to send: a path relative to your workspace root.",
        1024,
        required=True,
        key=Key.TARGET,
    ),
    Text(
        "name",
        "The file name the human sees (no '/'); the path's last segment if left out.",
        blank=False,
        max_length=MAX_TITLE,
        pattern=r"(?!\.\.?$)[^/\\]+",
    ),
    _text("caption", "A caption shown with the file.", 2000),
    _text("content_type", "Its media type; guessed from the name if left out.", 100),
)
def send_human_file(call: ToolCall, args: Arguments) -> dict[str, Any]:
    """Send a file of the persona's own workspace; secret and authority files never leave."""
    binding = _bound(call, args["binding"])
    path = args["path"]
    data = _read_file(call, path, limit=settings.VIRGO_CHANNEL_MAX_FILE_BYTES)
    name = args["name"] or path.rsplit("/", 1)[-1]
    content_type = (
        args["content_type"] or mimetypes.guess_type(name)[0] or "application/octet-stream"
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
        "caption": args["caption"],
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


def _read_file(call: ToolCall, path: str, *, limit: int) -> bytes:
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


@takes(
    _text(
        "binding",
        "One of your bound surfaces; all of them if left out.",
        MAX_TITLE,
        key=Key.TARGET,
    )
)
def get_human_surface_status(call: ToolCall, args: Arguments) -> dict[str, Any]:
    """The hub's state and each bound surface's, as the hub reports them right now.

    An unreachable or unconfigured hub is a status, and reported as one (`reachable: false`),
    with every surface `unknown`; nothing is claimed that the hub did not say.
    """
    if args.given("binding"):
        surfaces = [_bound(call, args["binding"])]
    else:
        # Only the places the owner still holds: the hub is not asked about anyone else's.
        bound = list(call.tool.scope.get("surfaces", ()))
        foreign = set(unowned_bindings(call.persona.agent.owner_id, bound))
        surfaces = [binding for binding in bound if binding not in foreign]
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
