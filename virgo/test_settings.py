"""The test suite's settings: the embedded default unless the environment names services."""

import os

os.environ.setdefault("VIRGO_EMBEDDED", "1")

from virgo.settings import *  # noqa: F403

# Every factory owner has a password: hashing each with the production work factor (~0.4 s
# here) would dominate the suite's time, and no test is about the hash's strength.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
