from django.apps import AppConfig


class RuntimeConfig(AppConfig):
    name = "runtime"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Persona runtime"

    def ready(self) -> None:
        from runtime import checks  # noqa: F401  (registers the system check)
        from runtime.tools import bind_all

        bind_all()
