from django.apps import AppConfig


class VirgoConfig(AppConfig):
    """The project itself: its management commands, deployment checks and sign-in limit."""

    name = "virgo"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.core.management import BaseCommand
        from django.db.backends.signals import connection_created

        # Imported for what importing does: checks registers the checks.
        from virgo import auditing, checks, outages, passwords, signin, telemetry  # noqa: F401

        # Every management command, `virgo <command>` or call_command, is audited as `cli` under
        # an id of its own (virgo.auditing): one wrapper here, rather than one in every command.
        if not getattr(BaseCommand.execute, "__audit_context__", False):
            BaseCommand.execute = auditing.command_context(BaseCommand.execute)  # type: ignore[method-assign]

        # Tracing only when OTEL_EXPORTER_OTLP_ENDPOINT says where to (virgo.telemetry); before
        # any request, so the Django instrumentation's middleware is in place for the first.
        telemetry.configure()
        signin.connect()
        passwords.connect()
        connection_created.connect(outages.database_connected, dispatch_uid="virgo.outages")
