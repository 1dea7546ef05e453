from django.apps import AppConfig
from django.db.models.signals import post_delete


class StampsConfig(AppConfig):
    name = "stamps"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from celery.signals import worker_init

        from personas.models import Generation
        from stamps import checks, signals
        from virgo.startup import web_starting

        post_delete.connect(
            signals.remove_stamp_of_deleted_generation,
            sender=Generation,
            dispatch_uid="stamps.remove_stamp_of_deleted_generation",
        )
        # Web servers before they bind and workers before they take a task check what every
        # stamp depends on, in constant time (VX-OPS-5); each persona's file is verified by the
        # sweep and on load (VX-OPS-4).
        worker_init.connect(checks.check_worker_start, weak=False)
        web_starting.connect(checks.check_web_start, weak=False)
