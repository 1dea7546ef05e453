from django.apps import AppConfig


class VirgoConfig(AppConfig):
    """The project itself: its management commands, deployment checks and sign-in limit."""

    name = "virgo"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from virgo import checks, outages, signin  # noqa: F401  (checks registers the checks)

        signin.connect()
        connection_created.connect(outages.database_connected, dispatch_uid="virgo.outages")
