"""The stamp factory's fast paths give exactly the answers of the slow ones they stand in for.

Canonical bytes come from the C JSON encoder when a document allows it (virgo.canonical), and
a schema check from compiled code before jsonschema is asked for the wording (stamps.validation).
Both are only worth having if nothing observable changes: same bytes, so the same hashes; the
same verdict, so the same stamps refused.
"""

import copy
import dataclasses
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import rfc8785

from personas.catalogue import VERBS
from personas.models import PersonaClass
from stamps import grant, validation
from stamps.factory import build_stamp
from stamps.problems import StampRejected
from stamps.registry import HandlerRegistry
from stamps.validation import schema_problems
from tests.factories import stamp_kwargs
from virgo import canonical
from virgo.canonical import canonical_bytes, stamp_bytes


@pytest.mark.parametrize("persona_class", list(PersonaClass))
def test_every_class_stamp_has_the_rfc8785_bytes(persona_class: str) -> None:
    """V1-FAC-5, V1-STAMP-2: the canonical bytes (and so the hash) are RFC 8785's, byte for byte."""
    document = build_stamp(**stamp_kwargs(persona_class))
    assert canonical_bytes(document) == rfc8785.dumps(document)
    assert stamp_bytes(document) == rfc8785.dumps(document)


def test_escapes_and_non_ascii_text_match_rfc8785() -> None:
    """Control characters, quotes, backslashes, line separators, accents, astral characters and
    private-use characters in values, integers at the I-JSON edge, nesting and empty containers."""
    document = {
        "name": 'Zoë "quoted" \\ \x00\x01\x1f\x7f \b\f\n\r\t \u2028\u2029 😀 \ue000 \uffff',
        "numbers": [0, -1, 2**53 - 1, -(2**53 - 1), True, False, None],
        "nested": {"b": [], "a": {}, "B": "upper sorts first", "_": "underscore"},
    }
    assert canonical_bytes(document) == rfc8785.dumps(document)
    assert stamp_bytes(document) == rfc8785.dumps(document)


def test_what_orjson_cannot_write_is_written_by_rfc8785_or_refused_as_before() -> None:
    """V1-STAMP-2: a lone surrogate (not UTF-8) is left to rfc8785, which refuses it as before."""
    with pytest.raises(rfc8785.CanonicalizationError):
        stamp_bytes({"name": "\ud800"})
    with pytest.raises(rfc8785.CanonicalizationError):
        canonical_bytes({"name": "\ud800"})


def test_stored_bytes_parse_as_the_strict_reader_parses_them() -> None:
    """V1-BOOT-1: the reader `virgo check` uses on bytes whose hash matched their stored stamp
    gives parse_strict's document, and still refuses a duplicate key with parse_strict's words;
    bytes that are not written canonically go to parse_strict too."""
    data = stamp_bytes(build_stamp(**stamp_kwargs()))
    assert canonical.parse_stored(data) == canonical.parse_strict(data)
    spaced = data.replace(b'","', b'", "', 1)
    assert canonical.parse_stored(spaced) == canonical.parse_strict(spaced)
    twice = data[:-1] + b',"schema_version":3}'
    with pytest.raises(canonical.MalformedStamp, match="duplicate key 'schema_version'"):
        canonical.parse_stored(twice)
    with pytest.raises(canonical.MalformedStamp, match="not JSON"):
        canonical.parse_stored(data[:-1])
    with pytest.raises(canonical.MalformedStamp, match="top level"):
        canonical.parse_stored(b"[1]")


def test_a_batch_asks_the_rules_once_per_set_and_refuses_each_stamp_alike(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """V1-FAC-4: with a batch's Verdicts the factory asks the semantic validator once for stamps
    alike (only their identity differs), refuses every one of them when the verdict is no, and
    asks again for a stamp whose tools differ."""
    asked: list[dict[str, Any]] = []
    semantic_problems = validation.semantic_problems

    def counted(document: dict[str, Any], **kwargs: Any) -> Any:
        asked.append(document)
        return semantic_problems(document, **kwargs)

    monkeypatch.setattr(validation, "semantic_problems", counted)
    verdicts = validation.Verdicts()
    first, second = (
        stamp_kwargs(
            persona=dataclasses.replace(stamp_kwargs()["persona"], id=str(uuid.uuid4()), name=n)
        )
        for n in ("One", "Two")
    )
    assert build_stamp(**first, verdicts=verdicts)["persona"]["name"] == "One"
    assert build_stamp(**second, verdicts=verdicts)["persona"]["name"] == "Two"
    assert len(asked) == 1
    refused = HandlerRegistry(
        verb.handler_action for verb in VERBS if verb.handler_action != "todos.complete"
    )
    strict = validation.Verdicts(registry=refused)
    for kwargs in (first, second):
        with pytest.raises(StampRejected, match=r"todos\.complete"):
            build_stamp(**kwargs, registry=refused, verdicts=strict)
    assert len(asked) == 2
    other = stamp_kwargs(queues=["reviews", "triage"])
    build_stamp(**other, verdicts=verdicts)
    assert len(asked) == 3


def test_a_grant_takes_the_encoder_and_has_the_rfc8785_bytes() -> None:
    """VX-GRANT-3, V1-STAMP-2: the grant a digest covers (tuples, as dataclasses.asdict keeps
    them) is written by the C encoder, byte for byte as rfc8785 writes it, so the digest pinned
    in every published card is unchanged."""
    of_stamp = grant.grant_of(build_stamp(**stamp_kwargs(PersonaClass.CODER_DEPUTY)))
    assert of_stamp.tools and of_stamp.queues
    as_dataclass = {"definition": grant.GRANT_DEFINITION, "grant": dataclasses.asdict(of_stamp)}
    assert of_stamp.as_json() == as_dataclass["grant"]
    assert canonical._plain(as_dataclass)
    assert grant.digest_message(of_stamp) == rfc8785.dumps(as_dataclass)
    assert canonical_bytes(as_dataclass) == rfc8785.dumps(as_dataclass)
    nested = {"paths": ("a", ("b", "ü")), "empty": ()}
    assert canonical._plain(nested)
    assert canonical_bytes(nested) == rfc8785.dumps(nested)


@pytest.mark.parametrize(
    "document",
    [
        {"é": 1, "\ue000": 2, "😀": 3, "z": 4},  # keys whose UTF-16 order is not code point order
        {"ratio": 1.5},  # floats print differently: left to rfc8785
    ],
)
def test_what_the_encoder_cannot_promise_goes_to_rfc8785(document: dict[str, Any]) -> None:
    assert canonical_bytes(document) == rfc8785.dumps(document)


def test_integers_outside_i_json_are_refused_as_before() -> None:
    with pytest.raises(rfc8785.IntegerDomainError):
        canonical_bytes({"generation": 2**53})


def _set(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        target = document
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value

    return change


def _drop(path: list[Any]) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        target = document
        for part in path[:-1]:
            target = target[part]
        del target[path[-1]]

    return change


@pytest.mark.parametrize(
    "change",
    [
        _drop(["persona", "name"]),
        _set(["persona", "extra"], "x"),
        _set(["persona", "generation"], 0),
        _set(["persona", "generation"], "1"),
        _set(["persona", "id"], "not-a-uuid"),
        _set(["persona", "name"], ""),
        _set(["persona", "class"], "overlord"),
        _set(["authority", "owning_lead"], 42),
        _set(["authority", "human", "channel"], "email"),
        _set(["tools", 0, "handler_action"], "Not.An.Action"),
        _set(["tools", 0, "scope", "extra"], True),
        _set(["base_composition_hash"], "z" * 64),
        _set(["schema_version"], 2),
    ],
)
def test_the_compiled_check_refuses_what_jsonschema_refuses(
    change: Callable[[dict[str, Any]], None],
) -> None:
    """V1-FAC-4: a stamp the JSON Schema refuses is still refused, with jsonschema's words."""
    document = copy.deepcopy(build_stamp(**stamp_kwargs()))
    assert schema_problems(document) == []
    change(document)
    problems = schema_problems(document)
    assert problems
    assert all(problem.message.startswith("schema v3: at ") for problem in problems)


def test_stamps_alike_share_their_tool_grants_and_nothing_else() -> None:
    """VX-GRANT-3: the tool grants worked out once for stamps with the same tools are those of
    each stamp worked out alone; another class or other tools are worked out on their own."""
    first = build_stamp(**stamp_kwargs(ask_first_verbs=["claim"]))
    second = copy.deepcopy(first)
    second["persona"]["name"] = "Another"
    grant._tool_grants.clear()
    assert grant.grant_of(first).tools is grant.grant_of(second).tools
    assert len(grant._tool_grants) == 1
    alone = tuple(sorted((grant._tool(tool) for tool in first["tools"]), key=lambda t: t.name))
    assert grant.grant_of(first).tools == alone
    assert grant.grant_of(first).ask_first == ("claim",)
    narrowed = copy.deepcopy(first)
    narrowed["tools"] = [tool for tool in narrowed["tools"] if tool["name"] != "claim"]
    assert "claim" not in {tool.name for tool in grant.grant_of(narrowed).tools}
    assert grant.grant_of(narrowed).ask_first == ()
    assert len(grant._tool_grants) == 2
