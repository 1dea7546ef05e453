"""What follows once a persona's generation is committed: its stamp is built, its card published."""

from personas.models import Persona


def publish_generation(persona_id: int) -> None:
    """Stamp and publish the current generation of a persona.

    Idempotent per (persona, generation), so Celery retries and the batched fan-out may call it
    again freely; a deleted persona is skipped. The stamp comes first: a generation that does not
    stand is recorded before its card exists, so it is never advertised.
    """
    from cards.publishing import publish_card
    from stamps.services import build_current_stamp

    persona = (
        Persona.objects.select_related("agent__owner", "address").filter(pk=persona_id).first()
    )
    if persona is None:
        return
    build_current_stamp(persona=persona)
    publish_card(persona)
