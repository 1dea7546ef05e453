"""DRF glue shared by every API view: strict input fields, strict paging, the error statuses.

The API answers 400 exactly when a request breaks a rule its OpenAPI schema states (a type, a
length, a pattern, an enum, a required or unknown key, a paging value), and 422 when a
well-formed request is refused by a rule no schema can state: a reference to an object the
caller cannot see, a verb outside the agent's grant, a name already taken, credentials that
match no account. Either way the body names each field and why. So a client that follows the
schema never gets a 400, and `st run` (tests/test_schemathesis_live.py) can hold the API to
that in both directions.

DRF's own fields are lenient where the schema is not: a CharField takes the number 0 as the
name "0", a BooleanField takes "yes", a related field takes "" as null, a pagination class
ignores a page_size it cannot read. The fields here take only what their schema says.
"""

import re
import uuid
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import RegexValidator
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from rest_framework import exceptions, serializers
from rest_framework.fields import empty
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

# No NUL character (PostgreSQL text cannot hold one; DRF refuses it too, unstated), and at least
# one character that is not white space (Python's `\s`, what str.strip() removes). One pattern
# each, since a schema states one pattern per string. Neither matches "": where blank is
# allowed, drf-spectacular states `oneOf: [pattern, maxLength 0]`, which "" must match once.
ANY_TEXT = RegexValidator(r"^[^\x00]+$", "must not contain a NUL character")
NOT_BLANK = RegexValidator(
    r"^[^\x00]*[^\s\x00][^\x00]*$",
    "must contain a character that is not white space, and no NUL character",
)

# Refusals of a well-formed request: what the field names is not there for this caller.
_REFERENCE_CODES = frozenset({"does_not_exist", "authorization"})
_DIGITS = re.compile(r"[0-9]+")


class UnprocessableEntity(exceptions.ValidationError):
    """A well-formed request refused by a rule of the domain; the body names each field."""

    status_code = 422


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Field errors as 400 (the schema says why) or 422 (the domain says why)."""
    if isinstance(exc, DjangoValidationError):
        # The services validate the domain; shapes were checked before they were called.
        detail = (
            exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        )
        exc = UnprocessableEntity(detail=detail)
    elif type(exc) is exceptions.ValidationError:
        codes = set(_codes(exc.get_codes()))
        if codes and codes <= _REFERENCE_CODES:
            exc = UnprocessableEntity(detail=exc.detail)
    return drf_exception_handler(exc, context)


def _codes(codes: Any) -> Iterable[str]:
    if isinstance(codes, str):
        yield codes
    elif isinstance(codes, dict):
        for value in codes.values():
            yield from _codes(value)
    else:
        for value in codes:
            yield from _codes(value)


# Input fields -----------------------------------------------------------------------------------


class Text(serializers.CharField):
    """A JSON string, taken exactly as sent: never a number, never trimmed.

    Not trimmed, so that the length and pattern the schema states are those of the value sent
    (DRF checks them after trimming, so a value over maxLength could pass). It must match
    `pattern` (stated in the schema): by default NOT_BLANK, or ANY_TEXT where blank is allowed.
    Unless blank is allowed it is not empty (schema: minLength 1).
    """

    def __init__(self, *, pattern: RegexValidator | None = None, **kwargs: Any) -> None:
        kwargs["trim_whitespace"] = False
        if not kwargs.get("allow_blank", False):
            kwargs.setdefault("min_length", 1)
        if pattern is None:
            pattern = ANY_TEXT if kwargs.get("allow_blank", False) else NOT_BLANK
        kwargs["validators"] = [pattern, *kwargs.get("validators", ())]
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class UniqueList(serializers.ListField):
    """A JSON array whose items are all different (schema: uniqueItems)."""

    default_error_messages = {"not_unique": "each item may appear once: {items} repeat"}

    def to_internal_value(self, data: Any) -> list[Any]:
        items = super().to_internal_value(data)
        repeated = sorted({repr(item) for item in items if items.count(item) > 1})
        if repeated:
            self.fail("not_unique", items=", ".join(repeated))
        return items


class UniqueListSchema(OpenApiSerializerFieldExtension):
    target_class = UniqueList
    match_subclasses = True

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        return {**schema, "uniqueItems": True}


class StrictBoolean(serializers.BooleanField):
    """JSON true or false, never "yes", 1 or "on"."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class StrictChoice(serializers.ChoiceField):
    """One of the choices, as a JSON string (a number is not the string it would print as)."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            self.fail("invalid_choice", input=data)
        return super().to_internal_value(data)


class StrictInteger(serializers.IntegerField):
    """A JSON integer, never "1", 1.0 or true."""

    def to_internal_value(self, data: Any) -> int:
        if not isinstance(data, int) or isinstance(data, bool):
            self.fail("invalid")
        return super().to_internal_value(data)


class ObjectId(serializers.PrimaryKeyRelatedField):
    """The integer id of an object the caller may see; never "1", 1.0 or true."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, int) or isinstance(data, bool):
            self.fail("incorrect_type", data_type=type(data).__name__)
        return super().to_internal_value(data)


class ObjectUuid(serializers.SlugRelatedField):
    """The uuid (schema: format uuid) of an object the caller may see, or null where allowed.

    DRF reads "" as null in every related field; here "" is not a uuid, and is refused.
    """

    default_error_messages = {"not_a_uuid": "must be a uuid (8-4-4-4-12 hexadecimal digits)"}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(slug_field="uuid", **kwargs)

    def run_validation(self, data: Any = empty) -> Any:
        if data == "":
            self.fail("not_a_uuid")
        return super().run_validation(data)

    def to_internal_value(self, data: Any) -> Any:
        if not _is_uuid(data):
            self.fail("not_a_uuid")
        return super().to_internal_value(data)


def _is_uuid(value: object) -> bool:
    """What JSON Schema's `uuid` format admits: 36 characters, hyphens at 8, 13, 18 and 23."""
    if not isinstance(value, str) or len(value) != 36:
        return False
    if any(value[position] != "-" for position in (8, 13, 18, 23)):
        return False
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


# Paging ---------------------------------------------------------------------------------------


class StrictCursorPagination(CursorPagination):
    """Cursor pages whose page_size is 1 to max_page_size, or a 400 naming it.

    DRF falls back to the default size for a page_size it cannot read, and cuts a large one to
    the maximum; either way the caller gets pages of a size it did not ask for and is not told.
    """

    page_size_query_param = "page_size"

    def get_page_size(self, request: Request) -> int:
        values = request.query_params.getlist(self.page_size_query_param)
        if not values:
            return self.page_size
        largest = self.max_page_size
        if len(values) == 1 and _DIGITS.fullmatch(values[0]) and 1 <= int(values[0]) <= largest:
            return int(values[0])
        raise exceptions.ValidationError(
            {self.page_size_query_param: [f"must be one whole number from 1 to {largest}"]}
        )

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"].update(minimum=1, maximum=self.max_page_size)
                parameter["description"] = (
                    f"Results per page, 1 to {self.max_page_size} (default {self.page_size})."
                )
        return parameters
