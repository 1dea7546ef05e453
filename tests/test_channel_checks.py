"""Boot checks: human-surface tools with no hub to reach, a hub with no callback secret."""

import pytest

from channel.checks import check_channel
from personas.models import PersonaClass
from stamps.checks import verifying_every_stamp
from tests.channel_support import surface_persona

pytestmark = pytest.mark.django_db


def test_personas_with_hub_tools_and_no_hub_are_named(settings) -> None:
    """V1-FAC-7, VX-OPS-5: a tool that cannot do its job is reported by `virgo check`, never
    faked."""
    settings.VIRGO_CHANNEL_URL = ""
    secretary = surface_persona(PersonaClass.SECRETARY)
    surface_persona(PersonaClass.CODER_DEPUTY, owner=secretary.agent.owner)
    assert check_channel() == []  # start-up reads no stamp (VX-OPS-5): `virgo check` names them
    with verifying_every_stamp():
        (message,) = check_channel()
    assert message.id == "channel.W001"
    assert str(secretary.uuid) in message.msg
    assert "send_human_message" in message.msg and "get_human_surface_status" not in message.msg


def test_a_hub_without_a_callback_secret_is_warned_about(settings) -> None:
    settings.VIRGO_CHANNEL_URL = "http://127.0.0.1:9"
    settings.VIRGO_CHANNEL_SECRET = ""
    assert [m.id for m in check_channel()] == ["channel.W002"]
    settings.VIRGO_CHANNEL_SECRET = "s3cret"
    assert check_channel() == []
