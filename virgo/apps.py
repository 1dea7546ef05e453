from django.apps import AppConfig


class VirgoConfig(AppConfig):
    """The project itself: its management commands, deployment checks and sign-in limit."""

    name = "virgo"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from virgo import checks, signin  # noqa: F401  (checks registers the system checks)

        signin.connect()
