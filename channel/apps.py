from django.apps import AppConfig


class ChannelConfig(AppConfig):
    name = "channel"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Human channel"

    def ready(self) -> None:
        from channel import checks  # noqa: F401  (registers the system check)
        from channel.tools import bind_all
        from channel.transport import HubTransport
        from runtime import transport

        bind_all()
        transport.register(HubTransport())
