"""What a persona change is judged against (stamps.review): the stamp the runtime reads, else the
last generation that stood, else nothing; and what a refused write says, field by field."""

from typing import Any

import pytest

from personas import services
from personas.models import Generation, Persona, RevocationReason
from personas.services.generations import _next_generation
from stamps import profiles, review
from stamps.models import CapabilityStamp
from stamps.review import grant_diff
from tests.grant_support import broken_generation, patch, state
from tests.runtime_support import standing_persona

pytestmark = pytest.mark.django_db


@pytest.fixture
def persona() -> Persona:
    return standing_persona(extra=("claim", "list_todos"))


def _current(persona: Persona) -> Generation:
    return persona.generations.get(number=persona.generation)


def _proposed(persona: Persona, **changes: Any) -> tuple[Generation, Generation]:
    """The persona's current generation and the unsaved one the changes would open."""
    current = _current(persona)
    for field, value in changes.items():
        setattr(persona, field, value)
    proposed = _next_generation(persona, services.current_skill_map(), current)
    assert proposed is not None
    return current, proposed


def _stored(persona: Persona, number: int) -> CapabilityStamp:
    return CapabilityStamp.objects.get(generation__persona=persona, generation_number=number)


def test_a_change_is_judged_against_the_stamp_the_runtime_reads(
    persona: Persona, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-GRANT-1, VX-GRANT-2: after a release that gives the class another writable path, the
    next change is compared with the stored stamp the runtime enforces, not with a stamp the new
    code would build for the current generation: the new path shows, and waits, as a widening."""
    stored = _stored(persona, persona.generation)
    paths = profiles.mutable_paths
    monkeypatch.setattr(
        profiles, "mutable_paths", lambda *args: tuple(sorted((*paths(*args), "deploy/**")))
    )
    current, proposed = _proposed(persona, name="Renamed after the release")
    diff = grant_diff(current=current, proposed=proposed)
    assert diff["paths_added"] == ["deploy/**"]
    assert diff["widens"] is True
    assert diff["current_stamp_hash"] == stored.stamp_hash
    assert diff["compared_with_generation"] == current.number


def test_a_stamp_of_an_older_schema_is_built_again_to_judge_against(
    persona: Persona, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-GRANT-1: a stored stamp of an earlier schema version is not read as today's grant; the
    generation's stamp is composed again by the factory (the same bytes: the build is pure)."""
    stored = _stored(persona, persona.generation)
    monkeypatch.setattr(review, "SCHEMA_VERSION", stored.schema_version + 1)
    current, proposed = _proposed(persona, name="Renamed after the upgrade")
    diff = grant_diff(current=current, proposed=proposed)
    assert diff["current_stamp_hash"] == stored.stamp_hash
    assert (diff["widens"], diff["compared_with_generation"]) == (False, current.number)


def test_a_generation_that_stood_but_would_not_today_grants_nothing_to_judge_against(
    persona: Persona, monkeypatch: pytest.MonkeyPatch
) -> None:
    """VX-GRANT-2: judged from a broken generation, the last one that stood counts only if its
    grant can still be read: its stamp of an older schema, composed again after a release that
    requires a tool it lacks, grants nothing, so every tool of the change is a widening."""
    stood = _stored(persona, persona.generation)
    broken = broken_generation(persona, "resolve_decision")
    monkeypatch.setattr(review, "SCHEMA_VERSION", stood.schema_version + 1)
    required = profiles.required_tools(broken.persona_class)
    monkeypatch.setattr(profiles, "required_tools", lambda persona_class: (*required, "complete"))
    verbs = [verb for verb in broken.verb_subset if verb != "resolve_decision"]
    current, proposed = _proposed(broken, verb_subset=[*verbs, "complete"])
    diff = grant_diff(current=current, proposed=proposed)
    assert (diff["current_stamp_hash"], diff["compared_with_generation"]) == ("", None)
    assert diff["tools_added"] == sorted([*verbs, "complete"])


def test_after_a_revoked_generation_everything_the_next_grants_is_new(persona: Persona) -> None:
    """VX-GRANT-2, VX-TRUST-5: a revoked generation grants nothing to compare with: when the
    owner's next write is broken too, the change after it is judged against nothing."""
    services.persona_revoke(
        persona=persona,
        actor=persona.agent.owner,
        reason_code=RevocationReason.values[0],
        reason="leaked token",
        via="api",
        generation=persona.generation,
    )
    persona.refresh_from_db()
    verbs = list(persona.verb_subset)
    broken = broken_generation(persona, "resolve_decision")
    current, proposed = _proposed(broken, verb_subset=verbs)
    diff = grant_diff(current=current, proposed=proposed)
    assert (diff["current_stamp_hash"], diff["compared_with_generation"]) == ("", None)
    assert diff["tools_added"] == sorted(verbs) and diff["widens"] is True


def test_the_generation_that_stood_is_this_personas_own(persona: Persona) -> None:
    """VX-GRANT-2: the last generation that stood is looked up among this persona's only: another
    persona's newer standing generation is never what a change is judged against."""
    verbs = list(persona.verb_subset)
    stood = persona.generation
    twice = broken_generation(broken_generation(persona, "resolve_decision"), "assign_task")
    other = standing_persona(extra=("claim", "list_todos"))
    patch(other, name="Another persona, one generation on")
    other.refresh_from_db()
    assert state(other)[:2] == (stood + 1, True) and twice.generation == stood + 2
    current, proposed = _proposed(twice, verb_subset=verbs)
    diff = grant_diff(current=current, proposed=proposed)
    assert diff["compared_with_generation"] == stood
    assert diff["current_stamp_hash"] == _stored(persona, stood).stamp_hash


def test_a_new_persona_is_judged_against_nothing(persona: Persona) -> None:
    """VX-GRANT-2: a persona's first generation has nothing before it: no hash, no generation,
    every tool added."""
    diff = grant_diff(current=None, proposed=_current(persona))
    assert (diff["current_stamp_hash"], diff["current_generation"]) == ("", None)
    assert diff["compared_with_generation"] is None
    assert diff["tools_added"] == sorted(persona.verb_subset)


def test_a_refusal_names_the_missing_tools_first_then_every_other_problem(
    persona: Persona,
) -> None:
    """VX-GRANT-4: a write that drops two required tools and adds a verb the class may not have
    is refused naming all three, the missing tools in one line first; its next stamp has no hash
    because there is no next stamp."""
    required = profiles.required_tools(persona.persona_class)
    dropped = sorted(required[:2])
    kept = [verb for verb in persona.verb_subset if verb not in dropped]
    current, proposed = _proposed(persona, verb_subset=[*kept, "resolve_decision"])
    diff = grant_diff(current=current, proposed=proposed)
    [barred] = [p for p in diff["next_problems"] if "resolve_decision" in p]
    assert diff["refuses"] == {
        "verb_subset": [
            f"missing tools a {persona.persona_class} needs: {', '.join(dropped)}",
            barred,
        ]
    }
    assert (diff["next_stands"], diff["next_stamp_hash"]) == (False, "")


def test_a_broken_persona_is_refused_only_what_the_write_adds(persona: Persona) -> None:
    """VX-GRANT-4: from a persona already broken by one verb, a write that adds a second verb the
    class may not have is refused for the second only, however the factory orders the two."""
    broken = broken_generation(persona, "resolve_decision")
    for added in ("assign_task", "send_human_message"):
        current, proposed = _proposed(broken, verb_subset=[*broken.verb_subset, added])
        refused = grant_diff(current=current, proposed=proposed)["refuses"]["verb_subset"]
        assert len(refused) == 1 and added in refused[0], (added, refused)
        broken.refresh_from_db()
