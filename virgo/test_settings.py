"""The test suite's settings: the embedded default unless the environment names services."""

import os

os.environ.setdefault("VIRGO_EMBEDDED", "1")

from virgo.settings import *  # noqa: F403
