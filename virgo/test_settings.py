"""The test suite's settings: the embedded default unless the environment names services."""

import os
import tempfile
from pathlib import Path

os.environ.setdefault("VIRGO_EMBEDDED", "1")
# Never the checkout's own installation: `make run` writes var/virgo.env with its port and keys,
# which would change what the tests see (each test then gets a private VIRGO_HOME of its own).
os.environ.setdefault(
    "VIRGO_HOME", str(Path(tempfile.gettempdir()) / f"virgo-test-home-{os.getuid()}")
)

from virgo.settings import *  # noqa: F403

# Every factory owner has a password: hashing each with the production work factor (~0.4 s
# here) would dominate the suite's time, and no test is about the hash's strength.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
