"""The active stamp a process keeps under its persona's change token (runtime.stamp,
virgo.persona_tokens): read once, then served with no database read, and never past a change.

Transactional: inside a transaction nothing is kept, so these tests run outside one, as the MCP
servers and the remote endpoint do.
"""

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import transaction

from cards import fastpath
from personas.models import RevocationReason
from runtime import rules, stamp
from runtime.handler import decide
from runtime.operations import Binding, Operation
from runtime.stamp import StampUnavailable, load_active_stamp
from stamps.storage import stamp_path
from tests.factories import update_persona
from tests.failing_caches import went_without
from tests.live import RedisServer
from tests.revocation_support import revoke
from tests.runtime_support import standing_persona
from virgo import persona_tokens
from virgo.persona_tokens import Token

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def nothing_kept() -> Iterator[None]:
    stamp._kept.clear()
    yield
    stamp._kept.clear()


def warm(persona: Any) -> stamp.ActiveStamp:
    first = load_active_stamp(persona)
    assert str(persona.uuid) in stamp._kept
    return first


def test_a_kept_stamp_is_served_without_reading_the_database(
    django_assert_num_queries: Any,
) -> None:
    """VX-REMOTE-2: while the persona's token and its file are unchanged, a call reads neither
    its persona nor its generation nor its stored stamp again (what makes decide() warm)."""
    persona = standing_persona()
    first = warm(persona)
    with django_assert_num_queries(0):
        again = load_active_stamp(persona)
        decided = decide(persona, "workspace_list", {"path": "."}, "kept-1")
    assert again is first
    assert decided.refusal is None and decided.call is not None


def test_a_revoked_persona_is_refused_on_the_next_call() -> None:
    """VX-REMOTE-2, VX-TRUST-5: revoking moves the token, so the kept stamp is not used."""
    persona = standing_persona()
    warm(persona)
    revoke(persona, persona.agent.owner)
    with pytest.raises(StampUnavailable) as refused:
        load_active_stamp(persona)
    assert refused.value.code == "revoked"
    assert decide(persona, "workspace_list", {"path": "."}, "kept-2").refusal.code == "revoked"


def test_a_revoked_generation_is_refused_on_the_next_call() -> None:
    """VX-REMOTE-2, VX-TRUST-5: the current generation revoked alone is refused as well."""
    persona = standing_persona()
    kept = warm(persona)
    revoke(
        persona,
        persona.agent.owner,
        reason_code=RevocationReason.SUPERSEDED,
        generation=kept.generation,
    )
    with pytest.raises(StampUnavailable, match=f"generation {kept.generation}") as refused:
        load_active_stamp(persona)
    assert refused.value.code == "revoked"


def test_a_changed_grant_is_read_on_the_next_call() -> None:
    """VX-REMOTE-2: a new generation (a verb removed) is what the next call decides under."""
    persona = standing_persona(extra=("claim",))
    kept = warm(persona)
    assert "claim" in kept.tools
    narrowed = [verb for verb in persona.verb_subset if verb != "claim"]
    update_persona(persona, verb_subset=narrowed)
    now = load_active_stamp(persona)
    assert now.generation == kept.generation + 1
    assert "claim" not in now.tools
    refusal = decide(persona, "claim", {}, "kept-3").refusal
    assert refusal is not None and refusal.code == "not_granted"


def test_an_altered_file_is_refused_though_its_stamp_was_kept() -> None:
    """VX-OPS-4: the file's bytes are read on every call, kept or not; altered, the persona is
    quarantined and refused."""
    persona = standing_persona()
    kept = warm(persona)
    path = stamp_path(persona.uuid, kept.generation)
    path.write_bytes(kept.data.replace(b"workspace", b"workspacE", 1))
    with pytest.raises(StampUnavailable, match="was altered") as refused:
        load_active_stamp(persona)
    assert refused.value.quarantined
    persona.refresh_from_db()
    assert persona.standing is False


def test_a_missing_file_is_written_again_though_its_stamp_was_kept() -> None:
    """VX-OPS-4: a kept stamp whose file is gone is loaded whole, which rewrites the file from
    the stored stamp."""
    persona = standing_persona()
    kept = warm(persona)
    path = stamp_path(persona.uuid, kept.generation)
    path.unlink()
    again = load_active_stamp(persona)
    assert path.read_bytes() == kept.data == again.data


def test_a_token_another_process_moved_is_seen(django_assert_max_num_queries: Any) -> None:
    """VX-REMOTE-2: a change made by another process (the token file replaced, as its
    card_changed does) is read from the database on the next call."""
    persona = standing_persona()
    warm(persona)
    fastpath._Store().replace_tokens([str(persona.uuid)])
    with django_assert_max_num_queries(10) as captured:
        load_active_stamp(persona)
    assert len(captured.captured_queries) > 0


def test_an_unread_token_keeps_nothing(
    monkeypatch: pytest.MonkeyPatch, django_assert_max_num_queries: Any
) -> None:
    """VX-REL-1, VX-REMOTE-2: while the token cannot be read (Redis unreachable; proven with a
    real one below), every call reads the database: nothing is kept or used."""
    persona = standing_persona()
    warm(persona)
    monkeypatch.setattr(persona_tokens, "read", lambda persona: Token.UNREAD)
    stamp._kept.clear()
    for _ in range(2):
        with django_assert_max_num_queries(10) as captured:
            load_active_stamp(persona)
        assert len(captured.captured_queries) > 0
    assert stamp._kept == {}


def test_nothing_is_kept_inside_a_transaction() -> None:
    """VX-REMOTE-2: what a transaction reads may be rolled back (and the token moves with it),
    so a load inside one neither keeps nor uses a kept stamp."""
    persona = standing_persona()
    with transaction.atomic():
        load_active_stamp(persona)
    assert stamp._kept == {}
    kept = warm(persona)
    with transaction.atomic():
        assert load_active_stamp(persona) is not kept


def test_an_entry_expires(settings: Any) -> None:
    """VX-REMOTE-2: should a token's move be lost, a kept stamp is still read again once it is
    older than VIRGO_CARD_PROCESS_CACHE_SECONDS."""
    settings.VIRGO_CARD_PROCESS_CACHE_SECONDS = 0
    persona = standing_persona()
    first = warm(persona)
    assert load_active_stamp(persona) is not first


@pytest.mark.live
@pytest.mark.mutation
def test_redis_tokens_are_read_and_an_outage_keeps_nothing(
    settings: Any, private_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    """VX-REMOTE-2, VX-REL-1: on Redis the token is one GET; a change moves it; with Redis
    stopped, nothing is kept or used (every call reads the database) until it answers, and each
    read that went without it is counted as the persona token's, the outage logged with its
    error."""
    settings.CACHES = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": private_redis.url,
            "KEY_PREFIX": f"stamps-{uuid.uuid4().hex}",
        }
    }
    persona = standing_persona()
    assert persona_tokens.read(str(uuid.uuid4())) is None  # no change recorded yet
    fastpath.card_changed([persona.uuid])
    token = persona_tokens.read(str(persona.uuid))
    assert isinstance(token, str)
    kept = warm(persona)
    assert stamp._kept[str(persona.uuid)].token == token
    assert load_active_stamp(persona) is kept
    fastpath.card_changed([persona.uuid])
    assert load_active_stamp(persona) is not kept
    settings.VIRGO_DEGRADED_RETRY_SECONDS = 60
    private_redis.stop()
    stamp._kept.clear()
    before = went_without("persona_token")
    assert persona_tokens.read(str(persona.uuid)) is Token.UNREAD
    # Down now: the next read does not try, and is counted as going without, under its use.
    assert persona_tokens.read(str(persona.uuid)) is Token.UNREAD
    assert went_without("persona_token") == before + 2
    assert "(persona_token, ConnectionError: " in caplog.text
    load_active_stamp(persona)
    assert stamp._kept == {}


def test_a_secret_argument_is_refused_every_time_it_comes() -> None:
    """VX-SEC-7: the classifier keeps the argument strings it found clean (rules._clean), never
    one that holds a secret: the same secret is refused on every call."""
    secret = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
    binding = Binding(persona="p", workspace="w", project="x")
    arguments = {"path": ".", "note": secret}
    op = Operation(tool="t", action="workspace.read", target={}, shape={}, arguments=arguments)
    for _ in range(2):
        assert rules._secret_values(op, binding) is not None
    assert secret not in rules._clean
    assert "." in rules._clean and "note" in rules._clean
