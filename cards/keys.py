"""The keys that sign public cards: their private halves, and their life (create, rotate, retire,
revoke, rewrap). One write function per operation; the CLI (`virgo keys`) and the admin call these.

A private key lives in its database row, sealed under the deployment's key-encryption key
(cards.sealing, VX-SCALE-1): every web process and worker, on any machine, opens it from there
(once per process and key), and none needs a file another machine wrote. A key is generated
here, or imported from a PEM file the operator provides; a file any other user could read is
refused, not used: a key others may have copied cannot vouch for anything. Keys made before
sealing were PEM files under VIRGO_SIGNING_KEYS_DIR (default `$VIRGO_HOME/signing-keys`): the
migration sealed those it found, and one still unsealed is read from its file until
`virgo keys rewrap` seals it. Nothing here ever puts a key's bytes or a key-encryption key in a
log line, an error or the admin; errors name the kid or the file and what is wrong.

A change of the signing set (the active key and the retiring ones) makes every published card
owed a new signature; the rotation fan-out (settling.tasks.fan_out_resign) is queued once the
change commits, and the reconciler finishes what it leaves.
"""

import base64
import contextlib
import hashlib
import json
import os
import stat
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from jwt.algorithms import ECAlgorithm, OKPAlgorithm

from cards import base_url, sealing
from cards.models import SigningKey
from personas import audit
from personas.models import AuditEvent
from personas.services import status_list_changed
from virgo.queueing import queue_after_commit

FAN_OUT_RESIGN = "settling.tasks.fan_out_resign"
PrivateKey = ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey


class KeyRefused(Exception):
    """A key operation that cannot be done as asked; the message says why and what to do."""


class UnusableKeyFile(KeyRefused):
    """A private key file that is missing, not private, or not a key Virgo can sign with."""


class CannotSign(KeyRefused):
    """This process cannot sign with a key of the signing set; the message says why."""


@dataclass(frozen=True)
class Signer:
    """A key that signs: its record and its private half, opened from its sealed form."""

    key: SigningKey
    private: PrivateKey

    @property
    def kid(self) -> str:
        return self.key.kid

    @property
    def algorithm(self) -> str:
        return self.key.algorithm


def grace() -> timedelta:
    return timedelta(seconds=settings.VIRGO_SIGNING_KEY_GRACE_SECONDS)


# Keys and files ---------------------------------------------------------------------------------


def _public_jwk(private: PrivateKey) -> tuple[str, dict[str, Any]]:
    if isinstance(private, ec.EllipticCurvePrivateKey):
        if not isinstance(private.curve, ec.SECP256R1):
            raise UnusableKeyFile(f"an EC key on {private.curve.name}; ES256 needs P-256")
        algorithm, jwk = "ES256", ECAlgorithm.to_jwk(private.public_key(), as_dict=True)
        members = ("crv", "kty", "x", "y")
    else:
        algorithm, jwk = "EdDSA", OKPAlgorithm.to_jwk(private.public_key(), as_dict=True)
        members = ("crv", "kty", "x")
    # RFC 7638: the kid is the key's own thumbprint, so a kid names exactly one public key.
    required = json.dumps({name: jwk[name] for name in members}, separators=(",", ":"))
    digest = hashlib.sha256(required.encode()).digest()
    kid = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    return algorithm, {**jwk, "kid": kid, "alg": algorithm, "use": "sig"}


def _generate(algorithm: str) -> PrivateKey:
    if algorithm == SigningKey.Algorithm.ES256:
        return ec.generate_private_key(ec.SECP256R1())
    if algorithm == SigningKey.Algorithm.EDDSA:
        return ed25519.Ed25519PrivateKey.generate()
    raise KeyRefused(f"algorithm {algorithm!r}: use ES256 or EdDSA")


def _der(private: PrivateKey) -> bytes:
    return private.private_bytes(
        serialization.Encoding.DER,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def seal_private(kid: str, private: PrivateKey) -> str:
    """The private key sealed for its row (cards.sealing)."""
    return sealing.seal(kid, _der(private))


_opened: dict[tuple[str, str], PrivateKey] = {}


def open_private(key: SigningKey) -> PrivateKey:
    """The key's private half: opened from its sealed form (kept per process), or, for a key
    made before sealing that no machine has sealed yet, read from its file if it is here."""
    if key.private_key_sealed:
        cached = (key.kid, key.private_key_sealed)
        if cached not in _opened:
            try:
                der = sealing.unseal(key.kid, key.private_key_sealed)
                private = serialization.load_der_private_key(der, password=None)
            except sealing.KeyCannotBeOpened as refused:
                raise CannotSign(str(refused)) from None
            except (ValueError, TypeError):
                raise CannotSign(f"signing key {key.kid}: its sealed form holds no key") from None
            if not isinstance(private, ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey):
                raise CannotSign(f"signing key {key.kid}: not a P-256 or an Ed25519 key")
            _opened[cached] = private
        return _opened[cached]
    if not key.private_key_path:
        raise CannotSign(f"signing key {key.kid} has no private key (it signs nothing)")
    try:
        return read_private_key(Path(key.private_key_path))
    except UnusableKeyFile as refused:
        raise CannotSign(
            f"signing key {key.kid} is not sealed in the database and {refused}; run "
            "`virgo keys rewrap` on the machine that has its file"
        ) from None


_loaded: dict[tuple[str, int, int], PrivateKey] = {}


def read_private_key(path: Path) -> PrivateKey:
    """The private key in `path`, refusing a file that is not this user's alone."""
    try:
        # Not through a link; and a FIFO opens at once (to be refused below), not on a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise UnusableKeyFile(f"signing key file {path}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnusableKeyFile(f"signing key file {path} is not a regular file")
        if info.st_uid != os.geteuid() or info.st_mode & 0o077:
            raise UnusableKeyFile(
                f"signing key file {path} is mode {stat.S_IMODE(info.st_mode):o}, owner uid "
                f"{info.st_uid}: it must be this user's alone; `chmod 600 {path}`, and if others "
                "may have read it, revoke the key (`virgo keys revoke <kid>`)"
            )
        cached = (str(path), info.st_ino, info.st_mtime_ns)
        if cached in _loaded:
            return _loaded[cached]
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read()
    finally:
        os.close(fd)
    try:
        private = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise UnusableKeyFile(
            f"signing key file {path} holds no unencrypted PEM private key"
        ) from None
    if not isinstance(private, ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey):
        raise UnusableKeyFile(f"signing key file {path}: use a P-256 or an Ed25519 key")
    _loaded[cached] = private
    return private


def _new_key(*, algorithm: str | None, import_from: Path | None, state: str) -> SigningKey:
    """Make a key's record, its private half sealed in it; the caller holds the transaction."""
    if import_from is not None:
        private = read_private_key(import_from)
        path, generated = import_from.resolve(), False
    else:
        private = _generate(algorithm or settings.VIRGO_SIGNING_ALGORITHM)
        path, generated = None, True
    found_algorithm, jwk = _public_jwk(private)
    if algorithm and import_from is not None and algorithm != found_algorithm:
        raise KeyRefused(f"{import_from} holds an {found_algorithm} key, not {algorithm}")
    kid = jwk["kid"]
    if SigningKey.objects.filter(kid=kid).exists():
        raise KeyRefused(f"key {kid} is already known (a key is never used twice)")
    try:
        sealed = seal_private(kid, private)
    except sealing.KeyCannotBeOpened as refused:
        raise CannotSign(str(refused)) from None
    with transaction.atomic():
        return SigningKey.objects.create(
            kid=kid,
            algorithm=found_algorithm,
            public_jwk=jwk,
            state=state,
            private_key_sealed=sealed,
            private_key_path=str(path or ""),
            generated=generated,
        )


def _forget_private(key: SigningKey) -> None:
    """A key that signs no more leaves no private key of Virgo's behind: not its sealed form, nor
    the file a key made before sealing lay in (on this machine; an imported file is the
    operator's)."""
    key.private_key_sealed = ""
    key.save(update_fields=["private_key_sealed"])
    if key.generated and key.private_key_path:
        with contextlib.suppress(FileNotFoundError):
            Path(key.private_key_path).unlink()


# The signing set --------------------------------------------------------------------------------


def signing_keys() -> list[SigningKey]:
    """The keys every card is signed by: the active one first, then the retiring ones."""
    keys = list(SigningKey.objects.filter(state__in=["active", "retiring"]))
    return sorted(keys, key=lambda key: key.state != SigningKey.State.ACTIVE)


def signers() -> list[Signer]:
    """The signing set with its private keys; the first key is made here if there is none.

    Refused (base_url.BaseUrlMismatch) in a process whose public base URL is not the
    installation's: every signature names the JWKS at this process's URL, and what it signed
    would be signed again by the next machine (VX-SCALE-4).
    """
    base_url.claim_base_url()
    keys = signing_keys()
    if not keys or keys[0].state != SigningKey.State.ACTIVE:
        ensure_active_key()
        keys = signing_keys()
    return [Signer(key, open_private(key)) for key in keys]


def check_can_sign() -> None:
    """Raise CannotSign, saying why, when this process could not sign a card now: a key of the
    signing set that it cannot open. With no key yet it must be able to seal the first one (the
    first card makes it). /readyz (settings.VIRGO_SIGNING_READINESS) and `check --deploy`."""
    keys = signing_keys()
    if not keys:
        try:
            sealing.current_fingerprint()
        except sealing.KeyCannotBeOpened as refused:
            raise CannotSign(str(refused)) from None
        return
    for key in keys:
        open_private(key)


def ensure_active_key() -> SigningKey:
    """The active key, made (ES256 unless VIRGO_SIGNING_ALGORITHM says otherwise) when none is:
    a fresh installation signs its first card without an operator step."""
    active = SigningKey.objects.filter(state=SigningKey.State.ACTIVE).first()
    if active is not None:
        return active
    try:
        with transaction.atomic():
            key = _new_key(algorithm=None, import_from=None, state=SigningKey.State.ACTIVE)
            _record(AuditEvent.Kind.KEY_CREATED, key, None, why="the first card needed one")
            return key
    except IntegrityError:
        # Another process made the first key at the same moment; its key is the one.
        return SigningKey.objects.get(state=SigningKey.State.ACTIVE)


def public_jwks() -> dict[str, list[dict[str, Any]]]:
    """The JWKS peers verify cards with: exactly the keys that sign, nothing retired or revoked."""
    return {"keys": [key.public_jwk for key in signing_keys()]}


# Operations -------------------------------------------------------------------------------------


def _record(kind: AuditEvent.Kind, key: SigningKey, actor: Any, **extra: Any) -> None:
    audit.record(
        kind,
        actor=actor,
        data={"kid": key.kid, "algorithm": key.algorithm, **extra},
    )


def _signing_set_changed() -> None:
    queue_after_commit(FAN_OUT_RESIGN)
    # The revocation status list is signed by the same set: every web process signs it again
    # on its next request (cards.status_list), in step with this change's commit.
    status_list_changed()


def create_key(
    *, algorithm: str | None = None, import_from: Path | None = None, actor: Any = None
) -> SigningKey:
    """The first active key. With one active already, a new key is a rotation."""
    with transaction.atomic():
        if SigningKey.objects.select_for_update().filter(state="active").exists():
            raise KeyRefused("an active key exists; `virgo keys rotate` replaces it")
        key = _new_key(algorithm=algorithm, import_from=import_from, state="active")
        _record(AuditEvent.Kind.KEY_CREATED, key, actor, imported=import_from is not None)
        _signing_set_changed()
    return key


def rotate(
    *, algorithm: str | None = None, import_from: Path | None = None, actor: Any = None
) -> SigningKey:
    """A new active key; the old one keeps signing and stays in the JWKS for the grace period
    (VIRGO_SIGNING_KEY_GRACE_SECONDS), then retires. Every card is re-signed by both."""
    with transaction.atomic():
        now = timezone.now()
        active = SigningKey.objects.select_for_update().filter(state="active")
        replaced = list(active.values_list("kid", flat=True))
        active.update(state=SigningKey.State.RETIRING, retire_after=now + grace())
        key = _new_key(algorithm=algorithm, import_from=import_from, state="active")
        _record(
            AuditEvent.Kind.KEY_ROTATED,
            key,
            actor,
            replaces=replaced,
            imported=import_from is not None,
        )
        _signing_set_changed()
    return key


def _get(kid: str) -> SigningKey:
    key = SigningKey.objects.select_for_update().filter(kid=kid).first()
    if key is None:
        raise KeyRefused(f"no signing key has kid {kid!r} (see `virgo keys list`)")
    return key


def retire(kid: str, *, actor: Any = None) -> SigningKey:
    """End a retiring key's grace now: out of the JWKS, its signatures dropped from every card."""
    with transaction.atomic():
        key = _get(kid)
        if key.state == SigningKey.State.ACTIVE:
            raise KeyRefused(f"key {kid} is the active key: rotate first, then retire it")
        if key.state != SigningKey.State.RETIRING:
            raise KeyRefused(f"key {kid} is {key.state} already: it signs nothing")
        key.state, key.retired_at = SigningKey.State.RETIRED, timezone.now()
        key.save(update_fields=["state", "retired_at"])
        _forget_private(key)
        _record(AuditEvent.Kind.KEY_RETIRED, key, actor)
        _signing_set_changed()
    return key


def revoke(kid: str, *, actor: Any = None) -> SigningKey:
    """Withdraw a key at once: out of the JWKS on the next request, every card it signed
    re-signed without it. Revoking the active key puts a new one in its place first."""
    with transaction.atomic():
        key = _get(kid)
        if key.state == SigningKey.State.REVOKED:
            raise KeyRefused(f"key {kid} is revoked already")
        replacement = ""
        if key.state == SigningKey.State.ACTIVE:
            key.state = SigningKey.State.REVOKED
            key.save(update_fields=["state"])
            replacement = _new_key(algorithm=key.algorithm, import_from=None, state="active").kid
        key.state, key.revoked_at = SigningKey.State.REVOKED, timezone.now()
        key.save(update_fields=["state", "revoked_at"])
        _forget_private(key)
        _record(AuditEvent.Kind.KEY_REVOKED, key, actor, replaced_by=replacement)
        _signing_set_changed()
    return key


def retire_due_keys() -> list[str]:
    """Retire every retiring key whose grace has ended (the reconciler's sweep); their kids."""
    due = list(
        SigningKey.objects.filter(
            state=SigningKey.State.RETIRING, retire_after__lte=timezone.now()
        ).values_list("kid", flat=True)
    )
    for kid in due:
        with contextlib.suppress(KeyRefused):
            retire(kid)
    return due


# Sealing ----------------------------------------------------------------------------------------


@dataclass
class Rewrapped:
    """What `rewrap` did: kids sealed again under the current KEK, kids sealed from their file
    (made before sealing), kids already under it, and the kids it could not seal, with why."""

    resealed: list[str]
    sealed_from_file: list[str]
    current: list[str]
    left: list[tuple[str, str]]


def rewrap() -> Rewrapped:
    """Seal every key that still signs under the current key-encryption key (the first of
    VIRGO_KEY_ENCRYPTION_KEYS), so an older KEK can then be removed; a key still only in a file
    is sealed from it when the file is on this machine. A key it cannot open is left, and said."""
    done = Rewrapped([], [], [], [])
    current = sealing.current_fingerprint()
    with transaction.atomic():
        live = SigningKey.objects.select_for_update().filter(state__in=["active", "retiring"])
        for key in live.order_by("pk"):
            if key.private_key_sealed and sealing.sealed_under(key.private_key_sealed) == current:
                done.current.append(key.kid)
                continue
            try:
                private = open_private(key)
            except CannotSign as refused:
                done.left.append((key.kid, str(refused)))
                continue
            (done.resealed if key.private_key_sealed else done.sealed_from_file).append(key.kid)
            key.private_key_sealed = seal_private(key.kid, private)
            key.save(update_fields=["private_key_sealed"])
    return done
