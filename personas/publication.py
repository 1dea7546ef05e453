"""What follows once a persona's generation is committed: its card is published."""

from personas.models import Persona


def publish_generation(persona_id: int) -> None:
    """Publish the current generation of a persona. Idempotent; a deleted persona is skipped."""
    from cards.publishing import publish_card

    persona = (
        Persona.objects.select_related("agent__owner", "address").filter(pk=persona_id).first()
    )
    if persona is None:
        return
    publish_card(persona)
