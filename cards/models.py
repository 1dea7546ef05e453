from django.conf import settings
from django.db import models

from personas.models import Persona


class PublishedCard(models.Model):
    """The rendered card of one persona generation: bytes and validators computed once."""

    persona = models.OneToOneField(
        Persona, on_delete=models.CASCADE, primary_key=True, related_name="published_card"
    )
    generation = models.PositiveIntegerField()
    body = models.BinaryField()
    etag = models.CharField(max_length=80)
    last_modified = models.DateTimeField()
    # The VIRGO_PUBLIC_BASE_URL the card's URLs were rendered with: a card rendered under
    # another is owed again, like one of an older generation.
    base_url = models.CharField(max_length=2048, default="")
    # Whether it carries its generation's pinned grant (VX-TRUST-4): a card rendered before the
    # stamp was built does not, and is owed again once the persona stands.
    pinned = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"card of {self.persona_id} (generation {self.generation})"

    def is_current_for(self, persona: Persona) -> bool:
        """Whether this card shows `persona.generation` (or newer) at today's base URL, with
        its pinned grant once the persona stands."""
        if self.generation != persona.generation:
            return self.generation > persona.generation
        pinned = self.pinned or persona.standing is not True
        return pinned and self.base_url == settings.VIRGO_PUBLIC_BASE_URL
