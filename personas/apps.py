from django.apps import AppConfig
from django.db.models.signals import pre_delete


class PersonasConfig(AppConfig):
    name = "personas"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from personas.models import Persona
        from personas.services.revocation import tombstone_kept_on_delete

        # However a revoked persona's row goes, its tombstone stays (VX-TRUST-5).
        pre_delete.connect(
            tombstone_kept_on_delete, sender=Persona, dispatch_uid="personas-tombstone-kept"
        )
