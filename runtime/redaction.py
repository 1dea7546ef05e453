"""Secret values are never stored, sent or logged: only their fingerprint and a marker are.

What looks like a secret credential value is what the patterns below match (the policy refuses
any call carrying one, runtime.rules rule "secret-values"). Wherever an operation is kept or
passed on (a refusal record, a decision record, a confirmation card, a log line), such a value,
and the content of a write to a credential file, is replaced by

    {"redacted": <why>, "sha256": <hex of its UTF-8 bytes>, "bytes": <their number>}

so the human still sees that something was withheld, how long it was and which it was (the
sha256 of a file's content is the file's own sha256). What decides the operation is digested
before this (runtime.confirmations keeps the digest of the real operation), so redaction never
lets one operation pass for another.
"""

import re
from collections.abc import Mapping
from typing import Any

from runtime.params import fingerprint

SECRET_VALUE = "secret-value"
CREDENTIAL_FILE_CONTENT = "credential-file-content"

SECRET_VALUE_PATTERNS = tuple(
    re.compile(pattern)
    for pattern in (
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----",
        r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
        r"\bgh[pousr]_[A-Za-z0-9]{36,}\b",
        r"\bgithub_pat_[A-Za-z0-9_]{22,}\b",
        r"\bxox[abprs]-[A-Za-z0-9-]{10,}\b",
        r"\bsk-[A-Za-z0-9_-]{20,}\b",
        r"\bAIza[0-9A-Za-z_-]{35}\b",
    )
)


def looks_secret(value: str) -> bool:
    return any(pattern.search(value) for pattern in SECRET_VALUE_PATTERNS)


def redacted(value: Any, why: str) -> dict[str, Any]:
    """The marker that stands in for a withheld value."""
    return {"redacted": why, **fingerprint(value)}


def redact_secrets(value: Any) -> Any:
    """The value with every string that looks like a secret (a key or an item) withheld."""
    if isinstance(value, str):
        return redacted(value, SECRET_VALUE) if looks_secret(value) else value
    if isinstance(value, Mapping):
        return {_redacted_key(key): redact_secrets(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_secrets(item) for item in value]
    return value


def _redacted_key(key: Any) -> Any:
    if isinstance(key, str) and looks_secret(key):
        return f"[{SECRET_VALUE} sha256:{fingerprint(key)['sha256']}]"
    return key


def redact_text(text: str) -> str:
    """A message (a refusal's reason) that quotes a secret is withheld whole: a key's body is
    not what the patterns match, so cutting out the match would leave the rest of it."""
    if not looks_secret(text):
        return text
    mark = fingerprint(text)
    return (
        f"[withheld: the text quoted a value that looks like a secret; {SECRET_VALUE} "
        f"sha256:{mark['sha256']}, {mark['bytes']} bytes]"
    )
