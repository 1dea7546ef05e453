"""API authentication shared by every DRF view (REST_FRAMEWORK's DEFAULT_AUTHENTICATION_CLASSES).

Its own module: DRF imports the authentication classes while it defines APIView, so this must
not import rest_framework.views.
"""

import re
from typing import Any

from rest_framework import authentication, exceptions

# What a key of rest_framework.authtoken can look like (it issues 40 hexadecimal characters).
TOKEN_KEY = re.compile(r"[0-9A-Za-z]{1,40}")


class TokenAuthentication(authentication.TokenAuthentication):
    """DRF's token authentication, refusing a malformed key before the database sees it.

    A key no token can have is the same 401 as a wrong one. Passed on to the lookup, a NUL byte
    in it would make PostgreSQL raise, and every API endpoint answer 500 instead of refusing.
    """

    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        if not TOKEN_KEY.fullmatch(key):
            raise exceptions.AuthenticationFailed("Invalid token.")
        return super().authenticate_credentials(key)
