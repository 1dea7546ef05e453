"""Whether this process can serve its static files (VX-SCALE-2).

Production serves `collectstatic` output through a manifest storage: every `{% static %}` asks
the manifest (STATIC_ROOT/staticfiles.json) for the hashed name, and a missing manifest makes
each admin page a 500 ("Missing staticfiles manifest entry"). The files belong to the release
(`make static`), not to VIRGO_HOME, so a new machine has them; a process whose STATIC_ROOT lacks
the manifest fails `virgo check --deploy` (virgo.E021) and /readyz (`static`) instead of serving
500s. WhiteNoise reads STATIC_ROOT once at start-up, so a process started before the files were
collected stays unready until it is restarted.
"""

from pathlib import Path

from django.contrib.staticfiles.storage import ManifestFilesMixin
from django.core.files.storage import storages


def static_files_problem() -> str | None:
    """What stops this process from serving its static files, or None."""
    storage = storages["staticfiles"]
    if not isinstance(storage, ManifestFilesMixin):
        return None
    manifest = Path(storage.location) / storage.manifest_name
    if manifest.is_file():
        return None
    return f"static files not collected: {manifest} is missing"


class StaticFilesNotCollected(RuntimeError):
    pass


def check_static_files() -> None:
    """The /readyz check: raises when the manifest is missing."""
    if problem := static_files_problem():
        raise StaticFilesNotCollected(problem)
