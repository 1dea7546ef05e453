"""Coordination and identity tools: the inbox, the broker, wake reconciliation, presence, peers.

Every message is delivered with an envelope the broker derives from the registry at send time:
the sender's persona id (peer id), agent, registered address, workspace and project, and its
instance provenance (the generation it runs as and that generation's stamp hash). The envelope is
never taken from the caller: `send_broker_message` accepts no envelope or sender argument at all,
and a `label` (or any "from:" line in the body) is kept as the sender's own attribution beside
the envelope, never inside it. Labels are attribution, not authority.

Peers are personas of the same owner: a message goes to any of them, by id or registered
address; `list_peers` shows the persona's own workspace and the reserved root.
"""

from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from personas.models import Generation, Persona
from runtime.models import CoordinationMessage, Decision, Presence, Run, Task, WakeMarker
from runtime.tools.params import TEXT_MAX, TITLE_MAX, Choice, Id, Key, Text
from runtime.tools.toolkit import (
    PAGE,
    Arguments,
    Invalid,
    Missing,
    ToolCall,
    find_persona,
    in_workspace_of,
    iso,
    own_queues,
    owner_personas,
    peer_reference,
    scope_of,
    takes,
)

LABEL_MAX = 200
SUMMARY_MAX = 500
ACTIVITY_MAX = 200
# A wake reports at most this many items per kind; the inbox and the list tools hold the rest.
WAKE_ITEMS = 20


def delivery_envelope(call: ToolCall) -> dict[str, Any]:
    """Who sent this, as the registry says now: never as the message or its caller says."""
    sender = Persona.objects.select_related("agent", "address").get(pk=call.persona.pk)
    hierarchy = call.stamp.document["hierarchy"]
    return {
        "sender": {
            "peer_id": str(sender.uuid),
            "agent_id": sender.agent_id,
            "address": sender.address.path,
            "class": call.stamp.persona_class,
            "workspace": hierarchy["workspace"],
            "project": hierarchy["project"],
        },
        "instance": {"generation": call.stamp.generation, "stamp_hash": call.stamp.stamp_hash},
        "sent_at": iso(timezone.now()),
    }


def message_json(message: CoordinationMessage) -> dict[str, Any]:
    return {
        "id": str(message.uuid),
        "subject": message.subject,
        "body": message.body,
        "label": message.label,
        "envelope": message.envelope,
        "in_reply_to": str(message.in_reply_to.uuid) if message.in_reply_to else None,
        "delivered_at": iso(message.created_at),
        "acked_at": iso(message.acked_at),
    }


@takes(
    Text(
        "recipient",
        "The peer persona: its id or its registered address.",
        required=True,
        max_length=TITLE_MAX,
        key=Key.TARGET,
    ),
    Text("body", "The message.", required=True, max_length=TEXT_MAX, key=Key.DIGEST),
    Text("subject", "A subject line.", max_length=TITLE_MAX),
    Text(
        "label",
        "Your own attribution, shown beside the envelope; never who the sender is.",
        max_length=LABEL_MAX,
    ),
    Id("in_reply_to", "The id of the message of your inbox this answers."),
)
def send_broker_message(call: ToolCall, args: Arguments) -> dict[str, Any]:
    scope = scope_of(call)
    recipient = find_persona(scope.owner_id, args["recipient"], what="recipient")
    if recipient.pk == call.persona.pk:
        raise Invalid("a persona does not send broker messages to itself")
    reply_to = args["in_reply_to"]
    original = None
    if reply_to is not None:
        original = CoordinationMessage.objects.filter(
            uuid=reply_to, recipient_id=call.persona.pk
        ).first()
        if original is None:
            raise Missing(f"message {reply_to} is not in this persona's inbox")
    message = CoordinationMessage.objects.create(
        owner_id=scope.owner_id,
        sender_id=call.persona.pk,
        recipient=recipient,
        subject=args["subject"],
        body=args["body"],
        label=args["label"],
        in_reply_to=original,
        envelope=delivery_envelope(call),
    )
    return {
        "message": str(message.uuid),
        "recipient": peer_reference(recipient),
        "envelope": message.envelope,
        "delivered_at": iso(message.created_at),
    }


@takes(
    Choice(
        "state", "Which messages of your inbox.", options=("unacked", "acked", "all"),
        default="unacked",
    ),
    *PAGE,
)  # fmt: skip
def list_coordination_messages(call: ToolCall, args: Arguments) -> dict[str, Any]:
    state = args["state"]
    page = args.page()
    inbox = CoordinationMessage.objects.filter(recipient_id=call.persona.pk).select_related(
        "in_reply_to"
    )
    if state != "all":
        inbox = inbox.filter(acked_at__isnull=state == "unacked")
    rows, next_cursor = page.of(inbox.order_by("created_at", "id"))
    return {"messages": [message_json(m) for m in rows], "next_cursor": next_cursor}


@takes(Id("message", "The id of a message of your inbox.", required=True, key=Key.TARGET))
def ack_coordination_message(call: ToolCall, args: Arguments) -> dict[str, Any]:
    message_id = args["message"]
    with transaction.atomic():
        message = (
            CoordinationMessage.objects.select_for_update()
            .filter(uuid=message_id, recipient_id=call.persona.pk)
            .first()
        )
        if message is None:
            raise Missing(f"message {message_id} is not in this persona's inbox")
        already = message.acked_at is not None
        if not already:
            message.acked_at = timezone.now()
            message.save(update_fields=["acked_at"])
    return {"message": str(message.uuid), "acked_at": iso(message.acked_at), "already": already}


@takes()
def reconcile_wake(call: ToolCall, args: Arguments) -> dict[str, Any]:
    """What arrived or changed for this persona since its last wake; then the marker moves on.

    The window is (last marker, now]; anything written after `now` is for the next wake. What
    does not fit in the summary stays in the inbox and in the list tools.
    """
    scope = scope_of(call)
    me = call.persona.pk
    queues = own_queues(call)
    with transaction.atomic():
        marker = WakeMarker.objects.select_for_update().filter(persona_id=me).first()
        since = marker.marked_at if marker else None
        until = timezone.now()

        def window(rows: Any, field: str) -> tuple[list[Any], bool]:
            if since is not None:
                rows = rows.filter(**{f"{field}__gt": since})
            rows = rows.filter(**{f"{field}__lte": until}).order_by(field, "id")
            found = list(rows[: WAKE_ITEMS + 1])
            return found[:WAKE_ITEMS], len(found) > WAKE_ITEMS

        messages, more_messages = window(
            CoordinationMessage.objects.filter(recipient_id=me), "created_at"
        )
        tasks, more_tasks = window(
            Task.objects.filter(owner_id=scope.owner_id).filter(
                Q(created_by_id=me)
                | Q(for_persona_id=me)
                | Q(assignee_id=me)
                | Q(queue__in=queues, state=Task.State.OPEN, for_persona__isnull=True)
            ),
            "updated_at",
        )
        decisions, more_decisions = window(Decision.objects.filter(scope.records()), "updated_at")
        runs, more_runs = window(Run.objects.filter(scope.records()), "updated_at")
        if marker is None:
            WakeMarker.objects.create(persona_id=me, marked_at=until, wakes=1)
        else:
            marker.marked_at = until
            marker.wakes += 1
            marker.save(update_fields=["marked_at", "wakes"])
    return {
        "since": iso(since),
        "until": iso(until),
        "messages": {
            "items": [
                {
                    "id": str(m.uuid),
                    "subject": m.subject,
                    "from": m.envelope["sender"],
                    "acked": m.acked_at is not None,
                }
                for m in messages
            ],
            "truncated": more_messages,
        },
        "tasks": {
            "items": [
                {"id": str(t.uuid), "title": t.title, "queue": t.queue, "state": t.state}
                for t in tasks
            ],
            "truncated": more_tasks,
        },
        "decisions": {
            "items": [{"id": str(d.uuid), "title": d.title, "state": d.state} for d in decisions],
            "truncated": more_decisions,
        },
        "runs": {
            "items": [
                {"id": str(r.uuid), "title": r.title, "kind": r.kind, "state": r.state}
                for r in runs
            ],
            "truncated": more_runs,
        },
    }


def presence_json(presence: Presence | None) -> dict[str, Any]:
    if presence is None:
        return {"summary": "", "activity": "", "state": Presence.State.IDLE.value, "at": None}
    moments = [m for m in (presence.summary_at, presence.activity_at) if m]
    return {
        "summary": presence.summary,
        "activity": presence.activity,
        "state": presence.state,
        "at": iso(max(moments)) if moments else None,
    }


@takes(
    Text("summary", "What you are and do, for your peers.", required=True, max_length=SUMMARY_MAX)
)
def set_summary(call: ToolCall, args: Arguments) -> dict[str, Any]:
    presence, _ = Presence.objects.update_or_create(
        persona_id=call.persona.pk,
        defaults={"summary": args["summary"], "summary_at": timezone.now()},
    )
    return {"presence": presence_json(presence)}


@takes(
    Text("activity", "What you are doing now.", max_length=ACTIVITY_MAX),
    Choice(
        "state", "Your presence state.", options=tuple(Presence.State.values),
        default=Presence.State.ACTIVE.value,
    ),
)  # fmt: skip
def set_activity(call: ToolCall, args: Arguments) -> dict[str, Any]:
    presence, _ = Presence.objects.update_or_create(
        persona_id=call.persona.pk,
        defaults={
            "activity": args["activity"],
            "state": args["state"],
            "activity_at": timezone.now(),
        },
    )
    return {"presence": presence_json(presence)}


@takes(*PAGE)
def list_peers(call: ToolCall, args: Arguments) -> dict[str, Any]:
    page = args.page()
    scope = scope_of(call)
    peers = (
        owner_personas(scope.owner_id)
        .exclude(pk=call.persona.pk)
        .filter(in_workspace_of(scope))
        .select_related("presence")
        .order_by("address__path", "id")
    )
    rows, next_cursor = page.of(peers)
    return {
        "peers": [
            {
                **peer_reference(peer),
                "standing": peer.standing is True,
                "presence": presence_json(getattr(peer, "presence", None)),
            }
            for peer in rows
        ],
        "next_cursor": next_cursor,
    }


@takes(
    Id(
        "message",
        "A message of your inbox: whose is it? Give this or peer, not both.",
        key=Key.TARGET,
    ),
    Text(
        "peer",
        "A peer persona's id or registered address. Give this or message, not both.",
        max_length=TITLE_MAX,
        key=Key.TARGET,
    ),
)
def lookup_sender(call: ToolCall, args: Arguments) -> dict[str, Any]:
    """Who a sender is, redacted: the registry's public facts, never the owner or credentials.

    Given a message of the persona's inbox, it also verifies the message's envelope against the
    registry: whether the sender still runs as the instance (generation and stamp) that sent it.
    """
    scope = scope_of(call)
    message_id = args["message"]
    reference = args["peer"]
    if (message_id is None) == (not reference):
        raise Invalid("lookup_sender takes either a message id or a peer (id or address)")
    envelope = None
    if message_id is not None:
        message = (
            CoordinationMessage.objects.filter(uuid=message_id, recipient_id=call.persona.pk)
            .select_related("sender__address", "sender__agent")
            .first()
        )
        if message is None:
            raise Missing(f"message {message_id} is not in this persona's inbox")
        sender, envelope = message.sender, message.envelope
    else:
        sender = find_persona(scope.owner_id, reference, what="peer")
    current = (
        Generation.objects.filter(persona_id=sender.pk, number=sender.generation)
        .values_list("stamp_hash", flat=True)
        .first()
    )
    identity = {
        **peer_reference(sender),
        "agent_id": sender.agent_id,
        "workspace": sender.address.workspace,
        "project": sender.address.project,
        "standing": sender.standing is True,
        "instance": {"generation": sender.generation, "stamp_hash": current or None},
    }
    result: dict[str, Any] = {"sender": identity}
    if envelope is not None:
        claimed = envelope["sender"]
        result["envelope"] = envelope
        result["verified"] = {
            "peer": claimed["peer_id"] == identity["peer_id"],
            "agent": claimed["agent_id"] == identity["agent_id"],
            "instance_current": envelope["instance"] == identity["instance"],
        }
    return result


IMPLEMENTATIONS = {
    "coordination.send": send_broker_message,
    "coordination.list": list_coordination_messages,
    "coordination.ack": ack_coordination_message,
    "coordination.reconcile_wake": reconcile_wake,
    "presence.set_summary": set_summary,
    "presence.set_activity": set_activity,
    "identity.list_peers": list_peers,
    "identity.lookup_sender": lookup_sender,
}
