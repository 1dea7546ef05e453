"""Fields the records of the persona tools share."""

import uuid

from django.db import models


def uuid_field() -> models.UUIDField:
    """The id a tool shows for a row: random, unique, never edited."""
    return models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
