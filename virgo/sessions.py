"""Database sessions that never look up a key Django could not have issued.

Django issues session keys of lowercase letters and digits, and looks up whatever the cookie
says. A cookie with a NUL byte then made PostgreSQL refuse the query: every page that consults
the session, the public card endpoint for an unlisted persona included, answered 500. A key
outside the alphabet is treated as no session, as an unknown one is.
"""

from django.contrib.sessions.backends.base import VALID_KEY_CHARS
from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore

_ALPHABET = frozenset(VALID_KEY_CHARS)


class SessionStore(DatabaseSessionStore):
    def _validate_session_key(self, key: str | None) -> bool:
        return bool(super()._validate_session_key(key)) and set(key or "") <= _ALPHABET
