"""Output shapes of the discovery directory. Read-only: the directory changes nothing."""

from rest_framework import serializers

from cards.rendering import card_description
from personas.models import Persona


class DirectorySkillSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()


class DirectoryEntrySerializer(serializers.Serializer):
    id = serializers.UUIDField(source="uuid")
    name = serializers.CharField()
    description = serializers.SerializerMethodField()
    skills = DirectorySkillSerializer(many=True)
    card_url = serializers.URLField()

    def get_description(self, persona: Persona) -> str:
        """The same words the persona's card carries."""
        return card_description(persona.description, persona.system_prompt)
