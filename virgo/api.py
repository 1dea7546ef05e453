"""DRF glue shared by every API view."""

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Turn domain ValidationErrors from the service layer into 400s naming each field."""
    if isinstance(exc, DjangoValidationError):
        detail = (
            exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        )
        exc = exceptions.ValidationError(detail=detail)
    return drf_exception_handler(exc, context)
