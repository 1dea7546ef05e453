from django.apps import AppConfig


class RuntimeConfig(AppConfig):
    name = "runtime"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Runtime records"

    def ready(self) -> None:
        from personas.models import Persona
        from personas.signals import persona_revoked
        from runtime import (
            checks,  # noqa: F401  (registers the system check)
            explain,
            revocation,
            tracing,
            vectors,
        )
        from runtime.tools import bind_all
        from stamps.vectors import register

        bind_all()
        register(vectors)
        tracing.register(explain.verdict_and_rule)
        persona_revoked.connect(
            revocation.persona_revoked, sender=Persona, dispatch_uid="runtime-revoked"
        )
