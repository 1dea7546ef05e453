from django.apps import AppConfig
from django.db.models.signals import post_delete


class StampsConfig(AppConfig):
    name = "stamps"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from celery.signals import worker_init

        from personas.models import Generation
        from stamps import checks, signals

        post_delete.connect(
            signals.remove_stamp_of_deleted_generation,
            sender=Generation,
            dispatch_uid="stamps.remove_stamp_of_deleted_generation",
        )
        # Workers validate every active stamp before they take a task (V1-BOOT-1).
        worker_init.connect(checks.refuse_to_start_worker, weak=False)
