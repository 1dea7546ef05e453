from django.apps import AppConfig


class VirgoConfig(AppConfig):
    """The project itself: its deployment checks."""

    name = "virgo"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from virgo import checks  # noqa: F401  (registers the system checks)
