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

    def __str__(self) -> str:
        return f"card of {self.persona_id} (generation {self.generation})"
