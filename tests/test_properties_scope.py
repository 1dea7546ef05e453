"""Property-based tests (hypothesis) of the subset rule and of skill derivation.

The pure functions are exercised directly on unsaved rows: personas.services.validate_scope
(SPEC-0009: verb_subset and queues are subsets of the agent's grant) and derive_skills (a skill
is advertised exactly when all of its required verbs are in the subset). Examples are bounded
and derandomized, so a run is reproducible and quick.
"""

from collections.abc import Sequence

import pytest
from django.core.exceptions import ValidationError
from hypothesis import given, settings
from hypothesis import strategies as st

from personas.catalogue import VERBS
from personas.models import Agent, Skill
from personas.services import derive_skills, validate_grant, validate_scope

PROPERTY = settings(max_examples=150, deadline=None, database=None, derandomize=True)

VERB_NAMES = [verb.name for verb in VERBS]
# Names outside the catalogue too: the subset rule is about the grant, not about the catalogue.
# No comma or space, so that the names an error lists can be read back from its message.
names = st.one_of(st.sampled_from(VERB_NAMES), st.from_regex(r"\A[a-z][a-z0-9_.-]{0,15}\Z"))
unique_lists = st.lists(names, unique=True, max_size=12)


def agent_with(verbs: Sequence[str], queues: Sequence[str]) -> Agent:
    return Agent(name="granted", granted_verbs=list(verbs), granted_queues=list(queues))


def named_in(message: str) -> list[str]:
    """The values an error message lists after its colon, in order."""
    return message.split(": ", 1)[1].split(", ")


def scope_errors(agent: Agent, verbs: list[str], queues: list[str]) -> dict[str, list[str]]:
    try:
        validate_scope(agent, verbs, queues)
    except ValidationError as exc:
        return exc.message_dict
    return {}


@st.composite
def grant_and_request(draw: st.DrawFn) -> tuple[list[str], list[str]]:
    """A grant, and a request mixing values from the grant with values outside it."""
    grant = draw(unique_lists)
    inside = draw(st.lists(st.sampled_from(grant), unique=True)) if grant else []
    outside = draw(st.lists(names.filter(lambda name: name not in grant), unique=True, max_size=4))
    requested = draw(st.permutations(list(dict.fromkeys(inside + outside))))
    return grant, requested


@PROPERTY
@given(verbs=grant_and_request(), queues=grant_and_request())
def test_the_subset_rule_accepts_exactly_subsets_and_names_each_offending_value(
    verbs: tuple[list[str], list[str]], queues: tuple[list[str], list[str]]
) -> None:
    """S9-REC-4, S9-SCN-2: a request is accepted iff each of verb_subset and queues is a subset
    of the agent's grant; a refusal names exactly the values outside it, in the request's order,
    under the field they were sent in."""
    (verb_grant, verb_request), (queue_grant, queue_request) = verbs, queues
    errors = scope_errors(agent_with(verb_grant, queue_grant), verb_request, queue_request)
    for field, grant, requested in (
        ("verb_subset", verb_grant, verb_request),
        ("queues", queue_grant, queue_request),
    ):
        outside = [value for value in requested if value not in grant]
        if not outside:
            assert field not in errors
            continue
        [message] = errors[field]
        assert message.startswith("not in agent 'granted''s vended grant: ")
        assert named_in(message) == outside


@PROPERTY
@given(grant=unique_lists, data=st.data())
def test_a_repeated_value_is_refused_and_named_even_inside_the_grant(
    grant: list[str], data: st.DataObject
) -> None:
    """S9-REC-4: a subset is a set; a request that repeats a value is refused naming it."""
    if not grant:
        return
    requested = data.draw(st.lists(st.sampled_from(grant), min_size=1))
    repeated = sorted({value for value in requested if requested.count(value) > 1})
    errors = scope_errors(agent_with(grant, []), requested, [])
    if not repeated:
        assert errors == {}
        return
    assert errors == {"verb_subset": [f"duplicate values: {', '.join(repeated)}"]}


@pytest.mark.parametrize("bad", [None, "claim", [""], ["claim", 3], {"claim": True}])
def test_a_subset_that_is_not_a_list_of_names_is_refused(bad: object) -> None:
    """S9-REC-4: whatever arrives, the answer is a field error, never an exception."""
    errors = scope_errors(agent_with(["claim"], ["reviews"]), bad, ["reviews"])  # type: ignore[arg-type]
    assert errors == {"verb_subset": ["must be a list of non-empty strings"]}


@pytest.mark.parametrize("bad", [None, [""]])
def test_a_malformed_subset_does_not_hide_what_is_wrong_with_the_queues(bad: object) -> None:
    """S9-REC-4: both fields are checked, so one answer names everything to fix."""
    errors = scope_errors(agent_with(["claim"], ["reviews"]), bad, ["deploys"])  # type: ignore[arg-type]
    assert errors == {
        "verb_subset": ["must be a list of non-empty strings"],
        "queues": ["not in agent 'granted''s vended grant: deploys"],
    }


def grant_errors(verbs: object, queues: object) -> dict[str, list[str]]:
    try:
        validate_grant(verbs, queues)
    except ValidationError as exc:
        return exc.message_dict
    return {}


@pytest.mark.parametrize("bad", [None, "claim", [""], ["claim", 3], {"claim": True}])
def test_a_grant_that_is_not_a_list_of_names_is_refused_under_its_own_field(bad: object) -> None:
    """S9-REC-4: the grant the subset rule measures against is itself a list of names; each
    malformed half is a field error under its own name, and both are reported at once."""
    refused = ["must be a list of non-empty strings"]
    assert grant_errors(bad, ["reviews"]) == {"granted_verbs": refused}
    assert grant_errors(["claim"], bad) == {"granted_queues": refused}
    assert grant_errors(bad, bad) == {"granted_verbs": refused, "granted_queues": refused}


def test_a_grant_names_every_unknown_verb_and_every_repeat() -> None:
    """S9-REC-4: a grant of verbs outside the catalogue is refused naming each one."""
    assert grant_errors(["claim", "fly", "swim"], []) == {
        "granted_verbs": ["unknown verbs: fly, swim"]
    }
    assert grant_errors(["claim"], ["a", "b", "a", "b"]) == {
        "granted_queues": ["duplicate values: a, b"]
    }
    assert validate_grant(["claim", "complete"], ["reviews"]) == (
        ["claim", "complete"],
        ["reviews"],
    )


# Skill derivation -----------------------------------------------------------------------------

skill_maps = st.lists(
    st.lists(st.sampled_from(VERB_NAMES), unique=True, max_size=4),
    max_size=8,
).map(
    lambda requirements: [
        Skill(slug=f"skill-{index}", required_verbs=required)
        for index, required in enumerate(requirements)
    ]
)
subsets = st.lists(st.sampled_from(VERB_NAMES), max_size=20)


def slugs(skills: Sequence[Skill]) -> list[str]:
    return [skill.slug for skill in skills]


@PROPERTY
@given(skill_map=skill_maps, subset=subsets)
def test_a_skill_is_derived_iff_all_its_required_verbs_are_in_the_subset(
    skill_map: list[Skill], subset: list[str]
) -> None:
    """S9-SKL-1, S9-SKL-2: derived from the subset alone; a skill whose required verb is absent
    is never derived (nor one that requires nothing, which no capability backs)."""
    derived = slugs(derive_skills(subset, skill_map))
    expected = [
        skill.slug
        for skill in skill_map
        if skill.required_verbs and all(verb in subset for verb in skill.required_verbs)
    ]
    assert derived == expected


@PROPERTY
@given(skill_map=skill_maps, subset=subsets, verb=st.sampled_from(VERB_NAMES))
def test_adding_a_verb_never_removes_a_skill(
    skill_map: list[Skill], subset: list[str], verb: str
) -> None:
    """S9-SKL-3, S9-SCN-4: the derivation is monotone: a wider subset advertises at least as
    much, and what it adds are exactly the skills that needed the new verb."""
    before = set(slugs(derive_skills(subset, skill_map)))
    after = set(slugs(derive_skills([*subset, verb], skill_map)))
    assert before <= after
    assert all(verb in skill.required_verbs for skill in skill_map if skill.slug in after - before)


@PROPERTY
@given(skill_map=skill_maps, subset=subsets, data=st.data())
def test_order_and_repetition_of_the_subset_do_not_matter(
    skill_map: list[Skill], subset: list[str], data: st.DataObject
) -> None:
    """S9-SKL-1: the subset is a set of verbs; the skills follow the map's own order."""
    shuffled = data.draw(st.permutations(subset + subset[: len(subset) // 2]))
    assert slugs(derive_skills(shuffled, skill_map)) == slugs(derive_skills(subset, skill_map))


@pytest.mark.django_db
def test_without_create_for_the_real_map_never_derives_delegate_work() -> None:
    """S9-SCN-3, S9-SKL-2: on the authoritative (seeded) map, no subset without create_for
    derives delegate-work, and create_for alone does."""
    skill_map = list(Skill.objects.all())

    @PROPERTY
    @given(subset=st.lists(st.sampled_from([v for v in VERB_NAMES if v != "create_for"])))
    def without_create_for(subset: list[str]) -> None:
        assert "delegate-work" not in slugs(derive_skills(subset, skill_map))

    without_create_for()
    assert "delegate-work" in slugs(derive_skills(["create_for"], skill_map))
