from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


class CardsConfig(AppConfig):
    name = "cards"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from celery.signals import worker_init

        from cards import checks
        from cards.fastpath import persona_deleted, persona_saved, personas_written
        from personas import signals
        from personas.models import Persona
        from virgo.startup import web_starting

        # The public card's token moves with every change to a persona row, so the fast path
        # reloads the card (cards.fastpath): saves and deletes, and the rows written in bulk or
        # by queryset updates (a recompute, stamp outcomes), which their writers announce.
        # Published cards, written here, replace it where they are written.
        post_save.connect(persona_saved, sender=Persona, dispatch_uid="cards-token-save")
        post_delete.connect(persona_deleted, sender=Persona, dispatch_uid="cards-token-delete")
        signals.personas_written.connect(
            personas_written, sender=Persona, dispatch_uid="cards-token-written"
        )
        # A process that cannot sign, and a worker on another public base URL than the
        # installation's, do not start (VX-SCALE-4); the deploy checks are registered by
        # importing cards.checks.
        worker_init.connect(checks.check_worker_start, weak=False)
        web_starting.connect(checks.check_web_start, weak=False)
