"""The keys that sign public cards: their private files, and their life (create, rotate, retire,
revoke). One write function per operation; the CLI (`virgo keys`) and the admin call these.

A private key is a PKCS#8 PEM file, owner-private (0600, in a 0700 directory), generated into
VIRGO_SIGNING_KEYS_DIR (default `$VIRGO_HOME/signing-keys`) or imported from a file the
operator provides. A file any other user could read is refused, not used: a key others may
have copied cannot vouch for anything. Nothing here ever puts a key's bytes in a log line, an
error, a database row or the admin; errors name the file and what is wrong with it.

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

from cards.models import SigningKey
from virgo.home import private_directory
from virgo.queueing import queue_after_commit

FAN_OUT_RESIGN = "settling.tasks.fan_out_resign"
FILE_MODE = 0o600
PrivateKey = ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey


class KeyRefused(Exception):
    """A key operation that cannot be done as asked; the message says why and what to do."""


class UnusableKeyFile(KeyRefused):
    """A private key file that is missing, not private, or not a key Virgo can sign with."""


@dataclass(frozen=True)
class Signer:
    """A key that signs: its record and its private half, loaded from its file."""

    key: SigningKey
    private: PrivateKey

    @property
    def kid(self) -> str:
        return self.key.kid

    @property
    def algorithm(self) -> str:
        return self.key.algorithm


def keys_dir() -> Path:
    configured = getattr(settings, "VIRGO_SIGNING_KEYS_DIR", "")
    return Path(configured) if configured else Path(settings.VIRGO_HOME) / "signing-keys"


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


def _write_private(path: Path, private: PrivateKey) -> None:
    data = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    private_directory(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


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
    """Make a key's record (and file, unless imported); the caller holds the transaction."""
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
    if path is None:
        path = keys_dir() / f"{kid}.pem"
        _write_private(path, private)
    try:
        with transaction.atomic():
            return SigningKey.objects.create(
                kid=kid,
                algorithm=found_algorithm,
                public_jwk=jwk,
                state=state,
                private_key_path=str(path),
                generated=generated,
            )
    except BaseException:
        if generated:
            path.unlink(missing_ok=True)
        raise


def _forget_private(key: SigningKey) -> None:
    """A key that signs no more leaves no private key of Virgo's behind."""
    if key.generated:
        with contextlib.suppress(FileNotFoundError):
            Path(key.private_key_path).unlink()


# The signing set --------------------------------------------------------------------------------


def signing_keys() -> list[SigningKey]:
    """The keys every card is signed by: the active one first, then the retiring ones."""
    keys = list(SigningKey.objects.filter(state__in=["active", "retiring"]))
    return sorted(keys, key=lambda key: key.state != SigningKey.State.ACTIVE)


def signers() -> list[Signer]:
    """The signing set with its private keys; the first key is made here if there is none."""
    keys = signing_keys()
    if not keys or keys[0].state != SigningKey.State.ACTIVE:
        ensure_active_key()
        keys = signing_keys()
    return [Signer(key, read_private_key(Path(key.private_key_path))) for key in keys]


def ensure_active_key() -> SigningKey:
    """The active key, made (ES256 unless VIRGO_SIGNING_ALGORITHM says otherwise) when none is:
    a fresh installation signs its first card without an operator step."""
    active = SigningKey.objects.filter(state=SigningKey.State.ACTIVE).first()
    if active is not None:
        return active
    try:
        return _new_key(algorithm=None, import_from=None, state=SigningKey.State.ACTIVE)
    except IntegrityError:
        # Another process made the first key at the same moment; its key is the one.
        return SigningKey.objects.get(state=SigningKey.State.ACTIVE)


def public_jwks() -> dict[str, list[dict[str, Any]]]:
    """The JWKS peers verify cards with: exactly the keys that sign, nothing retired or revoked."""
    return {"keys": [key.public_jwk for key in signing_keys()]}


# Operations -------------------------------------------------------------------------------------


def _signing_set_changed() -> None:
    queue_after_commit(FAN_OUT_RESIGN)


def create_key(*, algorithm: str | None = None, import_from: Path | None = None) -> SigningKey:
    """The first active key. With one active already, a new key is a rotation."""
    with transaction.atomic():
        if SigningKey.objects.select_for_update().filter(state="active").exists():
            raise KeyRefused("an active key exists; `virgo keys rotate` replaces it")
        key = _new_key(algorithm=algorithm, import_from=import_from, state="active")
        _signing_set_changed()
    return key


def rotate(*, algorithm: str | None = None, import_from: Path | None = None) -> SigningKey:
    """A new active key; the old one keeps signing and stays in the JWKS for the grace period
    (VIRGO_SIGNING_KEY_GRACE_SECONDS), then retires. Every card is re-signed by both."""
    with transaction.atomic():
        now = timezone.now()
        SigningKey.objects.select_for_update().filter(state="active").update(
            state=SigningKey.State.RETIRING, retire_after=now + grace()
        )
        key = _new_key(algorithm=algorithm, import_from=import_from, state="active")
        _signing_set_changed()
    return key


def _get(kid: str) -> SigningKey:
    key = SigningKey.objects.select_for_update().filter(kid=kid).first()
    if key is None:
        raise KeyRefused(f"no signing key has kid {kid!r} (see `virgo keys list`)")
    return key


def retire(kid: str) -> SigningKey:
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
        _signing_set_changed()
    return key


def revoke(kid: str) -> SigningKey:
    """Withdraw a key at once: out of the JWKS on the next request, every card it signed
    re-signed without it. Revoking the active key puts a new one in its place first."""
    with transaction.atomic():
        key = _get(kid)
        if key.state == SigningKey.State.REVOKED:
            raise KeyRefused(f"key {kid} is revoked already")
        if key.state == SigningKey.State.ACTIVE:
            key.state = SigningKey.State.REVOKED
            key.save(update_fields=["state"])
            _new_key(algorithm=key.algorithm, import_from=None, state="active")
        key.state, key.revoked_at = SigningKey.State.REVOKED, timezone.now()
        key.save(update_fields=["state", "revoked_at"])
        _forget_private(key)
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
