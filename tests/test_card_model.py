"""The AgentCard schema and written-back form (cards.card_model) held to the a2a-sdk itself.

Publishing no longer builds the SDK's AgentCard per card: it trusts a schema derived from the
SDK's descriptors and computes the model's JSON without it. That is only safe if the schema
never accepts a card the SDK would refuse, accepts every card Virgo renders, and the computed
form is byte for byte what the SDK's signature verifier rebuilds. Each card below is put to both.
"""

import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

import jsonschema_rs
import pytest
from a2a.client.card_resolver import parse_agent_card
from a2a.types import AgentCard
from a2a.utils.errors import InvalidParamsError
from a2a.utils.proto_utils import validate_proto_required_fields
from google.api import field_behavior_pb2
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError

from cards import card_model, signing
from cards.publishing import render_card
from cards.rendering import validate_card
from personas.models import PersonaClass
from tests.factories import make_agent, make_owner, make_persona, run_on_commit
from virgo.canonical import canonical_bytes

Card = dict[str, Any]


def sdk_accepts(card: Card) -> bool:
    """What publishing asked of a card before: the SDK parses it and finds every REQUIRED field."""
    try:
        validate_proto_required_fields(parse_agent_card(copy.deepcopy(card)))
    except (ParseError, InvalidParamsError):
        return False
    return True


def sdk_payload(card: Card) -> bytes:
    """The payload as it was computed through the SDK's model (and as its verifier does)."""
    as_model = MessageToDict(parse_agent_card(copy.deepcopy(card)))
    as_model.pop("signatures", None)
    return canonical_bytes(signing._signed_form(as_model) or {})


def derived_now() -> Callable[[Card], bool]:
    """The schema derived afresh, not the process's cached one: what these tests prove is the
    derivation itself (the cached copy was derived before any test ran, mutmut's too), and
    the one publishing uses is the same schema."""
    schema = card_model.schema.__wrapped__()
    assert schema == card_model.schema()
    return jsonschema_rs.Draft202012Validator(schema).is_valid


def without_signatures(card: Card) -> Card:
    return {name: value for name, value in card.items() if name != "signatures"}


@pytest.fixture
def rendered_cards(db: None) -> list[Card]:
    """Cards as Virgo renders them: every class, a proven identity and an unproven one, a
    persona with no skill, non-ASCII words, and both before and after the stamp pins the grant."""
    run_on_commit()
    proven = make_agent(make_owner("card-model-ada", organization="ada.example.org"))
    unproven = make_agent(make_owner("card-model-bob", oidc=False))
    personas = [
        make_persona(proven, persona_class=persona_class, name=f"Class {persona_class}")
        for persona_class in PersonaClass
    ]
    personas.append(
        make_persona(
            unproven,
            name="Zoë «review» 😀",
            system_prompt='Relis le code. \u2028 Sois précis\t et "bref".',
            verb_subset=[],
        )
    )
    cards = [render_card(persona) for persona in personas]
    assert any("provider" in card for card in cards)
    extensions = {
        extension["uri"] for card in cards for extension in card["capabilities"]["extensions"]
    }
    assert len(extensions) >= 3, extensions
    return cards


def test_every_rendered_card_is_complete_by_both_and_has_the_sdks_payload(
    rendered_cards: list[Card],
) -> None:
    """S9-CARD-1, VX-TRUST-1: every card Virgo renders passes the derived schema and
    the SDK's own parse and required-field check, and the payload computed without the SDK is
    byte for byte the one its signature verifier rebuilds."""
    is_complete = derived_now()
    for card in rendered_cards:
        assert card_model.is_complete_card(card), card_model.schema_errors(card)
        assert is_complete(card)
        assert sdk_accepts(card)
        assert card_model.as_model(card) == MessageToDict(parse_agent_card(copy.deepcopy(card)))
        assert signing.card_payload(card) == sdk_payload(card)


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path to a member or item of a JSON value."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*path, key)
            yield from _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield (*path, index)
            yield from _paths(item, (*path, index))


def _changed(card: Card, path: tuple[Any, ...], change: Callable[[Any, Any], None]) -> Card:
    copied = copy.deepcopy(card)
    target = copied
    for part in path[:-1]:
        target = target[part]
    change(target, path[-1])
    return copied


def _drop(target: Any, key: Any) -> None:
    del target[key]


def _replace(value: Any) -> Callable[[Any, Any], None]:
    def change(target: Any, key: Any) -> None:
        target[key] = copy.deepcopy(value)

    return change


def _empty(target: Any, key: Any) -> None:
    target[key] = type(target[key])()


CHANGES: dict[str, Callable[[Any, Any], None]] = {
    "dropped": _drop,
    "emptied": _empty,
    "null": _replace(None),
    "a number": _replace(7),
    "a string": _replace("true"),
    "false": _replace(False),
    "true": _replace(True),
    "a list": _replace(["x"]),
    "an object": _replace({"x": "y"}),
}


def changed_cards(card: Card) -> Iterator[tuple[str, Card]]:
    for path in _paths(card):
        for label, change in CHANGES.items():
            if label == "emptied" and not isinstance(_at(card, path), str | list | dict):
                continue
            yield f"{'/'.join(map(str, path))} {label}", _changed(card, path, change)


def _at(card: Card, path: tuple[Any, ...]) -> Any:
    value: Any = card
    for part in path:
        value = value[part]
    return value


def added_cards(card: Card) -> Iterator[tuple[str, Card]]:
    """Fields the model has and Virgo does not use, fields it lacks, and the SDK's legacy ones."""
    scheme = {"httpAuthSecurityScheme": {"scheme": "bearer"}}
    extras: dict[str, Any] = {
        "documentationUrl": "https://docs.example.org/",
        "iconUrl": "",
        "securitySchemes": {"bearer": scheme},
        "securityRequirements": [{"schemes": {"bearer": {"list": ["read"]}}}],
        "url": "https://legacy.example.org/a2a",
        "protocolVersion": "0.3.0",
        "supportsAuthenticatedExtendedCard": True,
        "security": [{"bearer": []}],
        "unknownField": "ignored by the SDK",
        "supported_interfaces": card["supportedInterfaces"],
    }
    for name, value in extras.items():
        yield f"+{name}", {**card, name: value}
    both = {**scheme, "mtlsSecurityScheme": {}}
    yield "+two members of a oneof", {**card, "securitySchemes": {"x": both}}
    yield "+an empty security scheme", {**card, "securitySchemes": {"x": {}}}
    missing_flow = {"oauth2SecurityScheme": {"flows": {}}}
    yield "+an oauth2 scheme without a flow", {**card, "securitySchemes": {"x": missing_flow}}
    capabilities = {**card["capabilities"], "streaming": True, "extendedAgentCard": False}
    yield "+capabilities set both ways", {**card, "capabilities": capabilities}
    extensions = [
        {"uri": "https://example.org/ext", "required": False, "params": {"n": 3, "f": 2.5}},
        {"uri": "https://example.org/ext2", "required": True, "params": {"big": 2**60}},
    ]
    with_extensions = {**card["capabilities"], "extensions": extensions}
    yield "+extensions", {**card, "capabilities": with_extensions}
    skill = {**card["skills"][0], "examples": ["one"], "inputModes": [], "outputModes": ["x"]}
    yield "+a skill with every field", {**card, "skills": [skill]}


def test_the_schema_never_accepts_a_card_the_sdk_refuses(rendered_cards: list[Card]) -> None:
    """S9-CARD-1, VX-TRUST-1: every member of a rendered card dropped, emptied, nulled and given
    every other JSON type, and fields added that the model has, lacks, or maps from A2A 0.3: no
    card the schema accepts is one the SDK refuses, every required field dropped is refused by
    both, and the written-back form matches the SDK's on every card both accept."""
    card = without_signatures(rendered_cards[0])
    is_complete = derived_now()
    accepted = refused_by_both = 0
    for label, candidate in [*changed_cards(card), *added_cards(card)]:
        assert is_complete(candidate) == card_model.is_complete_card(candidate), label
        if is_complete(candidate):
            assert sdk_accepts(candidate), f"the schema accepts what the SDK refuses: {label}"
            expected = MessageToDict(parse_agent_card(copy.deepcopy(candidate)))
            assert card_model.as_model(candidate) == expected, label
            assert signing.card_payload(candidate) == sdk_payload(candidate), label
            accepted += 1
        elif not sdk_accepts(candidate):
            refused_by_both += 1
    assert accepted >= 100 and refused_by_both >= 300, (accepted, refused_by_both)
    for required in ("name", "description", "version", "capabilities", "skills"):
        candidate = {name: value for name, value in card.items() if name != required}
        assert not is_complete(candidate) and not sdk_accepts(candidate)


def test_validate_card_names_what_is_wrong(rendered_cards: list[Card]) -> None:
    """S9-CARD-1: a card outside the model is refused with the field and the reason."""
    card = {**rendered_cards[0], "skills": []}
    with pytest.raises(card_model.CardOutsideModel) as refused:
        validate_card(card)
    assert "skills" in str(refused.value)
    validate_card(rendered_cards[0])


def test_the_schema_is_derived_from_the_sdks_descriptor() -> None:
    """S9-CARD-1: every field of the SDK's AgentCard is in the schema by its JSON name, so a
    field the SDK adds is known to the schema without an edit here."""
    schema = card_model.schema.__wrapped__()
    by_json_name = card_model._fields_by_json_name.__wrapped__(AgentCard.DESCRIPTOR)
    assert by_json_name == {field.json_name: field for field in AgentCard.DESCRIPTOR.fields}
    root = schema["$defs"][AgentCard.DESCRIPTOR.full_name]
    assert set(root["properties"]) == {field.json_name for field in AgentCard.DESCRIPTOR.fields}
    assert set(root["required"]) >= {"name", "supportedInterfaces", "capabilities", "skills"}
    json.dumps(schema)


def test_validate_card_gives_each_problems_path_and_reason(rendered_cards: list[Card]) -> None:
    """S9-CARD-1: each way a card is outside the model is named by where it is: a nested
    member by its path from the card, one slash between the parts, and a member missing
    from the card itself as (card)."""
    card = without_signatures(rendered_cards[0])
    nested = {**card, "capabilities": {**card["capabilities"], "streaming": "yes"}}
    assert card_model.schema_errors(nested) == [
        'capabilities/streaming: "yes" is not of type "boolean"'
    ]
    missing = {name: value for name, value in card.items() if name != "version"}
    assert card_model.schema_errors(missing) == ['(card): "version" is a required property']
    with pytest.raises(card_model.CardOutsideModel) as refused:
        validate_card({**nested, "skills": []})
    assert "capabilities/streaming: " in str(refused.value)
    assert card_model.schema_errors(card) == []


def _probe_model(fields: list[descriptor_pb2.FieldDescriptorProto], oneof: str = "") -> Descriptor:
    """A message an SDK release could add to the model, built in a pool of its own: what the
    current AgentCard does not happen to have is held to the SDK all the same."""
    pool = descriptor_pool.DescriptorPool()
    for needed in (descriptor_pb2.DESCRIPTOR, field_behavior_pb2.DESCRIPTOR):
        proto = descriptor_pb2.FileDescriptorProto()
        needed.CopyToProto(proto)
        pool.Add(proto)
    file = descriptor_pb2.FileDescriptorProto(
        name="probe.proto",
        package="probe",
        syntax="proto3",
        dependency=["google/api/field_behavior.proto"],
    )
    message = file.message_type.add(name="Probe")
    if oneof:
        message.oneof_decl.add(name=oneof)
    message.field.extend(fields)
    pool.Add(file)
    return pool.FindMessageTypeByName("probe.Probe")


def _probe_field(
    name: str, number: int, kind: int, *, required: bool = False, in_oneof: bool = False
) -> descriptor_pb2.FieldDescriptorProto:
    field = descriptor_pb2.FieldDescriptorProto(
        name=name,
        number=number,
        type=kind,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
    )
    if in_oneof:
        field.oneof_index = 0
    if required:
        field.options.Extensions[field_behavior_pb2.field_behavior].append(
            field_behavior_pb2.REQUIRED
        )
    return field


def test_the_derivation_follows_the_sdk_on_shapes_agentcard_lacks_today() -> None:
    """S9-CARD-1: the schema is derived so that an SDK release changing the model changes it
    too. A REQUIRED bool without presence is refused by the SDK unless true (not its default),
    and two members of a two-member oneof are refused by its parser: the derived schema
    agrees with the SDK on each."""
    kinds = descriptor_pb2.FieldDescriptorProto
    probe = _probe_model(
        [
            _probe_field("enabled", 1, kinds.TYPE_BOOL, required=True),
            _probe_field("left", 2, kinds.TYPE_STRING, in_oneof=True),
            _probe_field("right", 3, kinds.TYPE_STRING, in_oneof=True),
        ],
        oneof="side",
    )
    definitions: dict[str, Any] = {}
    root = card_model._message_ref(probe, definitions)
    is_valid = jsonschema_rs.Draft202012Validator({**root, "$defs": definitions}).is_valid
    probe_class = message_factory.GetMessageClass(probe)

    def sdk_accepts_probe(document: dict[str, Any]) -> bool:
        try:
            validate_proto_required_fields(ParseDict(document, probe_class()))
        except (ParseError, InvalidParamsError):
            return False
        return True

    verdicts = {
        "true": ({"enabled": True}, True),
        "false, the default": ({"enabled": False}, False),
        "absent": ({}, False),
        "one member of the oneof": ({"enabled": True, "left": "a"}, True),
        "both members of the oneof": ({"enabled": True, "left": "a", "right": "b"}, False),
    }
    for label, (document, accepted) in verdicts.items():
        assert sdk_accepts_probe(document) is accepted, label
        assert is_valid(document) is accepted, label


def test_a_field_type_the_schema_cannot_express_stops_the_derivation_naming_it() -> None:
    """S9-CARD-1: a field of a type the schema has no rule for (a number, here) is not
    passed over, which would let any value through: deriving stops and names the field."""
    kinds = descriptor_pb2.FieldDescriptorProto
    probe = _probe_model([_probe_field("count", 1, kinds.TYPE_INT32)])
    with pytest.raises(NotImplementedError, match=r"probe\.Probe\.count"):
        card_model._message_ref(probe, {})
