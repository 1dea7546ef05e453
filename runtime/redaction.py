"""Secret values are never stored, sent or logged: only their fingerprint and a marker are.

What looks like a secret credential value is what runtime.credentials finds (VX-SEC-14: the
detect-secrets plugins, the same detector that refuses a call carrying one, runtime.rules rule
"secret-values", and a read of a file holding one). Wherever an operation is kept or
passed on (a refusal record, a decision record, a confirmation card, a log line), such a value,
and the content of a write to a credential file, is replaced by

    {"redacted": <why>, "sha256": <hex of its UTF-8 bytes>, "bytes": <their number>}

so the human still sees that something was withheld, how long it was and which it was (the
sha256 of a file's content is the file's own sha256). What decides the operation is digested
before this (runtime.confirmations keeps the digest of the real operation), so redaction never
lets one operation pass for another.
"""

from collections.abc import Mapping
from typing import Any

from runtime.credentials import looks_secret
from runtime.tools.params import fingerprint

SECRET_VALUE = "secret-value"
CREDENTIAL_FILE_CONTENT = "credential-file-content"


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
    not what the detector matches, so cutting out the match would leave the rest of it."""
    if not looks_secret(text):
        return text
    mark = fingerprint(text)
    return (
        f"[withheld: the text quoted a value that looks like a secret; {SECRET_VALUE} "
        f"sha256:{mark['sha256']}, {mark['bytes']} bytes]"
    )
