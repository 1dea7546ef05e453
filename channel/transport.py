"""virgo-channel as the runtime's transport (runtime.transport), registered by ChannelConfig."""

from channel.tasks import deliver_confirmation
from runtime.models import DecisionRecord
from virgo.queueing import queue_after_commit


class HubTransport:
    def confirmation_requested(self, record: DecisionRecord) -> None:
        """Send the request's card to its authority through the hub, by a task queued on commit
        (channel.routing decides where: the owner's authority surface, or the lead's inbox)."""
        queue_after_commit(deliver_confirmation, record.pk)
