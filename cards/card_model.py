"""The a2a-sdk's AgentCard as a compiled JSON Schema, and the card as its model writes it back.

Publishing a card used to parse it into the SDK's AgentCard (protobuf), check its REQUIRED
fields, and write the model back out for the signed payload: about a third of a fan-out's time,
spent building objects that were thrown away. Both answers are derived here, once per process,
from the SDK's own descriptors, so a new SDK release that changes the model changes them too:

- `schema()` accepts a subset of what the SDK accepts: each field by its JSON name with the
  JSON type the SDK parses, every REQUIRED field present and non-empty (what
  `validate_proto_required_fields` asks), at most one member of a oneof, no null, and no field
  the model lacks (the SDK ignores those; a card of ours never has one, and no signature would
  cover it).
- `as_model(card)` is what `MessageToDict(ParseDict(card, AgentCard()))` returns for a card the
  schema accepts: a field without presence at its default value is left out, a Struct's numbers
  become doubles.

tests/test_card_model.py holds both to the SDK: the same verdict on every card it tries, the
same payload bytes on every card Virgo renders.
"""

from functools import cache
from typing import Any

import jsonschema_rs
from a2a.types import AgentCard
from a2a.utils.proto_utils import FieldBehavior, field_behavior
from google.protobuf.descriptor import Descriptor, FieldDescriptor

# Well-known types whose JSON form is JSON itself.
_JSON_VALUE = {
    "google.protobuf.Struct": {"type": "object"},
    "google.protobuf.Value": {},
    "google.protobuf.ListValue": {"type": "array"},
}
_SCALAR_TYPES = {
    FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_BOOL: "boolean",
}


class CardOutsideModel(ValueError):
    """A card the SDK's model would not accept as a complete AgentCard, or one this schema
    does not vouch for."""


def _required(field: FieldDescriptor) -> bool:
    return FieldBehavior.REQUIRED in field.GetOptions().Extensions[field_behavior]  # type: ignore[index]


def _is_map(field: FieldDescriptor) -> bool:
    return field.type == FieldDescriptor.TYPE_MESSAGE and field.message_type.GetOptions().map_entry


def _single(field: FieldDescriptor, definitions: dict[str, Any]) -> dict[str, Any]:
    """The schema of one value of `field` (one item, when it is repeated)."""
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return _message_ref(field.message_type, definitions)
    if field.type not in _SCALAR_TYPES:
        raise NotImplementedError(f"AgentCard field {field.full_name}: type {field.type}")
    return {"type": _SCALAR_TYPES[field.type]}


def _field(field: FieldDescriptor, definitions: dict[str, Any]) -> dict[str, Any]:
    required = _required(field)
    if _is_map(field):
        value = field.message_type.fields_by_name["value"]
        schema = {"type": "object", "additionalProperties": _single(value, definitions)}
        return {**schema, "minProperties": 1} if required else schema
    if field.is_repeated:
        schema = {"type": "array", "items": _single(field, definitions)}
        return {**schema, "minItems": 1} if required else schema
    schema = _single(field, definitions)
    if required and not field.has_presence:
        # Present is not enough: the SDK asks that the value differ from the default.
        if field.type == FieldDescriptor.TYPE_STRING:
            return {**schema, "minLength": 1}
        return {**schema, "const": True}
    return schema


def _message_ref(message: Descriptor, definitions: dict[str, Any]) -> dict[str, Any]:
    if message.full_name in _JSON_VALUE:
        return _JSON_VALUE[message.full_name]
    if message.full_name not in definitions:
        definitions[message.full_name] = {}  # placeholder first: messages may nest themselves
        properties = {field.json_name: _field(field, definitions) for field in message.fields}
        schema: dict[str, Any] = {
            "type": "object",
            "properties": properties,
            "additionalProperties": False,
        }
        required = [field.json_name for field in message.fields if _required(field)]
        if required:
            schema["required"] = required
        exclusive = [
            [field.json_name for field in oneof.fields]
            for oneof in message.oneofs
            if len(oneof.fields) > 1
        ]
        if exclusive:
            schema["not"] = {
                "anyOf": [
                    {"required": [first, second]}
                    for members in exclusive
                    for index, first in enumerate(members)
                    for second in members[index + 1 :]
                ]
            }
        definitions[message.full_name] = schema
    return {"$ref": f"#/$defs/{message.full_name}"}


@cache
def schema() -> dict[str, Any]:
    """The JSON Schema of a complete AgentCard, derived from the SDK's descriptor."""
    definitions: dict[str, Any] = {}
    root = _message_ref(AgentCard.DESCRIPTOR, definitions)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **root, "$defs": definitions}


@cache
def _validator() -> jsonschema_rs.Draft202012Validator:
    return jsonschema_rs.Draft202012Validator(schema())


def is_complete_card(card: dict[str, Any]) -> bool:
    return bool(_validator().is_valid(card))


def schema_errors(card: dict[str, Any]) -> list[str]:
    """Each way `card` is outside the schema, as `path: message`."""
    return [
        f"{'/'.join(str(part) for part in error.instance_path) or '(card)'}: {error.message}"
        for error in _validator().iter_errors(card)
    ]


def _as_double(value: Any) -> Any:
    """A Struct's JSON as the model holds it: every number a double."""
    if isinstance(value, dict):
        return {key: _as_double(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_as_double(item) for item in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return value


def _value(field: FieldDescriptor, value: Any) -> Any:
    if field.type != FieldDescriptor.TYPE_MESSAGE:
        return value
    if field.message_type.full_name in _JSON_VALUE:
        return _as_double(value)
    return _message(field.message_type, value)


@cache
def _fields_by_json_name(message: Descriptor) -> dict[str, FieldDescriptor]:
    return {field.json_name: field for field in message.fields}


def _message(message: Descriptor, document: dict[str, Any]) -> dict[str, Any]:
    fields = _fields_by_json_name(message)
    written: dict[str, Any] = {}
    for name, value in document.items():
        field = fields[name]
        if _is_map(field):
            if value:
                entry = field.message_type.fields_by_name["value"]
                written[name] = {key: _value(entry, item) for key, item in value.items()}
        elif field.is_repeated:
            if value:
                written[name] = [_value(field, item) for item in value]
        elif field.has_presence or value != field.default_value:
            written[name] = _value(field, value)
    return written


def as_model(card: dict[str, Any]) -> dict[str, Any]:
    """MessageToDict(ParseDict(card, AgentCard())) for a card `is_complete_card` accepts."""
    return _message(AgentCard.DESCRIPTOR, card)
