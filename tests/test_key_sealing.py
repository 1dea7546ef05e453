"""Card signing keys sealed in the shared database, so every machine signs (VX-SCALE-1), and a
machine that cannot open them says so at /readyz and in `check --deploy` (VX-SCALE-2).

A "machine" here is a process state: its VIRGO_HOME, its key-encryption keys, and the keys it
has opened (cards.keys._opened, emptied to stand for a new process).
"""

import json
import os
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError, SystemCheckError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

from cards import keys, sealing
from cards.models import SigningKey
from tests.factories import make_agent, make_owner, make_persona, run_on_commit
from tests.owner_clients import fresh_rate_limits  # noqa: F401 (autouse fixture)
from tests.signing_support import (
    key_file,
    new_process,  # noqa: F401 (autouse fixture)
    peer_verifier,
    protected_header,
    served_card,
    served_jwks,
)
from virgo import kek


def another_machine(settings: Any, home: Path, keks: list[str] | None = None) -> None:
    """Another machine's process: its own (empty) VIRGO_HOME, nothing opened yet."""
    home.mkdir()
    settings.VIRGO_HOME = home
    if keks is not None:
        settings.VIRGO_KEY_ENCRYPTION_KEYS = keks
    keys._opened.clear()


def keys_command(*args: str) -> str:
    out = StringIO()
    with run_on_commit():
        call_command("keys", *args, stdout=out, stderr=out)
    return out.getvalue()


@pytest.mark.django_db
def test_a_second_machine_without_key_files_signs_and_rotates(
    settings: Any, tmp_path: Path
) -> None:
    """VX-SCALE-1: machine A makes the key and signs a card; machine B (another VIRGO_HOME, no
    file of A's) signs a new card and rotates; A then signs with B's key; every card verifies
    against the JWKS."""
    kek_text = [kek.generate()]
    settings.VIRGO_KEY_ENCRYPTION_KEYS = kek_text
    settings.VIRGO_HOME = tmp_path / "a"
    agent = make_agent(make_owner())
    first = make_persona(agent, discoverable=True)
    peer_verifier(served_jwks())(json.loads(served_card(first)))
    assert not any(tmp_path.rglob("*.pem"))

    another_machine(settings, tmp_path / "b")
    second = make_persona(agent, discoverable=True)
    peer_verifier(served_jwks())(json.loads(served_card(second)))
    keys_command("rotate")
    rotated = SigningKey.objects.get(state="active")

    another_machine(settings, tmp_path / "a-again")
    third = make_persona(agent, discoverable=True)
    jwks = served_jwks()
    for persona in (first, second, third):
        card = json.loads(served_card(persona))
        assert rotated.kid in [protected_header(each)["kid"] for each in card["signatures"]]
        peer_verifier(jwks)(card)
    assert not any(tmp_path.rglob("*.pem"))


@pytest.mark.django_db
def test_kek_rotation_add_rewrap_remove_still_signs(settings: Any) -> None:
    """VX-SCALE-1: a new KEK first (the old one still opens), `virgo keys rewrap` seals every
    key under it, the old KEK is removed, and cards are still signed and verify."""
    old, new = kek.generate(), kek.generate()
    settings.VIRGO_KEY_ENCRYPTION_KEYS = [old]
    persona = make_persona(make_agent(make_owner()), discoverable=True)
    keys_command("rotate")  # two keys sign: the active one and the retiring one
    settings.VIRGO_KEY_ENCRYPTION_KEYS = [new, old]
    out = keys_command("rewrap")
    new_print = kek.fingerprint(kek.decode(new))
    for key in SigningKey.objects.filter(state__in=["active", "retiring"]):
        assert f"{key.kid}: sealed again under key-encryption key {new_print}" in out
        assert sealing.sealed_under(key.private_key_sealed) == new_print
    assert old not in out and new not in out
    assert "already" in keys_command("rewrap")
    again = keys.rewrap()
    signing = SigningKey.objects.filter(state__in=["active", "retiring"]).order_by("pk")
    assert again.current == [key.kid for key in signing]  # each key, none left out
    assert (again.resealed, again.sealed_from_file, again.left) == ([], [], [])

    settings.VIRGO_KEY_ENCRYPTION_KEYS = [new]
    keys._opened.clear()
    keys.check_can_sign()
    keys_command("rotate")
    peer_verifier(served_jwks())(json.loads(served_card(persona)))


@pytest.mark.django_db
def test_rewrap_says_which_key_it_cannot_open_and_fails(settings: Any) -> None:
    """VX-SCALE-1: a key sealed under a KEK this machine lacks is left as it was, named, and
    the command fails, so the old KEK is not removed too early."""
    settings.VIRGO_KEY_ENCRYPTION_KEYS = [kek.generate()]
    key = keys.ensure_active_key()
    before = key.private_key_sealed
    settings.VIRGO_KEY_ENCRYPTION_KEYS = [kek.generate()]
    with pytest.raises(CommandError, match="could not be sealed"):
        keys_command("rewrap")
    key.refresh_from_db()
    assert key.private_key_sealed == before
    [(kid, why)] = keys.rewrap().left
    assert kid == key.kid and "key-encryption key" in why


@pytest.mark.django_db(transaction=True)
def test_a_wrong_kek_fails_readyz_and_check_deploy_naming_it(settings: Any) -> None:
    """VX-SCALE-2: a process whose key-encryption key does not open the active key answers
    /readyz 503 with `signing` failed, and `check --deploy` fails with virgo.E030 naming the key
    and the KEK fingerprints (never a key's bytes); given the right KEK both pass."""
    right = kek.generate()
    settings.VIRGO_KEY_ENCRYPTION_KEYS = [right]
    key = keys.ensure_active_key()
    assert Client().get("/readyz").status_code == 200
    call_command("check", "--deploy", "--tag", "virgo", stdout=StringIO(), stderr=StringIO())

    wrong = kek.generate()
    settings.VIRGO_KEY_ENCRYPTION_KEYS = [wrong]
    keys._opened.clear()
    response = Client().get("/readyz")
    assert response.status_code == 503
    body = json.loads(response.content)
    assert body["failed"] == ["signing"]
    assert body["checks"]["signing"] == "failed: CannotSign"
    with pytest.raises(SystemCheckError) as failed:
        call_command("check", "--deploy", "--tag", "virgo", stdout=StringIO(), stderr=StringIO())
    said = str(failed.value)
    assert "virgo.E030" in said and "cannot sign cards" in said and key.kid in said
    assert kek.fingerprint(kek.decode(right)) in said
    assert right not in said and wrong not in said and key.private_key_sealed not in said

    settings.VIRGO_KEY_ENCRYPTION_KEYS = [right]
    assert Client().get("/readyz").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_a_fresh_installation_is_ready_before_its_first_key() -> None:
    """VX-SCALE-2: with no key yet the first card makes one, so a process that can seal is
    ready (a load balancer keeping it out would keep the first persona from being made)."""
    assert not SigningKey.objects.exists()
    response = Client().get("/readyz")
    assert response.status_code == 200
    assert json.loads(response.content)["checks"]["signing"] == "ok"


# Upgrading from key files -------------------------------------------------------------------------

BEFORE = [("cards", "0005_sealed_signing_keys")]


def migrate(targets: list[tuple[str, str]]) -> Any:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return MigrationExecutor(connection).loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_upgrading_seals_the_key_files_found_and_reports_the_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """VX-SCALE-1: the migration seals the active key from its file, so the installation keeps
    signing (and another machine with no file signs too); a retiring key whose file is not on
    this machine is left unsealed and reported, never a crash; `virgo keys rewrap` where its
    file is seals it."""
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    active_path = tmp_path / "signing-keys" / "active.pem"
    retiring_path = tmp_path / "signing-keys" / "retiring.pem"
    away = tmp_path / "on-another-machine.pem"
    old = migrate(BEFORE)
    try:
        model = old.get_model("cards", "SigningKey")
        for path, state in ((active_path, "active"), (retiring_path, "retiring")):
            algorithm, jwk = keys._public_jwk(key_file(path))
            model.objects.create(
                kid=jwk["kid"],
                algorithm=algorithm,
                public_jwk=jwk,
                state=state,
                private_key_path=str(path),
            )
        retiring_path.rename(away)
    finally:
        migrate(leaves)
    said = capsys.readouterr().out
    active = SigningKey.objects.get(state="active")
    retiring = SigningKey.objects.get(state="retiring")
    assert active.private_key_sealed.startswith("v1:")
    assert retiring.private_key_sealed == ""
    assert f"signing key {retiring.kid} left unsealed" in said and str(retiring_path) in said
    assert "virgo keys rewrap" in said and "PRIVATE" not in said
    with pytest.raises(keys.CannotSign, match=f"signing key {retiring.kid} is not sealed"):
        keys.check_can_sign()

    away.rename(retiring_path)  # on the machine that has its file
    assert f"{retiring.kid}: sealed from its file" in keys_command("rewrap")
    active_path.unlink()  # and now no machine needs a file
    retiring_path.unlink()
    keys._opened.clear()
    keys.check_can_sign()
    persona = make_persona(make_agent(make_owner()), discoverable=True)
    card = json.loads(served_card(persona))
    assert len(card["signatures"]) == 2
    peer_verifier(served_jwks())(card)


@pytest.mark.django_db
def test_rewrap_goes_on_past_a_key_it_cannot_open(settings: Any) -> None:
    """VX-SCALE-1: a key it cannot open stops nothing: every later key is still sealed under the
    current KEK, and the one left is named."""
    lost = kek.generate()
    settings.VIRGO_KEY_ENCRYPTION_KEYS = [lost]
    first = keys.ensure_active_key()
    old = kek.generate()
    settings.VIRGO_KEY_ENCRYPTION_KEYS = [old]
    second = keys.rotate()
    new = kek.generate()
    settings.VIRGO_KEY_ENCRYPTION_KEYS = [new, old]
    done = keys.rewrap()
    assert [kid for kid, _ in done.left] == [first.kid]
    assert done.resealed == [second.kid]
    second.refresh_from_db()
    assert sealing.sealed_under(second.private_key_sealed) == sealing.current_fingerprint()


@pytest.mark.django_db
def test_no_kek_and_no_key_yet_says_nothing_can_be_sealed(settings: Any) -> None:
    """VX-SCALE-2: before its first key, a process without a key-encryption key cannot sign:
    the check says so in the sealing's own words."""
    settings.VIRGO_KEY_ENCRYPTION_KEYS = []
    with pytest.raises(keys.CannotSign) as refused:
        keys.check_can_sign()
    assert str(refused.value) == (
        "no key-encryption key is configured (VIRGO_KEY_ENCRYPTION_KEY): nothing can be sealed"
    )


@pytest.mark.django_db
def test_rewrap_never_counts_a_sealed_form_it_cannot_read_as_current(settings: Any) -> None:
    """VX-SCALE-1: only a key sealed in the known form (`v1:<fingerprint>:<nonce>:<ciphertext>`)
    is under a KEK; a row altered into any other form, even one that names the current KEK, is
    left by rewrap and named, never counted as already sealed, so an operator is not told an old
    KEK can go while a key does not open."""
    settings.VIRGO_KEY_ENCRYPTION_KEYS = [kek.generate()]
    key = keys.ensure_active_key()
    current = sealing.current_fingerprint()
    assert sealing.sealed_under(key.private_key_sealed) == current
    _, _, nonce, sealed = key.private_key_sealed.split(":")
    altered = {
        "no separator at all": "not a sealed key",
        "cut short after the fingerprint": f"v1:{current}",
        "another version": f"v2:{current}:{nonce}:{sealed}",
        "a part too many": f"v1:{current}:{nonce}:{sealed}:extra",
    }
    for label, form in altered.items():
        # The docstring's promise: '' for anything that is not a sealed key.
        assert sealing.sealed_under(form) == "", label
        SigningKey.objects.filter(pk=key.pk).update(private_key_sealed=form)
        keys._opened.clear()
        done = keys.rewrap()
        assert done.current == [], label
        [(kid, why)] = done.left
        assert kid == key.kid and "not in a known form" in why, label


# A key sealed by this release, as a database row keeps it: its KEK (as the setting gives it),
# its kid, and the stored form.
SEALED_KEK = "h3Z1u3Wq0m0QyJ6b2k5wq1c7yZQ0oXlq8m4l1qv9x0E="
SEALED_KID = "kid-sealed-before"
SEALED_FORM = (
    "v1:6cfda4c3266c858b:RQarCussJaCYqI2V:"
    "tw40taZ6kKLlRA-nfY0fFG0G1FqLls3uy55sqC0dYod-d3gNs3T-2Nddcg8vHWQ"
)


def test_a_key_sealed_before_an_upgrade_still_opens(settings: Any) -> None:
    """VX-SCALE-1: the sealed form is kept in the shared database across releases, so what one
    release sealed (its encoding, its associated data) the next must open with the same KEK,
    and only for the same kid."""
    settings.VIRGO_KEY_ENCRYPTION_KEYS = [SEALED_KEK]
    assert sealing.sealed_under(SEALED_FORM) == sealing.current_fingerprint()
    assert sealing.unseal(SEALED_KID, SEALED_FORM) == b"a key sealed before the upgrade"
    with pytest.raises(sealing.KeyCannotBeOpened, match="does not open"):
        sealing.unseal("another-kid", SEALED_FORM)


def test_every_seal_opens_whatever_its_random_nonce(settings: Any) -> None:
    """VX-SCALE-1: a fresh random nonce per seal, and each sealed key opens: a thousand seals,
    so nonces and ciphertexts ending in every base64url character are written and read back."""
    settings.VIRGO_KEY_ENCRYPTION_KEYS = [kek.generate()]
    secret = os.urandom(47)
    forms = {sealing.seal("kid-many", secret) for _ in range(1000)}
    assert len(forms) == 1000
    endings = {part[-1] for form in forms for part in form.split(":")[2:]}
    assert len(endings) == 64  # every character of the alphabet ended a part at least once
    for form in forms:
        assert sealing.unseal("kid-many", form) == secret
    # And a secret of any length (an Ed25519 key's DER is 48 bytes, a P-256 key's 138), so
    # every amount of base64 padding left off is put back.
    for length in range(64):
        other = os.urandom(length)
        assert sealing.unseal("kid-many", sealing.seal("kid-many", other)) == other


def test_a_missing_kek_is_named_beside_each_one_the_process_has(settings: Any) -> None:
    """VX-SCALE-2: a key sealed under a KEK this process lacks is refused naming the kid, the
    KEK it needs and every KEK the process has (or none), by fingerprint, and the setting to
    fix: what an operator needs to find the missing one, and never a key's bytes."""
    needed, first, second = kek.generate(), kek.generate(), kek.generate()
    settings.VIRGO_KEY_ENCRYPTION_KEYS = [needed]
    form = sealing.seal("kid-moved", b"secret")
    prints = {text: kek.fingerprint(kek.decode(text)) for text in (needed, first, second)}
    for given, have in (
        ([first, second], f"{prints[first]}, {prints[second]}"),
        ([], "none"),
    ):
        settings.VIRGO_KEY_ENCRYPTION_KEYS = given
        with pytest.raises(sealing.KeyCannotBeOpened) as refused:
            sealing.unseal("kid-moved", form)
        assert str(refused.value) == (
            f"signing key kid-moved is sealed under key-encryption key {prints[needed]}, which "
            f"this process is not given (it has {have}); set VIRGO_KEY_ENCRYPTION_KEY to the "
            "deployment's key-encryption keys"
        )


@pytest.mark.django_db
def test_without_a_kek_no_key_is_made_and_the_refusal_names_the_setting(settings: Any) -> None:
    """VX-SCALE-2: a process with no key-encryption key does not make the first key (it could
    not be sealed): the first card's attempt is refused in the sealing's words, naming the
    setting, and no key row is left behind."""
    settings.VIRGO_KEY_ENCRYPTION_KEYS = []
    with pytest.raises(keys.CannotSign, match="VIRGO_KEY_ENCRYPTION_KEY"):
        keys.ensure_active_key()
    assert not SigningKey.objects.exists()
    with pytest.raises(sealing.KeyCannotBeOpened, match="nothing can be sealed"):
        sealing.seal("kid-unsealable", b"secret")
