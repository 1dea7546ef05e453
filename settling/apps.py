from django.apps import AppConfig


class SettlingConfig(AppConfig):
    name = "settling"
    verbose_name = "Settling"

    def ready(self) -> None:
        # The records queue this app's tasks by name (personas.services): every process that
        # may queue one has them registered, not only the workers that autodiscover them.
        from settling import tasks  # noqa: F401
