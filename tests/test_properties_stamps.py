"""Property-based tests (hypothesis) of the stamp factory, its validator and canonical hashing.

For random verb subsets of random persona classes, stamps.factory.build_stamp (which runs the
JSON Schema and the semantic validator before it returns) must emit a stamp exactly when the
subset holds every tool the class requires and nothing the class may not have, and otherwise
refuse naming each offending tool. Examples are bounded and derandomized.
"""

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from personas.catalogue import VERBS, VERBS_BY_NAME
from stamps import profiles
from stamps.factory import build_stamp
from stamps.problems import Code, StampRejected
from stamps.validation import validate_stamp
from tests.factories import stamp_kwargs
from virgo.canonical import I_JSON_MAX_INT, canonical_bytes, parse_strict, stamp_hash

PROPERTY = settings(max_examples=120, deadline=None, database=None, derandomize=True)

VERB_NAMES = [verb.name for verb in VERBS]


@st.composite
def class_and_subset(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A class, and a subset near its standing set: some required tools dropped, some optional
    ones the class may have added, some it may not have added (each part often empty)."""
    persona_class = draw(st.sampled_from(profiles.CLASSES))
    required = profiles.required_tools(persona_class)
    allowed = profiles.allowed_tools(persona_class)
    forbidden = [name for name in VERB_NAMES if name not in allowed]
    dropped = draw(st.sets(st.sampled_from(required), max_size=3))
    optional = [name for name in allowed if name not in required]
    added = draw(st.sets(st.sampled_from(optional), max_size=len(optional))) if optional else set()
    intruders = draw(st.sets(st.sampled_from(forbidden), max_size=3)) if forbidden else set()
    subset = [name for name in required if name not in dropped] + sorted(added | intruders)
    return persona_class, draw(st.permutations(subset))


@PROPERTY
@given(case=class_and_subset())
def test_a_stamp_stands_iff_the_subset_covers_the_class_and_stays_inside_it(
    case: tuple[str, list[str]],
) -> None:
    """V1-FAC-4, V1-INV-1, V1-INV-2, V1-POL-2, V1-ACC-2: build_stamp validates before it emits;
    it stands iff required(class) <= subset <= allowed(class), and each refusal names a concrete
    tool: exactly the missing required ones and exactly the ones the class may not have."""
    persona_class, subset = case
    required = set(profiles.required_tools(persona_class))
    allowed = set(profiles.allowed_tools(persona_class))
    try:
        document = build_stamp(**stamp_kwargs(persona_class, verb_subset=subset))
    except StampRejected as rejected:
        problems = rejected.problems
    else:
        assert required <= set(subset) <= allowed
        assert sorted(tool["name"] for tool in document["tools"]) == sorted(subset)
        validate_stamp(document)
        return
    assert not required <= set(subset) <= allowed
    for problem in problems:
        assert problem.item in VERBS_BY_NAME, problem
        assert problem.item in problem.message, problem
    assert {p.item for p in problems if p.code is Code.MISSING_TOOL} == required - set(subset)
    assert {p.item for p in problems if p.code is Code.NOT_IN_CLASS} == set(subset) - allowed
    assert {p.code for p in problems} <= {Code.MISSING_TOOL, Code.NOT_IN_CLASS}
    assert all(
        p.message == f"not standing: missing tool {p.item}"
        for p in problems
        if p.code is Code.MISSING_TOOL
    )


@PROPERTY
@given(persona_class=st.sampled_from(profiles.CLASSES), data=st.data())
def test_removing_tools_from_a_standing_stamp_names_each_missing_one(
    persona_class: str, data: st.DataObject
) -> None:
    """V1-INV-2, V1-BOOT-1: the validator, run on a document (as at boot), reports each
    required tool removed from it by name."""
    document = build_stamp(**stamp_kwargs(persona_class))
    names = [tool["name"] for tool in document["tools"]]
    removed = data.draw(st.sets(st.sampled_from(names), min_size=1, max_size=5))
    document["tools"] = [tool for tool in document["tools"] if tool["name"] not in removed]
    missing = removed & set(profiles.required_tools(persona_class))
    try:
        validate_stamp(document)
    except StampRejected as rejected:
        reported = {p.item for p in rejected.problems if p.code is Code.MISSING_TOOL}
        assert reported == missing
    else:
        assert not missing


# Canonical bytes ------------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-I_JSON_MAX_INT, max_value=I_JSON_MAX_INT)
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


def shuffled(value: Any, data: st.DataObject) -> Any:
    """The same JSON value with every object's keys in an order hypothesis chooses."""
    if isinstance(value, dict):
        keys = data.draw(st.permutations(list(value)))
        return {key: shuffled(value[key], data) for key in keys}
    if isinstance(value, list):
        return [shuffled(item, data) for item in value]
    return value


@PROPERTY
@given(document=st.dictionaries(st.text(max_size=8), json_values, max_size=6), data=st.data())
def test_the_canonical_hash_ignores_key_order_and_round_trips(
    document: dict[str, Any], data: st.DataObject
) -> None:
    """V1-FAC-5, V1-STAMP-2: RFC 8785 bytes (hence the hash) do not depend on key order, and the
    strict reader gives back the very document they encode."""
    reordered = shuffled(document, data)
    assert canonical_bytes(reordered) == canonical_bytes(document)
    assert stamp_hash(reordered) == stamp_hash(document)
    assert parse_strict(canonical_bytes(document)) == document


@PROPERTY
@given(case=class_and_subset(), data=st.data())
def test_a_stamps_hash_ignores_key_order(case: tuple[str, list[str]], data: st.DataObject) -> None:
    """V1-FAC-5: a built stamp hashes the same whatever order its keys are written in."""
    persona_class, subset = case
    try:
        document = build_stamp(**stamp_kwargs(persona_class, verb_subset=subset))
    except StampRejected:
        document = build_stamp(**stamp_kwargs(persona_class))
    assert stamp_hash(shuffled(document, data)) == stamp_hash(document)
