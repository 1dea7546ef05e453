"""Signing keys rotate, retire after a grace, and revoke at once (`virgo keys`, the admin).

Celery runs eagerly here (the embedded default): a change of the signing set re-signs every
card as its transaction commits. The fan-out under a real worker, killed half-way, is in
tests/test_signing_rotation_live.py.
"""

import json
import os
import stat
import threading
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone

from cards import keys
from cards.models import PublishedCard, SigningKey
from cards.publishing import cards_owed_signatures
from personas.models import AuditEvent, Persona
from settling.reconciliation import reconcile
from tests.factories import make_agent, make_owner, make_persona, run_on_commit
from tests.owner_clients import fresh_rate_limits  # noqa: F401 (autouse fixture)
from tests.signing_support import peer_verifier, protected_header, served_card, served_jwks

pytestmark = pytest.mark.django_db


def keys_command(*args: str) -> str:
    out = StringIO()
    with run_on_commit():
        call_command("keys", *args, stdout=out)
    return out.getvalue()


def kids_on(body: bytes) -> list[str]:
    return [protected_header(s)["kid"] for s in json.loads(body)["signatures"]]


def pem_line(key: SigningKey) -> str:
    """A line of the key's private PEM, to look for where it must not be."""
    pem = keys.open_private(key).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return pem.decode().splitlines()[1]


def jwks_kids() -> list[str]:
    return [jwk["kid"] for jwk in served_jwks()["keys"]]


@pytest.fixture
def fleet() -> list[Persona]:
    agent = make_agent(make_owner())
    return [make_persona(agent, discoverable=True) for _ in range(3)]


def test_rotation_signs_every_card_with_both_keys_until_the_old_one_retires(
    fleet: list[Persona], settings: Any
) -> None:
    """VX-TRUST-3: rotate adds a key and re-signs every card by the new and the old key (a peer
    holding either JWKS verifies); both are in the JWKS; once the grace ends the old key
    retires: out of the JWKS, off every card, its sealed private key gone."""
    settings.VIRGO_SIGNING_KEY_GRACE_SECONDS = 3600
    old_jwks = served_jwks()
    [old] = SigningKey.objects.filter(state="active")
    before = {persona.pk: served_card(persona) for persona in fleet}

    out = keys_command("rotate")
    new = SigningKey.objects.get(state="active")
    assert new.kid != old.kid and new.kid in out
    old.refresh_from_db()
    assert old.state == "retiring"
    assert old.retire_after is not None
    assert abs(old.retire_after - (timezone.now() + timedelta(hours=1))) < timedelta(minutes=1)
    assert jwks_kids() == [new.kid, old.kid]
    for persona in fleet:
        body = served_card(persona)
        assert body != before[persona.pk]
        assert kids_on(body) == [new.kid, old.kid]
        peer_verifier(old_jwks)(json.loads(body))
        peer_verifier({"keys": [served_jwks()["keys"][0]]})(json.loads(body))
    assert not cards_owed_signatures().exists()

    # Before the grace ends, the sweep leaves it; after, it retires it.
    assert keys.retire_due_keys() == []
    SigningKey.objects.filter(pk=old.pk).update(retire_after=timezone.now())
    with run_on_commit():
        assert keys.retire_due_keys() == [old.kid]
    assert jwks_kids() == [new.kid]
    # Retired, it is never due again (the reconciler's count of keys it retired stays true).
    assert keys.retire_due_keys() == []
    old.refresh_from_db()
    assert old.private_key_sealed == ""
    for persona in fleet:
        body = served_card(persona)
        assert kids_on(body) == [new.kid]
        peer_verifier(served_jwks())(json.loads(body))


def test_revoking_the_active_key_replaces_it_and_re_signs_at_once(fleet: list[Persona]) -> None:
    """VX-TRUST-3: revoke leaves the JWKS on the next request, a new active key takes its place,
    every card it signed is re-signed, and its sealed private key is deleted."""
    [old] = SigningKey.objects.filter(state="active")
    out = keys_command("revoke", old.kid)
    assert f"revoked {old.kid}" in out
    old.refresh_from_db()
    assert old.state == "revoked" and old.revoked_at is not None
    assert old.private_key_sealed == ""
    new = SigningKey.objects.get(state="active")
    assert jwks_kids() == [new.kid]
    for persona in fleet:
        assert kids_on(served_card(persona)) == [new.kid]


def test_revoking_a_retiring_key_drops_it_from_cards_signed_by_two(fleet: list[Persona]) -> None:
    """VX-TRUST-3: during a rotation, revoking the old key takes its signature off every card."""
    [old] = SigningKey.objects.filter(state="active")
    keys_command("rotate")
    new = SigningKey.objects.get(state="active")
    keys_command("revoke", old.kid)
    assert jwks_kids() == [new.kid]
    for persona in fleet:
        assert kids_on(served_card(persona)) == [new.kid]


def test_the_reconciler_signs_what_the_fan_out_left(fleet: list[Persona]) -> None:
    """VX-TRUST-3: a rotation whose fan-out never ran (no worker, the broker down) leaves every
    card owed; the reconciler signs them by the current keys."""
    keys.rotate()  # not committed through on_commit: the fan-out is never queued
    assert cards_owed_signatures().count() == len(fleet)
    report = reconcile()
    assert report.resigned == len(fleet)
    assert not cards_owed_signatures().exists()
    jwks = served_jwks()
    for persona in fleet:
        peer_verifier(jwks)(json.loads(served_card(persona)))


def test_list_shows_kids_states_and_counts_and_no_private_key(fleet: list[Persona]) -> None:
    """VX-TRUST-3: `virgo keys list`: every key with its algorithm, state and cards signed."""
    keys_command("rotate")
    [active] = SigningKey.objects.filter(state="active")
    [retiring] = SigningKey.objects.filter(state="retiring")
    out = keys_command("list")
    lines = out.splitlines()
    assert any(active.kid in line and "active" in line and "cards 3" in line for line in lines)
    assert any(retiring.kid in line and "retiring" in line for line in lines)
    for key in (active, retiring):
        assert pem_line(key) not in out and "PRIVATE" not in out
        assert key.private_key_sealed not in out


def test_create_refuses_a_second_active_key_and_retire_refuses_the_active_one(
    fleet: list[Persona],
) -> None:
    """VX-TRUST-3: the CLI says what to do instead; nothing changes."""
    [active] = SigningKey.objects.filter(state="active")
    with pytest.raises(CommandError, match="rotate"):
        keys_command("create")
    with pytest.raises(CommandError, match="rotate first"):
        keys_command("retire", active.kid)
    with pytest.raises(CommandError, match="no signing key has kid"):
        keys_command("revoke", "nope")
    assert list(SigningKey.objects.values_list("kid", "state")) == [(active.kid, "active")]


def test_create_and_rotate_import_an_owner_private_key_file(tmp_path: Path) -> None:
    """VX-TRUST-3: a key from a configured file is used where it lies (and left there when it
    retires); a file others may read is refused with its path and mode, never its contents."""
    private = ed25519.Ed25519PrivateKey.generate()
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    path = tmp_path / "operator-key.pem"
    path.write_bytes(pem)
    os.chmod(path, 0o644)
    with pytest.raises(CommandError) as refused:
        keys_command("create", "--import", str(path))
    assert "mode 644" in str(refused.value) and pem.decode().splitlines()[1] not in str(
        refused.value
    )
    assert not SigningKey.objects.exists()

    os.chmod(path, 0o600)
    keys_command("create", "--import", str(path))
    imported = SigningKey.objects.get(state="active")
    assert (imported.algorithm, imported.generated) == ("EdDSA", False)
    assert imported.private_key_path == str(path.resolve())
    # VX-SCALE-1: sealed into its row at import; signing never reads the file again.
    assert imported.private_key_sealed.startswith("v1:")
    assert b"PRIVATE" not in imported.private_key_sealed.encode()
    os.chmod(path, 0o000)
    persona = make_persona(make_agent(make_owner()), discoverable=True)
    assert kids_on(served_card(persona)) == [imported.kid]
    peer_verifier(served_jwks())(json.loads(served_card(persona)))

    os.chmod(path, 0o600)
    keys_command("rotate")
    keys_command("retire", imported.kid)
    assert path.read_bytes() == pem
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


# The admin ---------------------------------------------------------------------------------------


def signed_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_keys_admin_is_for_superusers_and_shows_no_private_key(fleet: list[Persona]) -> None:
    """VX-TRUST-3: superusers see the keys (public JWK, state); staff without superuser and
    owners get nothing; no page holds the private key."""
    [key] = SigningKey.objects.filter(state="active")
    superuser = make_owner("root")
    superuser.is_staff = superuser.is_superuser = True
    superuser.save()
    staff = make_owner("staff")
    staff.is_staff = True
    staff.save()
    changelist = "/admin/cards/signingkey/"
    page = signed_in(superuser).get(changelist)
    assert page.status_code == 200 and key.kid in page.content.decode()
    detail = signed_in(superuser).get(f"{changelist}{key.pk}/change/")
    assert detail.status_code == 200
    for response in (page, detail):
        text = response.content.decode()
        assert pem_line(key) not in text and "PRIVATE KEY" not in text
        assert key.private_key_sealed.split(":")[-1] not in text
    assert signed_in(staff).get(changelist).status_code == 403
    assert signed_in(fleet[0].agent.owner).get(changelist).status_code in (302, 403)


def test_the_admin_rotates_and_revokes(fleet: list[Persona]) -> None:
    """VX-TRUST-3: the admin's actions are the CLI's: rotate, then revoke the old key."""
    [old] = SigningKey.objects.filter(state="active")
    superuser = make_owner("root")
    superuser.is_staff = superuser.is_superuser = True
    superuser.save()
    client = signed_in(superuser)
    changelist = "/admin/cards/signingkey/"
    with run_on_commit():
        response = client.post(
            changelist, {"action": "rotate_keys", "_selected_action": [old.pk]}, follow=True
        )
    assert response.status_code == 200
    new = SigningKey.objects.get(state="active")
    assert new.kid != old.kid
    with run_on_commit():
        client.post(changelist, {"action": "revoke_keys", "_selected_action": [old.pk]})
    assert SigningKey.objects.get(pk=old.pk).state == "revoked"
    assert jwks_kids() == [new.kid]
    for persona in fleet:
        assert kids_on(bytes(PublishedCard.objects.get(persona=persona).body)) == [new.kid]


def test_cards_published_before_signing_are_signed_by_the_reconciler() -> None:
    """VX-TRUST-1, VX-TRUST-3: a card stored unsigned (published before this release: no
    signatures, no payload kept, no marker) is owed; the reconciler signs it."""
    persona = make_persona(make_agent(make_owner()), discoverable=True)
    stored = PublishedCard.objects.get(persona=persona)
    unsigned = json.dumps(
        {k: v for k, v in json.loads(bytes(stored.body)).items() if k != "signatures"},
        ensure_ascii=False,
        separators=(",", ":"),
    ).encode()
    PublishedCard.objects.filter(pk=stored.pk).update(body=unsigned, payload=b"", signed_by="")
    assert list(cards_owed_signatures().values_list("persona_id", flat=True)) == [persona.pk]
    assert reconcile().resigned == 1
    peer_verifier(served_jwks())(json.loads(served_card(persona)))


def test_re_signing_keeps_a_card_whose_text_looks_like_a_signatures_member() -> None:
    """VX-TRUST-3: re-signing replaces only the card's own `signatures`: a name holding the text
    `,"signatures":[` (escaped inside its string) survives a rotation byte for byte."""
    name = 'Tricky ,"signatures":[{"protected":"x"}]}'
    persona = make_persona(make_agent(make_owner()), discoverable=True, name=name)
    keys_command("rotate")
    card = json.loads(served_card(persona))
    assert card["name"] == name
    assert len(card["signatures"]) == 2
    peer_verifier(served_jwks())(card)


def test_a_kid_that_begins_with_a_dash_is_a_kid_on_the_command_line() -> None:
    """VX-TRUST-3: RFC 7638 thumbprints may begin with `-`; `virgo keys retire -Ab...` retires
    that key instead of failing as an unknown option."""
    SigningKey.objects.create(
        kid="-dashed",
        algorithm="ES256",
        public_jwk={},
        state="retiring",
        private_key_path="/nonexistent/-dashed.pem",
    )
    assert "retired -dashed" in keys_command("retire", "-dashed")
    assert SigningKey.objects.get(kid="-dashed").state == "retired"


# The private key file's guard ---------------------------------------------------------------------

OTHER_UID = 4242


def private_key_file(path: Path) -> tuple[Path, bytes]:
    """An Ed25519 key written as the operator would: this user's, mode 0600."""
    pem = ed25519.Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    path.write_bytes(pem)
    os.chmod(path, 0o600)
    return path, pem


@pytest.mark.parametrize(
    "bit", [0o040, 0o020, 0o010, 0o004, 0o002, 0o001], ids=lambda bit: f"0{bit:03o}"
)
def test_a_key_file_with_any_group_or_other_bit_is_refused(bit: int, tmp_path: Path) -> None:
    """VX-TRUST-1, VX-TRUST-3: each of the six group and other bits alone makes a key file
    unusable, also for a key read (and kept in memory) before its mode changed; the error
    names the file and its mode, never the key."""
    path, pem = private_key_file(tmp_path / "operator-key.pem")
    assert keys.read_private_key(path) is keys.read_private_key(path)
    os.chmod(path, 0o600 | bit)
    with pytest.raises(keys.UnusableKeyFile) as refused:
        keys.read_private_key(path)
    message = str(refused.value)
    assert f"signing key file {path} is mode {0o600 | bit:o}, owner uid {os.geteuid()}" in message
    assert pem.decode().splitlines()[1] not in message
    os.chmod(path, 0o400)
    keys.read_private_key(path)


def test_a_key_file_another_user_owns_is_refused(tmp_path: Path) -> None:
    """VX-TRUST-1, VX-TRUST-3: a 0600 key file owned by another user is theirs, not this
    process's: refused when imported and, for a key still signing from its file (from before
    sealing), when cards are signed; nothing is written. (The tests run as root, so the file
    can be given away.)"""
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    path, pem = private_key_file(tmp_path / "operator-key.pem")
    os.chown(path, OTHER_UID, -1)
    with pytest.raises(CommandError) as refused:
        keys_command("create", "--import", str(path))
    assert f"signing key file {path} is mode 600, owner uid {OTHER_UID}" in str(refused.value)
    assert pem.decode().splitlines()[1] not in str(refused.value)
    assert not SigningKey.objects.exists()

    # A key from before sealing, still only in that file, is refused when cards are signed.
    active = keys.ensure_active_key()
    SigningKey.objects.filter(pk=active.pk).update(private_key_sealed="", private_key_path=path)
    with pytest.raises(keys.CannotSign, match=rf"owner uid {OTHER_UID}: it must be"):
        keys.signers()
    # Its group alone is no one's access while the group has no bits.
    os.chown(path, os.geteuid(), OTHER_UID)
    assert keys.signers()[0].kid == active.kid


def test_a_link_or_a_fifo_in_place_of_a_key_file_is_refused(tmp_path: Path) -> None:
    """VX-TRUST-1: the key is read from the named file itself: a symbolic link to a good key
    file is refused, and a FIFO is refused at once rather than waited on."""
    target, _ = private_key_file(tmp_path / "real.pem")
    link = tmp_path / "link.pem"
    link.symlink_to(target)
    with pytest.raises(keys.UnusableKeyFile, match=rf"signing key file {link}: "):
        keys.read_private_key(link)
    fifo = tmp_path / "fifo.pem"
    os.mkfifo(fifo, 0o600)
    outcome: list[keys.UnusableKeyFile] = []

    def read() -> None:
        try:
            keys.read_private_key(fifo)
        except keys.UnusableKeyFile as refused:
            outcome.append(refused)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(5)
    try:
        assert not reader.is_alive(), "read_private_key waited for a writer on a FIFO"
    finally:
        if reader.is_alive():  # let the blocked open return, so the thread ends
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert f"signing key file {fifo} is not a regular file" in str(outcome[0])


def test_each_key_operation_records_who_did_it_and_exactly_what(tmp_path: Path) -> None:
    """VX-AUDIT-1, VX-TRUST-3: creating (an imported key), rotating (to a new Ed25519 key, then
    to the default), retiring, and revoking (the active Ed25519 key, which puts a new Ed25519
    key in its place; a retiring one, which puts none) each record one event naming the account
    that acted and what was done: the kid, its algorithm, whether it was imported, what it
    replaced or what replaced it."""
    Kind = AuditEvent.Kind
    holder = make_owner("keyholder")
    pem = tmp_path / "imported.pem"
    pem.write_bytes(
        ed25519.Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    pem.chmod(0o600)
    created = keys.create_key(import_from=pem, actor=holder)
    rotated = keys.rotate(algorithm="EdDSA", actor=holder)
    assert (created.algorithm, rotated.algorithm) == ("EdDSA", "EdDSA")
    keys.retire(created.kid, actor=holder)
    keys.revoke(rotated.kid, actor=holder)
    replacement = SigningKey.objects.get(state=SigningKey.State.ACTIVE)
    assert replacement.algorithm == "EdDSA"  # of the revoked active key's algorithm
    again = keys.rotate(actor=holder)
    keys.revoke(replacement.kid, actor=holder)
    events = list(AuditEvent.objects.filter(kind__startswith="key-").order_by("id"))
    assert {(event.actor, event.actor_name) for event in events} == {(holder, "keyholder")}
    ed, es = "EdDSA", "ES256"
    assert [(event.kind, event.data) for event in events] == [
        (Kind.KEY_CREATED, {"kid": created.kid, "algorithm": ed, "imported": True}),
        (
            Kind.KEY_ROTATED,
            {"kid": rotated.kid, "algorithm": ed, "replaces": [created.kid], "imported": False},
        ),
        (Kind.KEY_RETIRED, {"kid": created.kid, "algorithm": ed}),
        (Kind.KEY_REVOKED, {"kid": rotated.kid, "algorithm": ed, "replaced_by": replacement.kid}),
        (
            Kind.KEY_ROTATED,
            {"kid": again.kid, "algorithm": es, "replaces": [replacement.kid], "imported": False},
        ),
        (Kind.KEY_REVOKED, {"kid": replacement.kid, "algorithm": ed, "replaced_by": ""}),
    ]


def test_the_first_key_is_of_the_algorithm_asked_and_only_the_first() -> None:
    """VX-TRUST-1: `create_key` makes the first active key of the algorithm it is given; with an
    active key it refuses, pointing at a rotation."""
    first = keys.create_key(algorithm="EdDSA")
    assert (first.algorithm, first.state) == ("EdDSA", SigningKey.State.ACTIVE)
    with pytest.raises(keys.KeyRefused, match=r"^an active key exists; `virgo keys rotate`"):
        keys.create_key()


def test_each_unusable_key_file_is_refused_in_words(tmp_path: Path) -> None:
    """VX-TRUST-1: a key file others may read, one that holds no PEM key, and one that holds a
    key of another kind are each refused with the whole reason and the fix."""
    path, _ = private_key_file(tmp_path / "open.pem")
    os.chmod(path, 0o640)
    with pytest.raises(keys.UnusableKeyFile) as refused:
        keys.read_private_key(path)
    assert str(refused.value) == (
        f"signing key file {path} is mode 640, owner uid {os.geteuid()}: it must be this "
        f"user's alone; `chmod 600 {path}`, and if others may have read it, revoke the key "
        "(`virgo keys revoke <kid>`)"
    )
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a key\n")
    garbage.chmod(0o600)
    with pytest.raises(keys.UnusableKeyFile) as refused:
        keys.read_private_key(garbage)
    assert str(refused.value) == f"signing key file {garbage} holds no unencrypted PEM private key"
    other_kind = tmp_path / "rsa.pem"
    other_kind.write_bytes(
        rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    other_kind.chmod(0o600)
    with pytest.raises(keys.UnusableKeyFile) as refused:
        keys.read_private_key(other_kind)
    assert str(refused.value) == f"signing key file {other_kind}: use a P-256 or an Ed25519 key"


def test_a_rotation_can_import_the_new_key_and_retired_or_revoked_keys_say_so(
    tmp_path: Path,
) -> None:
    """VX-TRUST-3: `rotate --import` makes the imported key the active one; retiring a key twice
    and revoking one twice are refused, naming the key and its state."""
    keys.ensure_active_key()
    path, _ = private_key_file(tmp_path / "next.pem")
    imported = keys.rotate(import_from=path)
    assert imported.public_jwk == keys._public_jwk(keys.read_private_key(path))[1]
    [retiring] = SigningKey.objects.filter(state="retiring")
    keys.retire(retiring.kid)
    with pytest.raises(keys.KeyRefused) as refused:
        keys.retire(retiring.kid)
    assert str(refused.value) == f"key {retiring.kid} is retired already: it signs nothing"
    keys.revoke(retiring.kid)
    with pytest.raises(keys.KeyRefused) as refused:
        keys.revoke(retiring.kid)
    assert str(refused.value) == f"key {retiring.kid} is revoked already"
